// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Synchronization

extension EmulatorState {
    /// What the registry says about a token a push is addressed to.
    enum TokenVerdict: Sendable, Equatable {
        case deliverable
        case unknown
        case wrongEnvironment
        case notForTopic
        case unregistered(atMilliseconds: Int64)
        case expired
        case rateLimited
    }

    /// A push that passed every check, ready to be delivered or stored.
    struct AcceptedPush: Sendable {
        var apnsID: String
        var uniqueID: String
        var pushType: String
        var topic: String
        var priority: Int
        var collapseID: String?
        var expiration: Int64?
        var payload: [UInt8]
        var channelID: String? = nil
    }

    func verdict(
        token: Substring,
        environment: APNSEnvironment,
        topic: Substring,
        now: Int64,
        rateLimit: (count: Int, seconds: Int)?
    ) -> TokenVerdict {
        self.storage.withLock { storage in
            guard let index = Self.index(of: token, in: storage) else { return .unknown }
            return Self.verdict(
                &storage.devices.values[index], environment: environment, topic: topic, now: now, rateLimit: rateLimit
            )
        }
    }

    /// The record is read and written in place, not copied out of the registry and back.
    private static func verdict(
        _ record: inout DeviceRecord,
        environment: APNSEnvironment,
        topic: Substring,
        now: Int64,
        rateLimit: (count: Int, seconds: Int)?
    ) -> TokenVerdict {
        guard record.snapshot.environment == environment else { return .wrongEnvironment }
        guard record.snapshot.topic == topic else { return .notForTopic }
        if let at = record.snapshot.uninstalledAtMilliseconds { return .unregistered(atMilliseconds: at) }
        if record.snapshot.tokenExpiredAtMilliseconds != nil { return .expired }
        if let rateLimit {
            let windowStart = now - Int64(rateLimit.seconds) * 1000
            record.rateWindow.removeAll { $0 <= windowStart }
            guard record.rateWindow.count < rateLimit.count else { return .rateLimited }
            record.rateWindow.append(now)
        }
        return .deliverable
    }

    /// Where a token as sent is in the registry: tokens are stored in lowercase, clients may send either.
    static func index(of token: Substring, in storage: Storage) -> Dictionary<String, DeviceRecord>.Index? {
        let exact = String(token)
        if let index = storage.devices.index(forKey: exact) { return index }
        let lower = exact.lowercased()
        return lower == exact ? nil : storage.devices.index(forKey: lower)
    }

    /// Records an accepted device push and delivers it: at once to an online device, into the
    /// single storage slot of an offline one (expiration permitting).
    func accept(_ push: AcceptedPush, token: Substring?, now: Int64) {
        let calls = self.storage.withLock { storage -> [(Listener, ReceivedNotification)] in
            storage.counters.accepted += 1
            guard let token, let index = Self.index(of: token, in: storage) else {
                storage.counters.acceptedForUnknownTokens += 1
                return []
            }
            let snapshot = storage.devices.values[index].snapshot
            let (online, notificationsEnabled) = (snapshot.online, snapshot.notificationsEnabled)
            // The app may have been removed between the token check and now: APNs accepted it, the
            // device never shows it.
            if snapshot.uninstalledAtMilliseconds != nil || snapshot.tokenExpiredAtMilliseconds != nil {
                storage.counters.discarded += 1
                return []
            }
            let notification = ReceivedNotification(
                uniqueID: push.uniqueID, apnsID: push.apnsID, acceptedAtMilliseconds: now,
                deliveredAtMilliseconds: now, pushType: push.pushType, topic: push.topic, priority: push.priority,
                collapseID: push.collapseID, expiration: push.expiration, payload: push.payload,
                channelID: nil, wasStored: false
            )
            if push.pushType == "alert", !notificationsEnabled {
                storage.counters.discarded += 1
                return []
            }
            if push.pushType == "liveactivity", let channel = Self.startedChannel(push.payload),
                let record = storage.channels[channel], record.channel.bundleID == snapshot.bundleID,
                record.channel.environment == snapshot.environment
            {
                storage.devices.values[index].channels.insert(channel)
            }
            guard online else {
                Self.store(notification, token: storage.devices.keys[index], storage: &storage, now: now)
                return []
            }
            return Self.deliver(notification, at: index, storage: &storage, inboxCapacity: self.inboxCapacity)
        }
        for (listener, notification) in calls { listener(notification) }
    }

    /// The channel a Live Activity start push subscribes its activity to (`input-push-channel`).
    private static func startedChannel(_ payload: [UInt8]) -> String? {
        guard let json = try? JSONValue.parse(payload), let aps = json["aps"],
            aps["event"]?.stringValue == "start"
        else { return nil }
        return aps["input-push-channel"]?.stringValue
    }

    /// Seconds to milliseconds, saturating instead of overflowing on absurd values.
    static func milliseconds(_ seconds: Int64) -> Int64 {
        let (result, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        return overflow ? (seconds < 0 ? Int64.min : Int64.max) : result
    }

    private static func store(_ notification: ReceivedNotification, token: String, storage: inout Storage, now: Int64) {
        guard let expiration = notification.expiration.map(Self.milliseconds) ?? Optional(now + maximumStorageMilliseconds),
            expiration != 0
        else {
            storage.counters.discarded += 1  // expiration 0: one attempt, never stored
            return
        }
        let expiresAt = min(expiration, now + maximumStorageMilliseconds)
        guard expiresAt > now else {
            storage.counters.expired += 1
            return
        }
        if storage.devices[token]!.stored != nil { storage.counters.discarded += 1 }
        var stored = notification
        stored.wasStored = true
        storage.devices[token]!.stored = Stored(notification: stored, expiresAt: expiresAt)
        storage.counters.stored += 1
    }

    /// Puts a notification in the device's inbox and returns the listeners to call (outside the lock).
    static func deliver(
        _ notification: ReceivedNotification,
        token: String,
        storage: inout Storage,
        inboxCapacity: Int
    ) -> [(Listener, ReceivedNotification)] {
        guard let index = storage.devices.index(forKey: token) else { return [] }
        return Self.deliver(notification, at: index, storage: &storage, inboxCapacity: inboxCapacity)
    }

    static func deliver(
        _ notification: ReceivedNotification,
        at index: Dictionary<String, DeviceRecord>.Index,
        storage: inout Storage,
        inboxCapacity: Int
    ) -> [(Listener, ReceivedNotification)] {
        Self.receive(notification, into: &storage.devices.values[index], counters: &storage.counters, inboxCapacity: inboxCapacity)
        guard !storage.listeners.isEmpty, let listeners = storage.listeners[storage.devices.keys[index]], !listeners.isEmpty else {
            return []
        }
        return listeners.sorted { $0.key < $1.key }.map { ($0.value, notification) }
    }

    /// The record is changed in place: a copy held across the change would copy the whole inbox.
    private static func receive(
        _ notification: ReceivedNotification,
        into record: inout DeviceRecord,
        counters: inout EmulatorCounters,
        inboxCapacity: Int
    ) {
        if let collapseID = notification.collapseID,
            let index = record.inbox.firstIndex(where: { $0.collapseID == collapseID && $0.topic == notification.topic })
        {
            record.inbox.remove(at: index)
            counters.collapsed += 1
        }
        record.inbox.append(notification)
        if record.inbox.count > inboxCapacity { record.inbox.removeFirst() }
        record.snapshot.receivedCount += 1
        if let channel = notification.channelID {
            record.lastChannelMessage[channel] = notification.uniqueID
        }
        counters.delivered += 1
    }

    /// Delivers the stored notification (and stored channel messages) to a device that came online.
    static func flushStored(token: String, storage: inout Storage, now: Int64, inboxCapacity: Int) -> [(Listener, ReceivedNotification)] {
        var calls: [(Listener, ReceivedNotification)] = []
        if let stored = storage.devices[token]!.stored {
            storage.devices[token]!.stored = nil
            if stored.expiresAt > now {
                var notification = stored.notification
                notification.deliveredAtMilliseconds = now
                calls += Self.deliver(notification, token: token, storage: &storage, inboxCapacity: inboxCapacity)
            } else {
                storage.counters.expired += 1
            }
        }
        let snapshot = storage.devices[token]!.snapshot
        guard snapshot.uninstalledAtMilliseconds == nil, snapshot.tokenExpiredAtMilliseconds == nil else { return calls }
        for channelID in storage.devices[token]!.channels.sorted() {
            guard let stored = storage.channels[channelID]?.stored, stored.expiresAt > now,
                storage.devices[token]!.lastChannelMessage[channelID] != stored.notification.uniqueID
            else { continue }
            var notification = stored.notification
            notification.deliveredAtMilliseconds = now
            calls += Self.deliver(notification, token: token, storage: &storage, inboxCapacity: inboxCapacity)
        }
        return calls
    }

    static func sweepExpired(storage: inout Storage, now: Int64) {
        for (token, record) in storage.devices {
            if let stored = record.stored, stored.expiresAt <= now {
                storage.devices[token]!.stored = nil
                storage.counters.expired += 1
            }
        }
    }

    func recordRejection(_ reason: APNSReason) {
        self.storage.withLock { $0.counters.rejected[reason.rawValue, default: 0] += 1 }
    }
}

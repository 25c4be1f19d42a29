// SPDX-License-Identifier: Apache-2.0
public import APNSModels
import Synchronization

extension EmulatorState {
    enum ChannelCreation: Sendable {
        case created(BroadcastChannel)
        case limitReached
    }

    /// A new channel with a random id (APNs picks ids; clients cannot).
    func createChannel(bundleID: String, environment: APNSEnvironment, storagePolicy: Int, now: Int64) -> ChannelCreation {
        self.storage.withLock { storage in
            let app = bundleID + "/" + environment.rawValue
            guard storage.channelCounts[app, default: 0] < Self.maximumChannelsPerApp,
                storage.channels.count < Self.maximumChannels
            else { return .limitReached }
            storage.channelCounts[app, default: 0] += 1
            var bytes: [UInt8] = []
            for _ in 0..<16 { bytes.append(UInt8.random(in: 0...255, using: &storage.random)) }
            let channel = BroadcastChannel(
                id: Base64URL.encodeStandard(bytes), bundleID: bundleID, environment: environment,
                storagePolicy: storagePolicy, createdAtMilliseconds: now
            )
            storage.channels[channel.id] = ChannelRecord(channel: channel)
            return .created(channel)
        }
    }

    /// The channel with this id if it belongs to the app and environment.
    public func channel(id: String, bundleID: String, environment: APNSEnvironment) -> BroadcastChannel? {
        self.storage.withLock { storage in
            guard let record = storage.channels[id], record.channel.bundleID == bundleID,
                record.channel.environment == environment
            else { return nil }
            return record.channel
        }
    }

    func deleteChannel(id: String) {
        self.storage.withLock { storage in
            guard let channel = storage.channels.removeValue(forKey: id)?.channel else { return }
            storage.channelCounts[channel.bundleID + "/" + channel.environment.rawValue, default: 1] -= 1
            for token in storage.devices.keys { storage.devices[token]!.channels.remove(id) }
        }
    }

    public func channels(bundleID: String? = nil, environment: APNSEnvironment? = nil) -> [BroadcastChannel] {
        self.storage.withLock { storage in
            storage.channels.values.map(\.channel).filter {
                (bundleID == nil || $0.bundleID == bundleID) && (environment == nil || $0.environment == environment)
            }
        }.sorted { ($0.createdAtMilliseconds, $0.id) < ($1.createdAtMilliseconds, $1.id) }
    }

    /// Subscribes a device to a channel of its own app and environment, as an activity started
    /// with the channel would be.
    public func subscribe(token: String, channelID: String) -> DeviceSnapshot? {
        self.storage.withLock { storage in
            let token = token.lowercased()
            guard let device = storage.devices[token]?.snapshot, let channel = storage.channels[channelID]?.channel,
                channel.bundleID == device.bundleID, channel.environment == device.environment
            else { return nil }
            storage.devices[token]!.channels.insert(channelID)
            return Self.snapshot(storage.devices[token]!)
        }
    }

    public func unsubscribe(token: String, channelID: String) -> DeviceSnapshot? {
        self.storage.withLock { storage in
            let token = token.lowercased()
            guard storage.devices[token] != nil else { return nil }
            storage.devices[token]!.channels.remove(channelID)
            return Self.snapshot(storage.devices[token]!)
        }
    }

    /// Delivers a broadcast to the online, installed subscribers of the channel; keeps it for the
    /// offline ones when the channel stores messages. Returns how many devices received it.
    @discardableResult
    func broadcast(_ push: AcceptedPush, channelID: String, now: Int64) -> Int {
        let (calls, devices) = self.storage.withLock { storage -> ([(Listener, ReceivedNotification)], Int) in
            storage.counters.accepted += 1
            guard let record = storage.channels[channelID] else { return ([], 0) }
            let notification = ReceivedNotification(
                uniqueID: push.uniqueID, apnsID: push.apnsID, acceptedAtMilliseconds: now,
                deliveredAtMilliseconds: now, pushType: push.pushType, topic: push.topic, priority: push.priority,
                collapseID: nil, expiration: push.expiration, payload: push.payload, channelID: channelID,
                wasStored: false
            )
            if record.channel.storagePolicy == 1 {
                let requested = push.expiration.map { $0 == 0 ? now : Self.milliseconds($0) } ?? (now + Self.channelStorageMilliseconds)
                let expiresAt = min(requested, now + Self.channelStorageMilliseconds)
                if expiresAt > now {
                    var stored = notification
                    stored.wasStored = true
                    storage.channels[channelID]!.stored = Stored(notification: stored, expiresAt: expiresAt)
                }
            }
            var calls: [(Listener, ReceivedNotification)] = []
            var devices = 0
            let subscribers = storage.devices.filter {
                $0.value.channels.contains(channelID) && $0.value.snapshot.uninstalledAtMilliseconds == nil
                    && $0.value.snapshot.tokenExpiredAtMilliseconds == nil
            }
            for token in subscribers.keys.sorted() where storage.devices[token]!.snapshot.online {
                calls += Self.deliver(notification, token: token, storage: &storage, inboxCapacity: self.inboxCapacity)
                devices += 1
            }
            return (calls, devices)
        }
        for (listener, notification) in calls { listener(notification) }
        return devices
    }
}

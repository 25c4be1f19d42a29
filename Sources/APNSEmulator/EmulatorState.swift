// SPDX-License-Identifier: Apache-2.0
public import APNSModels
import DequeModule
import Synchronization

/// Everything the emulator remembers across connections: keys, virtual devices, channels,
/// counters, armed faults and the request log. Thread-safe; every method takes the lock once.
public final class EmulatorState: Sendable {
    public typealias Listener = @Sendable (ReceivedNotification) -> Void

    /// How long APNs keeps a notification for an offline device at most.
    public static let maximumStorageMilliseconds: Int64 = 30 * 86_400_000
    /// How long a channel with storage policy 1 keeps its newest message.
    public static let channelStorageMilliseconds: Int64 = 8 * 3_600_000
    public static let maximumChannelsPerApp = 10_000
    /// All apps together: keys may name any bundle id, so the emulator caps the total too.
    public static let maximumChannels = 200_000

    struct Stored: Sendable {
        var notification: ReceivedNotification
        var expiresAt: Int64
    }

    struct DeviceRecord: Sendable {
        var snapshot: DeviceSnapshot
        var inbox: Deque<ReceivedNotification> = []
        var stored: Stored?
        var rateWindow: [Int64] = []
        var channels: Set<String> = []
        /// The newest broadcast message each channel delivered to this device.
        var lastChannelMessage: [String: String] = [:]
    }

    struct ChannelRecord: Sendable {
        var channel: BroadcastChannel
        var stored: Stored?
    }

    struct Storage: Sendable {
        var keys: [String: RegisteredKey] = [:]
        /// Bumped whenever a key is registered or removed, so cached verifications go stale.
        var keyGeneration = 0
        var devices: [String: DeviceRecord] = [:]
        var channels: [String: ChannelRecord] = [:]
        var channelCounts: [String: Int] = [:]
        var counters = EmulatorCounters()
        var faults: [FaultRule] = []
        var nextFaultID = 1
        var log: [RequestLogEntry] = []
        var logStart = 0
        var random: Xoshiro256
        var listeners: [String: [Int: Listener]] = [:]
        var removalHandlers: [String: [Int: @Sendable () -> Void]] = [:]
        var nextListenerID = 1
    }

    let storage: Mutex<Storage>
    let inboxCapacity: Int
    let logCapacity: Int

    init(inboxCapacity: Int, logCapacity: Int, seed: UInt64?) {
        self.storage = Mutex(Storage(random: seed.map { Xoshiro256(seed: $0) } ?? Xoshiro256()))
        self.inboxCapacity = max(1, inboxCapacity)
        self.logCapacity = max(1, logCapacity)
    }

    // MARK: keys

    /// Trusts `key` for provider tokens (replacing a key with the same id).
    public func register(key: RegisteredKey) {
        self.storage.withLock { storage in
            storage.keys[key.keyID] = key
            storage.keyGeneration += 1
        }
    }

    @discardableResult
    public func removeKey(id: String) -> Bool {
        self.storage.withLock { storage in
            storage.keyGeneration += 1
            return storage.keys.removeValue(forKey: id) != nil
        }
    }

    /// The key and the current key generation, in one look.
    func keyWithGeneration(id: String) -> (key: RegisteredKey?, generation: Int) {
        self.storage.withLock { ($0.keys[id], $0.keyGeneration) }
    }

    public func key(id: String) -> RegisteredKey? {
        self.storage.withLock { $0.keys[id] }
    }

    public var keys: [RegisteredKey] {
        self.storage.withLock { Array($0.keys.values) }.sorted { $0.keyID < $1.keyID }
    }

    // MARK: devices

    /// A new virtual device with a fresh random token, as `registerForRemoteNotifications` gives an app.
    public func createDevice(
        bundleID: String,
        environment: APNSEnvironment,
        kind: TokenKind,
        online: Bool = true,
        now: Int64
    ) -> DeviceSnapshot {
        self.storage.withLock { storage in
            var token: String
            repeat {
                var bytes: [UInt8] = []
                for _ in 0..<kind.tokenByteCount { bytes.append(UInt8.random(in: 0...255, using: &storage.random)) }
                token = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
            } while storage.devices[token] != nil
            let snapshot = DeviceSnapshot(
                token: token, bundleID: bundleID, environment: environment, kind: kind,
                topic: kind.topic(bundleID: bundleID), online: online, notificationsEnabled: true,
                uninstalledAtMilliseconds: nil, tokenExpiredAtMilliseconds: nil, hasStoredNotification: false,
                receivedCount: 0, channels: [], createdAtMilliseconds: now
            )
            storage.devices[token] = DeviceRecord(snapshot: snapshot)
            return snapshot
        }
    }

    public func device(token: String) -> DeviceSnapshot? {
        self.storage.withLock { $0.devices[token.lowercased()].map(Self.snapshot) }
    }

    public var devices: [DeviceSnapshot] {
        self.storage.withLock { $0.devices.values.map(Self.snapshot) }.sorted {
            ($0.createdAtMilliseconds, $0.token) < ($1.createdAtMilliseconds, $1.token)
        }
    }

    static func snapshot(_ record: DeviceRecord) -> DeviceSnapshot {
        var snapshot = record.snapshot
        snapshot.hasStoredNotification = record.stored != nil
        snapshot.channels = record.channels.sorted()
        return snapshot
    }

    /// Removes the device; its live streams end.
    @discardableResult
    public func removeDevice(token: String) -> Bool {
        let (removed, handlers) = self.storage.withLock { storage in
            storage.listeners[token.lowercased()] = nil
            let handlers = storage.removalHandlers.removeValue(forKey: token.lowercased()) ?? [:]
            return (storage.devices.removeValue(forKey: token.lowercased()) != nil, Array(handlers.values))
        }
        for handler in handlers { handler() }
        return removed
    }

    /// Turns a device on- or offline, or its notifications on or off. Coming online delivers what
    /// was stored (unless it expired meanwhile).
    public func updateDevice(token: String, online: Bool?, notificationsEnabled: Bool?, now: Int64) -> DeviceSnapshot? {
        let (snapshot, calls) = self.storage.withLock { storage -> (DeviceSnapshot?, [(Listener, ReceivedNotification)]) in
            let token = token.lowercased()
            guard var record = storage.devices[token] else { return (nil, []) }
            var calls: [(Listener, ReceivedNotification)] = []
            if let notificationsEnabled { record.snapshot.notificationsEnabled = notificationsEnabled }
            if let online {
                let cameOnline = online && !record.snapshot.online
                record.snapshot.online = online
                if cameOnline {
                    storage.devices[token] = record
                    calls = Self.flushStored(token: token, storage: &storage, now: now, inboxCapacity: self.inboxCapacity)
                    record = storage.devices[token]!
                }
            }
            storage.devices[token] = record
            return (Self.snapshot(record), calls)
        }
        for (listener, notification) in calls { listener(notification) }
        return snapshot
    }

    /// The app was removed: from now on pushes get 410 `Unregistered` with this time.
    public func uninstall(token: String, now: Int64) -> DeviceSnapshot? {
        self.storage.withLock { storage in
            guard var record = storage.devices[token.lowercased()] else { return nil }
            record.snapshot.uninstalledAtMilliseconds = now
            if record.stored != nil { storage.counters.discarded += 1 }
            record.stored = nil
            storage.devices[token.lowercased()] = record
            return Self.snapshot(record)
        }
    }

    /// The token expired: from now on pushes get 410 `ExpiredToken`.
    public func expireToken(token: String, now: Int64) -> DeviceSnapshot? {
        self.storage.withLock { storage in
            guard var record = storage.devices[token.lowercased()] else { return nil }
            record.snapshot.tokenExpiredAtMilliseconds = now
            storage.devices[token.lowercased()] = record
            return Self.snapshot(record)
        }
    }

    /// What the device shows, oldest first (a collapse id replaces its earlier notification).
    public func inbox(token: String) -> [ReceivedNotification]? {
        self.storage.withLock { $0.devices[token.lowercased()].map { Array($0.inbox) } }
    }

    @discardableResult
    public func clearInbox(token: String) -> Bool {
        self.storage.withLock { storage in
            guard storage.devices[token.lowercased()] != nil else { return false }
            storage.devices[token.lowercased()]!.inbox.removeAll()
            return true
        }
    }

    /// Calls `listener` with every notification the device receives until ``removeListener(_:)``,
    /// and `onRemoved` if the device is removed first.
    public func addListener(
        token: String,
        onRemoved: @escaping @Sendable () -> Void = {},
        _ listener: @escaping Listener
    ) -> Int? {
        self.storage.withLock { storage in
            guard storage.devices[token.lowercased()] != nil else { return nil }
            let id = storage.nextListenerID
            storage.nextListenerID += 1
            storage.listeners[token.lowercased(), default: [:]][id] = listener
            storage.removalHandlers[token.lowercased(), default: [:]][id] = onRemoved
            return id
        }
    }

    /// How many live streams are watching the device.
    public func listenerCount(token: String) -> Int {
        self.storage.withLock { $0.listeners[token.lowercased()]?.count ?? 0 }
    }

    public func removeListener(_ id: Int) {
        self.storage.withLock { storage in
            for token in storage.listeners.keys { storage.listeners[token]?[id] = nil }
            for token in storage.removalHandlers.keys { storage.removalHandlers[token]?[id] = nil }
        }
    }

    // MARK: counters and log

    /// The counters, after discarding stored notifications that have expired by `now`.
    public func counters(now: Int64) -> EmulatorCounters {
        self.storage.withLock { storage in
            Self.sweepExpired(storage: &storage, now: now)
            return storage.counters
        }
    }

    public func resetCounters() {
        self.storage.withLock { $0.counters = EmulatorCounters() }
    }

    func count(_ body: (inout EmulatorCounters) -> Void) {
        self.storage.withLock { body(&$0.counters) }
    }

    func log(_ entry: RequestLogEntry) {
        self.storage.withLock { storage in
            if storage.log.count < self.logCapacity {
                storage.log.append(entry)
            } else {
                storage.log[storage.logStart] = entry
                storage.logStart = (storage.logStart + 1) % self.logCapacity
            }
        }
    }

    /// The most recent request outcomes, oldest first.
    public func recentRequests(limit: Int = 100) -> [RequestLogEntry] {
        self.storage.withLock { storage in
            let ordered = Array(storage.log[storage.logStart...] + storage.log[..<storage.logStart])
            return Array(ordered.suffix(max(0, limit)))
        }
    }

    // MARK: faults

    @discardableResult
    public func addFault(_ rule: FaultRule) -> Int {
        self.storage.withLock { storage in
            var rule = rule
            rule.id = storage.nextFaultID
            storage.nextFaultID += 1
            storage.faults.append(rule)
            return rule.id
        }
    }

    public var faults: [FaultRule] { self.storage.withLock { $0.faults } }

    public func clearFaults() {
        self.storage.withLock { $0.faults.removeAll() }
    }

    /// The fault that hits the next request in `scope`, used up as it is taken.
    func takeFault(scope: FaultScope) -> FaultAction? {
        self.storage.withLock { storage -> FaultAction? in
            guard !storage.faults.isEmpty else { return nil }
            for index in storage.faults.indices {
                let rule = storage.faults[index]
                guard rule.scope == .all || rule.scope == scope else { continue }
                if rule.probability < 1 {
                    let roll = Double(storage.random.next() >> 11) / Double(1 << 53)
                    guard roll < rule.probability else { continue }
                }
                if let remaining = rule.remaining {
                    if remaining <= 1 { storage.faults.remove(at: index) } else { storage.faults[index].remaining = remaining - 1 }
                }
                storage.counters.faultsInjected += 1
                return rule.action
            }
            return nil
        }
    }
}

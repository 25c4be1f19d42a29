// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Synchronization
import _CryptoExtras

/// Everything the emulator remembers: trusted accounts, access tokens, virtual devices and their
/// inboxes, queued faults, counters, and who waits for deliveries. Every method takes the lock once.
final class FCMState: Sendable {
    struct Account: Sendable {
        var projectID: String
        var privateKeyID: String
        var publicKey: _RSA.Signing.PublicKey?
    }

    struct AccessToken: Sendable {
        var projectID: String
        var clientEmail: String
        var expiresAt: Int64
    }

    struct Device: Sendable {
        var projectID: String
        var packageName: String
        var kind: TargetKind
        var installed = true
        var inbox: [FCMMessageRecord] = []
    }

    struct Waiter: Sendable {
        var token: String
        var count: Int
        var continuation: CheckedContinuation<[FCMMessageRecord], Never>
    }

    struct Storage: Sendable {
        var accounts: [String: Account] = [:]
        var accessTokens: [String: AccessToken] = [:]
        var accessTokenLifetimeSeconds: Int64 = 3600
        var devices: [String: Device] = [:]
        var faults: [FCMFault] = []
        var counters = FCMCounters()
        var waiters: [Int: Waiter] = [:]
        var streams: [Int: (token: String, continuation: AsyncStream<FCMMessageRecord>.Continuation)] = [:]
        var nextID = 1
        var random = SystemRandomNumberGenerator()
    }

    let storage = Mutex(Storage())

    // MARK: accounts and access tokens

    func trust(_ account: FCMServiceAccount) {
        let key = try? account.publicKey()
        self.storage.withLock {
            $0.accounts[account.clientEmail] = Account(projectID: account.projectID, privateKeyID: account.privateKeyID, publicKey: key)
        }
    }

    func account(email: String) -> Account? {
        self.storage.withLock { $0.accounts[email] }
    }

    /// A new opaque access token for `account`, valid for the configured lifetime.
    func issueAccessToken(projectID: String, clientEmail: String, now: Int64) -> (token: String, lifetime: Int64) {
        self.storage.withLock { storage in
            let bytes = (0..<96).map { _ in UInt8.random(in: 0...255, using: &storage.random) }
            let token = "ya29.c." + Base64URL.encode(bytes)
            let lifetime = storage.accessTokenLifetimeSeconds
            storage.accessTokens[token] = AccessToken(projectID: projectID, clientEmail: clientEmail, expiresAt: now + lifetime * 1000)
            storage.counters.tokensIssued += 1
            return (token, lifetime)
        }
    }

    /// The token's grant if it exists and has not expired at `now`.
    func accessToken(_ token: String, now: Int64) -> AccessToken? {
        self.storage.withLock { storage in
            guard let grant = storage.accessTokens[token] else { return nil }
            guard grant.expiresAt > now else {
                storage.accessTokens[token] = nil
                return nil
            }
            return grant
        }
    }

    @discardableResult
    func expireAccessTokens() -> Int {
        self.storage.withLock { storage in
            defer { storage.accessTokens.removeAll() }
            return storage.accessTokens.count
        }
    }

    func setAccessTokenLifetime(seconds: Int64) {
        self.storage.withLock { $0.accessTokenLifetimeSeconds = max(1, seconds) }
    }

    var accessTokenLifetime: Int64 { self.storage.withLock { $0.accessTokenLifetimeSeconds } }

    // MARK: devices

    func createDevice(projectID: String, packageName: String, kind: TargetKind) -> String {
        self.storage.withLock { storage in
            var token: String
            repeat {
                token =
                    kind == .token
                    ? RegistrationToken.makeToken(using: &storage.random) : RegistrationToken.makeFID(using: &storage.random)
            } while storage.devices[token] != nil
            storage.devices[token] = Device(projectID: projectID, packageName: packageName, kind: kind)
            return token
        }
    }

    func device(_ token: String) -> Device? {
        self.storage.withLock { $0.devices[token] }
    }

    /// Marks the device uninstalled (it answers UNREGISTERED from now on) and ends its streams.
    @discardableResult
    func uninstall(_ token: String) -> Bool {
        let (found, streams) = self.storage.withLock { storage -> (Bool, [AsyncStream<FCMMessageRecord>.Continuation]) in
            guard storage.devices[token] != nil else { return (false, []) }
            storage.devices[token]?.installed = false
            let ids = storage.streams.filter { $0.value.token == token }.map(\.key)
            return (true, ids.compactMap { storage.streams.removeValue(forKey: $0)?.continuation })
        }
        for stream in streams { stream.finish() }
        return found
    }

    func inbox(_ token: String) -> [FCMMessageRecord] {
        self.storage.withLock { $0.devices[token]?.inbox ?? [] }
    }

    /// Puts `record` in the device's inbox and wakes whoever waits for it.
    func deliver(_ record: FCMMessageRecord, to token: String) {
        let (woken, streams) = self.storage.withLock {
            storage -> ([(CheckedContinuation<[FCMMessageRecord], Never>, [FCMMessageRecord])], [AsyncStream<FCMMessageRecord>.Continuation]) in
            guard storage.devices[token] != nil else { return ([], []) }
            storage.devices[token]?.inbox.append(record)
            storage.counters.delivered += 1
            let inbox = storage.devices[token]?.inbox ?? []
            let ready = storage.waiters.filter { $0.value.token == token && $0.value.count <= inbox.count }.map(\.key)
            let woken = ready.compactMap { storage.waiters.removeValue(forKey: $0) }.map { ($0.continuation, inbox) }
            return (woken, storage.streams.values.filter { $0.token == token }.map(\.continuation))
        }
        for (continuation, inbox) in woken { continuation.resume(returning: inbox) }
        for stream in streams { stream.yield(record) }
    }

    /// Waits until the inbox holds `count` messages (or the task is cancelled), then returns it.
    func messages(_ token: String, count: Int) async -> [FCMMessageRecord] {
        let id = self.storage.withLock { storage in
            defer { storage.nextID += 1 }
            return storage.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[FCMMessageRecord], Never>) in
                let ready = self.storage.withLock { storage -> [FCMMessageRecord]? in
                    let inbox = storage.devices[token]?.inbox ?? []
                    if inbox.count >= count || Task.isCancelled { return inbox }
                    storage.waiters[id] = Waiter(token: token, count: count, continuation: continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = self.storage.withLock { storage in
                storage.waiters.removeValue(forKey: id).map { ($0.continuation, storage.devices[token]?.inbox ?? []) }
            }
            if let (continuation, inbox) = waiter { continuation.resume(returning: inbox) }
        }
    }

    /// A stream of the messages delivered to `token` from now on. It ends when the device is
    /// uninstalled, the emulator stops, or ``endStream(_:)`` is called with its id.
    func subscribe(_ token: String) -> (id: Int, stream: AsyncStream<FCMMessageRecord>) {
        let (stream, continuation) = AsyncStream.makeStream(of: FCMMessageRecord.self, bufferingPolicy: .bufferingNewest(1000))
        let id = self.storage.withLock { storage in
            defer { storage.nextID += 1 }
            storage.streams[storage.nextID] = (token, continuation)
            return storage.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.storage.withLock { $0.streams.removeValue(forKey: id) }
        }
        return (id, stream)
    }

    func endStream(_ id: Int) {
        self.storage.withLock { $0.streams.removeValue(forKey: id) }?.continuation.finish()
    }

    func endAllStreams() {
        let streams = self.storage.withLock { storage in
            defer { storage.streams.removeAll() }
            return storage.streams.values.map(\.continuation)
        }
        for stream in streams { stream.finish() }
    }

    /// A number never handed out before.
    func nextSerial() -> Int {
        self.storage.withLock { storage in
            defer { storage.nextID += 1 }
            return storage.nextID
        }
    }

    // MARK: faults and counters

    func inject(_ faults: [FCMFault]) {
        self.storage.withLock { $0.faults += faults }
    }

    func clearFaults() {
        self.storage.withLock { $0.faults.removeAll() }
    }

    /// Counts a send request and takes the next queued fault, if any.
    func beginSend() -> FCMFault? {
        self.storage.withLock { storage in
            storage.counters.sendRequests += 1
            return storage.faults.isEmpty ? nil : storage.faults.removeFirst()
        }
    }

    func count(_ update: (inout FCMCounters) -> Void) {
        self.storage.withLock { update(&$0.counters) }
    }

    func refused(_ key: String) {
        self.storage.withLock { $0.counters.refused[key, default: 0] += 1 }
    }

    var counters: FCMCounters { self.storage.withLock { $0.counters } }

    func resetCounters() {
        self.storage.withLock { $0.counters = FCMCounters() }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import HummingbirdWebSocket
import Synchronization
import WebPush

/// Everything the emulator remembers: subscriptions (of virtual browsers and of Firefox
/// channels), virtual browsers with their keys and inboxes, Firefox clients with their sockets
/// and unacknowledged messages, faults, counters and event streams. Every method takes the lock
/// once; what must happen on a socket is returned and done outside it.
final class WebPushState: Sendable {
    enum Owner: Sendable {
        case browser(String)
        case firefox(channelID: String)
    }

    struct Subscription: Sendable {
        var personality: WebPushPersonality
        /// The VAPID key it was created with; `nil` for an unrestricted one.
        var applicationServerKey: [UInt8]?
        var owner: Owner
        var active = true
    }

    /// An accepted message not yet delivered (or, for Firefox, not yet acknowledged).
    struct Pending: Sendable {
        var id: String
        var body: [UInt8]
        var ttl: Int
        var urgency: String
        var topic: String?
        var acceptedAt: Int64

        func expired(at now: Int64) -> Bool { self.acceptedAt + Int64(self.ttl) * 1000 <= now }
    }

    struct Browser: Sendable {
        var personality: WebPushPersonality
        var token: String
        var endpoint: String
        var privateKey: P256.KeyAgreement.PrivateKey
        var auth: [UInt8]
        var online = true
        var subscribed = true
        var inbox: [WebPushMessageRecord] = []
        var failures: [WebPushDecryptionFailure] = []
        var waiting: [Pending] = []
    }

    struct Connection: Sendable {
        var id: Int
        var writer: WebSocketOutboundWriter
    }

    struct FirefoxClient: Sendable {
        var connection: Connection?
        /// Sent or waiting, until acked or expired, oldest first.
        var pending: [(channelID: String, message: Pending)] = []
    }

    struct Channel: Sendable {
        var uaid: String
        var token: String
        var endpoint: String
        var registered = true
        var messages: [FirefoxChannelRecord.Message] = []
    }

    /// A notification frame to write on a Firefox socket.
    struct Send: Sendable {
        var writer: WebSocketOutboundWriter
        var frame: String
    }

    struct Storage: Sendable {
        var subscriptions: [String: Subscription] = [:]
        var browsers: [String: Browser] = [:]
        var clients: [String: FirefoxClient] = [:]
        var channels: [String: Channel] = [:]
        var channelOrder: [String] = []
        var faults: [WebPushFault] = []
        var counters = WebPushCounters()
        var streams: [Int: AsyncStream<WebPushEvent>.Continuation] = [:]
        var nextID = 1
        var random = SystemRandomNumberGenerator()

        mutating func emit(_ event: WebPushEvent) {
            for stream in self.streams.values { stream.yield(event) }
        }

        mutating func randomBytes(_ count: Int) -> [UInt8] {
            (0..<count).map { _ in UInt8.random(in: 0...255, using: &self.random) }
        }

        /// `count` random octets as lower-case hex.
        mutating func hex(_ count: Int) -> String {
            let digits = Array("0123456789abcdef")
            return String(self.randomBytes(count).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
        }

        mutating func newToken() -> String {
            var token: String
            repeat { token = Base64URL.encode(self.randomBytes(32)) } while self.subscriptions[token] != nil
            return token
        }

        mutating func serial() -> Int {
            defer { self.nextID += 1 }
            return self.nextID
        }
    }

    let storage = Mutex(Storage())

    // MARK: ids

    func newMessageID() -> String {
        self.storage.withLock { Base64URL.encode($0.randomBytes(16)) }
    }

    func newUAID() -> String {
        self.storage.withLock { $0.hex(16) }
    }

    func serial() -> Int { self.storage.withLock { $0.serial() } }

    // MARK: virtual browsers

    func makeBrowser(personality: WebPushPersonality, applicationServerKey: [UInt8]?, origin: String) -> WebPushBrowserSubscription {
        let privateKey = P256.KeyAgreement.PrivateKey()
        return self.storage.withLock { storage in
            var id: String
            repeat { id = storage.hex(8) } while storage.browsers[id] != nil
            let token = storage.newToken()
            let endpoint = origin + personality.pathPrefix(restricted: applicationServerKey != nil) + token
            let auth = storage.randomBytes(16)
            storage.subscriptions[token] = Subscription(personality: personality, applicationServerKey: applicationServerKey, owner: .browser(id))
            storage.browsers[id] = Browser(personality: personality, token: token, endpoint: endpoint, privateKey: privateKey, auth: auth)
            return WebPushBrowserSubscription(
                id: id, personality: personality, endpoint: endpoint,
                p256dh: Base64URL.encode(privateKey.publicKey.x963Representation), auth: Base64URL.encode(auth)
            )
        }
    }

    func browserExists(_ id: String) -> Bool { self.storage.withLock { $0.browsers[id] != nil } }

    func inbox(_ id: String) -> WebPushInbox? {
        self.storage.withLock { storage in
            storage.browsers[id].map {
                WebPushInbox(
                    messages: $0.inbox, decryptionFailures: $0.failures, online: $0.online, subscribed: $0.subscribed, waiting: $0.waiting.count)
            }
        }
    }

    /// Takes the browser off line (accepted messages then wait) or back on line (what waited and
    /// has not run out of TTL is delivered, in order). `false` for an unknown browser.
    @discardableResult
    func setOnline(_ id: String, _ online: Bool, now: Int64) -> Bool {
        self.storage.withLock { storage in
            guard var browser = storage.browsers[id] else { return false }
            browser.online = online
            var waiting: [Pending] = []
            if online {
                waiting = browser.waiting
                browser.waiting = []
            }
            storage.browsers[id] = browser
            for message in waiting {
                if message.expired(at: now) {
                    storage.counters.dropped += 1
                    storage.emit(WebPushEvent(.dropped, browserID: id, messageID: message.id, reason: "ttl"))
                } else {
                    Self.decryptIntoInbox(message, browser: id, storage: &storage)
                }
            }
            return true
        }
    }

    /// The endpoint answers 410 from now on; waiting messages are dropped.
    @discardableResult
    func unsubscribe(_ id: String) -> Bool {
        self.storage.withLock { storage in
            guard let browser = storage.browsers[id] else { return false }
            storage.browsers[id]?.subscribed = false
            storage.browsers[id]?.waiting = []
            storage.subscriptions[browser.token]?.active = false
            return true
        }
    }

    private static func decryptIntoInbox(_ message: Pending, browser id: String, storage: inout Storage) {
        guard let browser = storage.browsers[id] else { return }
        do {
            let plaintext = try WebPushEncryption.decrypt(message.body, receiverKey: browser.privateKey, auth: browser.auth)
            let record = WebPushMessageRecord(
                id: message.id, text: String(decoding: plaintext, as: UTF8.self), plaintext: plaintext, ttl: message.ttl,
                urgency: message.urgency, topic: message.topic, receivedAt: message.acceptedAt
            )
            storage.browsers[id]?.inbox.append(record)
            storage.counters.delivered += 1
            storage.emit(WebPushEvent(.delivered, browserID: id, messageID: message.id, text: record.text))
        } catch {
            storage.browsers[id]?.failures.append(WebPushDecryptionFailure(id: message.id, error: "\(error)", receivedAt: message.acceptedAt))
            storage.counters.decryptionFailures += 1
            storage.emit(WebPushEvent(.decryptionFailure, browserID: id, messageID: message.id, reason: "\(error)"))
        }
    }

    // MARK: pushes

    func subscription(_ token: String) -> Subscription? {
        self.storage.withLock { $0.subscriptions[token] }
    }

    /// Counts a push request and takes the next queued fault, if any.
    func beginPush() -> WebPushFault? {
        self.storage.withLock { storage in
            storage.counters.requests += 1
            return storage.faults.isEmpty ? nil : storage.faults.removeFirst()
        }
    }

    func refused(_ refusal: PushRefusal, status: Int) {
        self.storage.withLock { storage in
            storage.counters.refused[refusal.counterKey, default: 0] += 1
            storage.emit(WebPushEvent(.refused, code: status, reason: refusal.counterKey))
        }
    }

    /// Takes an accepted message: decrypts it into an online browser's inbox, keeps it for an
    /// offline one, or hands it to Firefox. Returns the frame to write, if a socket is open.
    func accept(_ message: Pending, token: String, now: Int64) -> Send? {
        self.storage.withLock { storage -> Send? in
            storage.counters.accepted += 1
            guard let subscription = storage.subscriptions[token] else { return nil }
            switch subscription.owner {
            case .browser(let id):
                storage.emit(WebPushEvent(.accepted, browserID: id, messageID: message.id))
                guard let browser = storage.browsers[id] else { return nil }
                if browser.online {
                    Self.decryptIntoInbox(message, browser: id, storage: &storage)
                } else if message.ttl == 0 {
                    storage.counters.dropped += 1
                    storage.emit(WebPushEvent(.dropped, browserID: id, messageID: message.id, reason: "ttl"))
                } else {
                    var waiting = browser.waiting.filter { !$0.expired(at: now) }
                    if let topic = message.topic, let index = waiting.firstIndex(where: { $0.topic == topic }) {
                        storage.counters.dropped += 1
                        storage.emit(WebPushEvent(.dropped, browserID: id, messageID: waiting[index].id, reason: "topic"))
                        waiting.remove(at: index)
                    }
                    waiting.append(message)
                    storage.browsers[id]?.waiting = waiting
                }
                return nil
            case .firefox(let channelID):
                storage.emit(WebPushEvent(.accepted, messageID: message.id, channelID: channelID))
                guard let uaid = storage.channels[channelID]?.uaid, var client = storage.clients[uaid] else { return nil }
                if let topic = message.topic,
                    let index = client.pending.firstIndex(where: { $0.channelID == channelID && $0.message.topic == topic })
                {
                    storage.counters.dropped += 1
                    storage.emit(WebPushEvent(.dropped, messageID: client.pending[index].message.id, channelID: channelID, reason: "topic"))
                    client.pending.remove(at: index)
                }
                guard let connection = client.connection else {
                    if message.ttl == 0 {
                        storage.counters.dropped += 1
                        storage.emit(WebPushEvent(.dropped, messageID: message.id, channelID: channelID, reason: "ttl"))
                    } else {
                        client.pending.append((channelID, message))
                    }
                    storage.clients[uaid] = client
                    return nil
                }
                client.pending.append((channelID, message))
                storage.clients[uaid] = client
                Self.noteSent(message, channelID: channelID, uaid: uaid, storage: &storage)
                return Send(writer: connection.writer, frame: AutopushProtocol.notification(channelID: channelID, message: message))
            }
        }
    }

    private static func noteSent(_ message: Pending, channelID: String, uaid: String, storage: inout Storage) {
        storage.counters.notificationsSent += 1
        if storage.channels[channelID]?.messages.contains(where: { $0.version == message.id }) == false {
            storage.channels[channelID]?.messages.append(FirefoxChannelRecord.Message(version: message.id))
        }
        storage.emit(WebPushEvent(.notification, messageID: message.id, channelID: channelID, uaid: uaid))
    }

    // MARK: Firefox

    /// A socket said hello as `uaid`: it becomes the client's connection, and what is pending
    /// and still alive is returned to be sent on it.
    func hello(uaid: String, connection: Connection, now: Int64) -> [String] {
        self.storage.withLock { storage in
            var client = storage.clients[uaid] ?? FirefoxClient()
            client.connection = connection
            var frames: [String] = []
            var kept: [(channelID: String, message: Pending)] = []
            for (channelID, message) in client.pending {
                if message.expired(at: now) {
                    storage.counters.dropped += 1
                    storage.emit(WebPushEvent(.dropped, messageID: message.id, channelID: channelID, reason: "ttl"))
                    continue
                }
                kept.append((channelID, message))
                frames.append(AutopushProtocol.notification(channelID: channelID, message: message))
                Self.noteSent(message, channelID: channelID, uaid: uaid, storage: &storage)
            }
            client.pending = kept
            storage.clients[uaid] = client
            storage.emit(WebPushEvent(.hello, uaid: uaid))
            return frames
        }
    }

    /// The socket closed: messages for its uaid wait (up to their TTL) for the next hello.
    func disconnected(uaid: String, connectionID: Int) {
        self.storage.withLock { storage in
            if storage.clients[uaid]?.connection?.id == connectionID { storage.clients[uaid]?.connection = nil }
        }
    }

    /// A new channel for `uaid`: returns its push endpoint.
    func register(uaid: String, channelID: String, key: [UInt8]?, origin: String) -> String {
        self.storage.withLock { storage in
            let token = storage.newToken()
            let endpoint = origin + WebPushPersonality.mozilla.pathPrefix(restricted: key != nil) + token
            if let old = storage.channels[channelID] { storage.subscriptions[old.token]?.active = false }
            storage.subscriptions[token] = Subscription(personality: .mozilla, applicationServerKey: key, owner: .firefox(channelID: channelID))
            if storage.channels[channelID] == nil { storage.channelOrder.append(channelID) }
            storage.channels[channelID] = Channel(uaid: uaid, token: token, endpoint: endpoint)
            storage.emit(WebPushEvent(.register, channelID: channelID, uaid: uaid))
            return endpoint
        }
    }

    func unregister(uaid: String, channelID: String, code: Int?) {
        self.storage.withLock { storage in
            guard let channel = storage.channels[channelID], channel.uaid == uaid else { return }
            storage.channels[channelID]?.registered = false
            storage.subscriptions[channel.token]?.active = false
            storage.clients[uaid]?.pending.removeAll { $0.channelID == channelID }
            storage.emit(WebPushEvent(.unregister, channelID: channelID, uaid: uaid, code: code))
        }
    }

    func ack(uaid: String, channelID: String, version: String, code: Int) {
        self.storage.withLock { storage in
            storage.clients[uaid]?.pending.removeAll { $0.message.id == version }
            if let index = storage.channels[channelID]?.messages.firstIndex(where: { $0.version == version }) {
                storage.channels[channelID]?.messages[index].ack = code
            } else if storage.channels[channelID] != nil {
                storage.channels[channelID]?.messages.append(FirefoxChannelRecord.Message(version: version, ack: code))
            }
            storage.counters.acks[String(code), default: 0] += 1
            storage.emit(WebPushEvent(.ack, messageID: version, channelID: channelID, uaid: uaid, code: code))
        }
    }

    func nack(uaid: String, version: String, code: Int?) {
        self.storage.withLock { storage in
            var channelID: String?
            for id in storage.channelOrder where storage.channels[id]?.uaid == uaid {
                if let index = storage.channels[id]?.messages.firstIndex(where: { $0.version == version }) {
                    storage.channels[id]?.messages[index].nack = code ?? 0
                    channelID = id
                }
            }
            storage.clients[uaid]?.pending.removeAll { $0.message.id == version }
            storage.counters.nacks += 1
            storage.emit(WebPushEvent(.nack, messageID: version, channelID: channelID, uaid: uaid, code: code))
        }
    }

    func firefoxChannels() -> [FirefoxChannelRecord] {
        self.storage.withLock { storage in
            storage.channelOrder.compactMap { id in
                storage.channels[id].map {
                    FirefoxChannelRecord(channelID: id, uaid: $0.uaid, endpoint: $0.endpoint, registered: $0.registered, messages: $0.messages)
                }
            }
        }
    }

    func firefoxClients() -> [(uaid: String, connected: Bool, pending: Int)] {
        self.storage.withLock { storage in
            storage.clients.sorted { $0.key < $1.key }.map { ($0.key, $0.value.connection != nil, $0.value.pending.count) }
        }
    }

    // MARK: faults, counters, reset, events

    func inject(_ faults: [WebPushFault]) {
        self.storage.withLock { $0.faults += faults }
    }

    func clearFaults() {
        self.storage.withLock { $0.faults.removeAll() }
    }

    var counters: WebPushCounters { self.storage.withLock { $0.counters } }

    /// Forgets virtual browsers (their endpoints then answer 404), faults, counters and Firefox's
    /// message records. Firefox's sockets and registrations stay, so a running Firefox keeps working.
    func reset() {
        self.storage.withLock { storage in
            for browser in storage.browsers.values { storage.subscriptions[browser.token] = nil }
            storage.browsers.removeAll()
            storage.faults.removeAll()
            storage.counters = WebPushCounters()
            for id in storage.channelOrder { storage.channels[id]?.messages = [] }
        }
    }

    /// A stream of events from now on; it ends when the emulator stops or ``endStream(_:)``.
    func subscribe() -> (id: Int, stream: AsyncStream<WebPushEvent>) {
        let (stream, continuation) = AsyncStream.makeStream(of: WebPushEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        let id = self.storage.withLock { storage in
            let id = storage.serial()
            storage.streams[id] = continuation
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.storage.withLock { $0.streams.removeValue(forKey: id) }
        }
        return (id, stream)
    }

    func endStream(_ id: Int) {
        self.storage.withLock { $0.streams.removeValue(forKey: id) }?.finish()
    }

    func endAllStreams() {
        let streams = self.storage.withLock { storage in
            defer { storage.streams.removeAll() }
            return Array(storage.streams.values)
        }
        for stream in streams { stream.finish() }
    }
}

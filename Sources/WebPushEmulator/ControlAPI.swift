// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto

/// What the HTTP layer writes for a control request.
enum ControlReply: Sendable {
    case json(status: Int, body: JSONValue)
    /// Server-sent events: one `event: message` per event the stream yields.
    case events(id: Int, stream: AsyncStream<WebPushEvent>)
}

/// The emulator's own routes under `/emulator/`: virtual browsers, faults, counters, reset,
/// Firefox's channels and the event stream. JSON in, JSON out; see `docs/webpush-emulator.md`.
struct ControlAPI: Sendable {
    let emulator: WebPushEmulator

    private var state: WebPushState { self.emulator.state }

    /// The most browsers one `POST browsers` with `count` makes.
    static let maximumBrowsersPerRequest = 10_000

    struct Failure: Error {
        var code: Int
        var message: String

        static func invalid(_ message: String) -> Failure { Failure(code: 400, message: message) }
        static func notFound(_ message: String) -> Failure { Failure(code: 404, message: message) }
    }

    /// `path` is what follows `/emulator/`, split.
    func handle(method: String, path: [String], body: [UInt8]) -> ControlReply {
        do {
            return try self.route(method: method, path, body: body)
        } catch {
            return .json(
                status: error.code,
                body: .object([("error", .object([("code", .int(Int64(error.code))), ("message", .string(error.message))]))])
            )
        }
    }

    private func route(method: String, _ path: [String], body: [UInt8]) throws(Failure) -> ControlReply {
        func allow(_ methods: String...) throws(Failure) {
            guard methods.contains(method) else { throw Failure(code: 405, message: "\(method) is not allowed here") }
        }
        switch (path.first, path.count) {
        case ("health", 1):
            try allow("GET")
            return .json(status: 200, body: .object([("status", "ok")]))
        case ("browsers", 1):
            try allow("POST")
            let object = try Self.object(body)
            guard let name = object["personality"]?.stringValue, let personality = WebPushPersonality(rawValue: name) else {
                throw .invalid("personality must be \"apple\", \"mozilla\" or \"fcm\"")
            }
            var key: [UInt8]?
            if let text = object["applicationServerKey"]?.stringValue {
                guard let bytes = Self.applicationServerKey(text) else {
                    throw .invalid("applicationServerKey must be base64url of a 65-octet uncompressed P-256 point")
                }
                key = bytes
            }
            // With `count`, that many browsers at once (load tests), answered as {"browsers":[…]}.
            var count: Int?
            if let member = object["count"] {
                guard let value = member.intValue, (1...Int64(Self.maximumBrowsersPerRequest)).contains(value) else {
                    throw .invalid("count must be 1...\(Self.maximumBrowsersPerRequest)")
                }
                count = Int(value)
            }
            var browsers: [WebPushBrowserSubscription] = []
            browsers.reserveCapacity(count ?? 1)
            do {
                for _ in 0..<(count ?? 1) {
                    browsers.append(try self.emulator.makeBrowser(personality: personality, applicationServerKey: key))
                }
            } catch {
                throw .invalid("\(error)")
            }
            guard count != nil else { return .json(status: 200, body: browsers[0].jsonValue) }
            return .json(status: 200, body: .object([("browsers", .array(browsers.map(\.jsonValue)))]))
        case ("browsers", 2):
            try allow("GET", "DELETE")
            let id = path[1]
            if method == "DELETE", !self.state.unsubscribe(id) { throw .notFound("no such browser: \(id)") }
            guard let inbox = self.state.inbox(id) else { throw .notFound("no such browser: \(id)") }
            return .json(status: 200, body: inbox.jsonValue)
        case ("browsers", 3) where path[2] == "online" || path[2] == "offline":
            try allow("POST")
            let id = path[1]
            guard self.state.setOnline(id, path[2] == "online", now: self.emulator.clock.nowMilliseconds), let inbox = self.state.inbox(id) else {
                throw .notFound("no such browser: \(id)")
            }
            return .json(status: 200, body: inbox.jsonValue)
        case ("faults", 1):
            try allow("POST", "DELETE")
            if method == "DELETE" {
                self.state.clearFaults()
                return .json(status: 200, body: .object([("queued", 0)]))
            }
            let object = try Self.object(body)
            guard let status = object["status"]?.intValue, (400...599).contains(status) else {
                throw .invalid("status (400...599) is required")
            }
            let retryAfter = object["retryAfter"]?.intValue
            if let retryAfter, retryAfter < 0 { throw .invalid("retryAfter must not be negative") }
            let count = object["count"]?.intValue ?? 1
            guard (1...10_000).contains(count) else { throw .invalid("count must be 1...10000") }
            let fault = WebPushFault(status: Int(status), retryAfter: retryAfter.map { Int($0) })
            self.state.inject(Array(repeating: fault, count: Int(count)))
            return .json(status: 200, body: .object([("queued", .int(count))]))
        case ("counters", 1):
            try allow("GET")
            return .json(status: 200, body: self.state.counters.json)
        case ("reset", 1):
            try allow("POST")
            self.state.reset()
            return .json(status: 200, body: .object([("reset", true)]))
        case ("events", 1):
            try allow("GET")
            let (id, stream) = self.state.subscribe()
            return .events(id: id, stream: stream)
        case ("firefox", 1):
            try allow("GET")
            let clients = self.state.firefoxClients().map {
                JSONValue.object([("uaid", .string($0.uaid)), ("connected", .bool($0.connected)), ("pending", .int(Int64($0.pending)))])
            }
            return .json(
                status: 200,
                body: .object([("clients", .array(clients)), ("channels", .array(self.state.firefoxChannels().map(\.jsonValue)))])
            )
        default:
            throw .notFound("no such endpoint: /emulator/\(path.joined(separator: "/"))")
        }
    }

    static func object(_ body: [UInt8]) throws(Failure) -> JSONValue {
        guard let value = try? JSONValue.parse(body), value.objectMembers != nil else { throw .invalid("the body must be a JSON object") }
        return value
    }

    /// Base64url (padding tolerated) of a 65-octet uncompressed P-256 point.
    static func applicationServerKey(_ text: String) -> [UInt8]? {
        guard let bytes = Base64URL.decode(text), bytes.count == 65, bytes[0] == 0x04,
            (try? P256.Signing.PublicKey(x963Representation: bytes)) != nil
        else { return nil }
        return bytes
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import HummingbirdWebSocket
import Logging
import ServiceLifecycle

/// Mozilla's autopush WebSocket protocol, server side, as Firefox's `PushServiceWebSocket`
/// speaks it (JSON text frames, subprotocol `push-notification`): `hello`, `register`,
/// `unregister`, `ack`, `nack`, ping `{}`; `broadcast_subscribe` is ignored. One value per socket.
struct AutopushProtocol {
    let emulator: WebPushEmulator
    let logger: Logger
    let connectionID: Int
    /// Set by `hello`.
    private(set) var uaid: String?

    init(emulator: WebPushEmulator, logger: Logger) {
        self.emulator = emulator
        self.logger = logger
        self.connectionID = emulator.state.serial()
    }

    /// Reads frames until the socket closes, answering each.
    static func serve(
        emulator: WebPushEmulator, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger
    ) async throws {
        var session = AutopushProtocol(emulator: emulator, logger: logger)
        defer {
            if let uaid = session.uaid { emulator.state.disconnected(uaid: uaid, connectionID: session.connectionID) }
        }
        // Ends at graceful shutdown too: the library then sends the close frame, and closes the
        // socket after its close timeout if the client never answers it.
        for try await message in inbound.messages(maxSize: 1 << 16).cancelOnGracefulShutdown() {
            guard case .text(let text) = message else { continue }
            try await session.handle(text, outbound: outbound)
        }
    }

    mutating func handle(_ text: String, outbound: WebSocketOutboundWriter) async throws {
        guard let message = try? JSONValue.parse(text), message.objectMembers != nil else {
            self.logger.debug("autopush: frame is not a JSON object")
            return
        }
        let type = message["messageType"]?.stringValue
        if type == nil || type == "ping" {
            // Firefox's ping is `{}`; any `{}` answers it.
            try await outbound.write(.text("{}"))
            return
        }
        if type == "hello" {
            try await self.hello(message, outbound: outbound)
            return
        }
        guard let uaid = self.uaid else {
            self.logger.debug("autopush: message before hello", metadata: ["autopush.type": "\(type ?? "")"])
            return
        }
        let state = self.emulator.state
        switch type {
        case "register":
            guard let channelID = message["channelID"]?.stringValue, !channelID.isEmpty, channelID.utf8.count <= 64 else {
                try await outbound.write(.text(Self.reply("register", status: 401, channelID: message["channelID"]?.stringValue)))
                return
            }
            var key: [UInt8]?
            if let text = message["key"]?.stringValue {
                // Firefox sends the applicationServerKey base64url *with* padding: compare octets.
                guard let bytes = Base64URL.decode(text), bytes.count == 65,
                    (try? P256.Signing.PublicKey(x963Representation: bytes)) != nil
                else {
                    try await outbound.write(.text(Self.reply("register", status: 400, channelID: channelID)))
                    return
                }
                key = bytes
            }
            let endpoint = state.register(uaid: uaid, channelID: channelID, key: key, origin: self.emulator.origin)
            let reply = JSONValue.object([
                ("messageType", "register"), ("channelID", .string(channelID)), ("status", 200), ("pushEndpoint", .string(endpoint)),
            ])
            try await outbound.write(.text(reply.jsonString))
        case "unregister":
            guard let channelID = message["channelID"]?.stringValue else { return }
            state.unregister(uaid: uaid, channelID: channelID, code: message["code"]?.intValue.map { Int($0) })
            try await outbound.write(.text(Self.reply("unregister", status: 200, channelID: channelID)))
        case "ack":
            for update in message["updates"]?.arrayValue ?? [] {
                guard let channelID = update["channelID"]?.stringValue, let version = update["version"]?.stringValue else { continue }
                state.ack(uaid: uaid, channelID: channelID, version: version, code: update["code"]?.intValue.map { Int($0) } ?? 100)
            }
        case "nack":
            guard let version = message["version"]?.stringValue else { return }
            state.nack(uaid: uaid, version: version, code: message["code"]?.intValue.map { Int($0) })
        default:
            // broadcast_subscribe and anything newer: nothing to answer.
            break
        }
    }

    private mutating func hello(_ message: JSONValue, outbound: WebSocketOutboundWriter) async throws {
        let state = self.emulator.state
        let uaid: String
        if let existing = self.uaid {
            uaid = existing
        } else if let offered = message["uaid"]?.stringValue, Self.isAcceptableUAID(offered) {
            // A new uaid would make Firefox drop its subscriptions: keep the one it sends back.
            uaid = offered
        } else {
            uaid = state.newUAID()
        }
        let reply = JSONValue.object([
            ("messageType", "hello"), ("status", 200), ("uaid", .string(uaid)), ("use_webpush", true), ("broadcasts", .object([])),
        ])
        try await outbound.write(.text(reply.jsonString))
        guard self.uaid == nil else { return }
        self.uaid = uaid
        // A second socket with the same uaid takes over its messages (the older one gets no more).
        let frames = state.hello(
            uaid: uaid, connection: WebPushState.Connection(id: self.connectionID, writer: outbound), now: self.emulator.clock.nowMilliseconds
        )
        for frame in frames { try await outbound.write(.text(frame)) }
    }

    /// Up to 128 characters of letters, digits and `-` (autopush's own are 32 hex digits).
    static func isAcceptableUAID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 128
            && text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 }
    }

    static func reply(_ type: String, status: Int, channelID: String?) -> String {
        var members: [(String, JSONValue)] = [("messageType", .string(type))]
        if let channelID { members.append(("channelID", .string(channelID))) }
        members.append(("status", .int(Int64(status))))
        return JSONValue.object(members).jsonString
    }

    /// `{"messageType":"notification","channelID":…,"version":…,"data":…,"headers":{"encoding":"aes128gcm"}}`;
    /// `data` is the exact body, base64url without padding. A push without a body has neither.
    static func notification(channelID: String, message: WebPushState.Pending) -> String {
        var members: [(String, JSONValue)] = [
            ("messageType", "notification"), ("channelID", .string(channelID)), ("version", .string(message.id)),
        ]
        if !message.body.isEmpty {
            members.append(("data", .string(Base64URL.encode(message.body))))
            members.append(("headers", .object([("encoding", "aes128gcm")])))
        }
        return JSONValue.object(members).jsonString
    }
}

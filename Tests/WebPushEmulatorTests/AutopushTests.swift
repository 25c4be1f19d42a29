// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import HTTPTypes
import HeraldTesting
import HummingbirdWSClient
import Logging
import Synchronization
import Testing
import WebPush
import WebPushEmulator

/// The autopush WebSocket protocol driven the way Firefox's `PushServiceWebSocket` drives it;
/// the test is the browser: it holds the subscription keys and decrypts what arrives.
@Suite(.heavy) struct AutopushTests {
    @Test("hello, register, a notification decrypted and acked 100, a tampered one acked 101, unregister")
    func firefoxFlow() async throws {
        try await withFixture { fixture in
            let events = fixture.emulator.events()
            let browserKey = P256.KeyAgreement.PrivateKey()
            let auth = (0..<16).map { _ in UInt8.random(in: 0...255) }
            let keys = try WebPushSubscriptionKeys(p256dh: Array(browserKey.publicKey.x963Representation), auth: auth)
            let channelID = "5b2a1d4c-8e3f-4a7b-9c1d-2e3f4a5b6c7d"
            try await withHangGuard {
                try await FirefoxSocket.connect(fixture) { socket in
                    let hello = try await socket.hello(uaid: nil)
                    let uaid = try #require(hello["uaid"]?.stringValue)
                    #expect(uaid.count == 32 && uaid.allSatisfy(\.isHexDigit))
                    #expect(hello["status"]?.intValue == 200 && hello["use_webpush"]?.boolValue == true)
                    #expect(hello["broadcasts"]?.objectMembers?.isEmpty == true)

                    // Ping is `{}`; broadcast_subscribe gets no answer.
                    try await socket.send(#"{"messageType":"broadcast_subscribe","broadcasts":{"remote-settings/monitor_changes":"\"0\""}}"#)
                    try await socket.send("{}")
                    #expect(try await socket.receive().objectMembers?.isEmpty == true)

                    // The key as Firefox sends it: base64url with padding.
                    let paddedKey = fixture.vapid.publicKeyBase64URL + "="
                    try await socket.send(#"{"channelID":"\#(channelID)","messageType":"register","key":"\#(paddedKey)"}"#)
                    let registered = try await socket.receive()
                    #expect(registered["messageType"]?.stringValue == "register")
                    #expect(registered["status"]?.intValue == 200)
                    #expect(registered["channelID"]?.stringValue == channelID)
                    let endpoint = try #require(registered["pushEndpoint"]?.stringValue)
                    #expect(endpoint.hasPrefix(fixture.emulator.origin + "/wpush/v2/"))

                    // A good message: relayed byte for byte, decrypted here, acked 100.
                    let body = try WebPushEncryption.encrypt(Array("Hello Firefox ✓ 🔔".utf8), for: keys)
                    let accepted = try await fixture.push(endpoint, body: body, headers: fixture.headers())
                    #expect(accepted.status == 201, "\(accepted.body)")
                    let notification = try await socket.receive()
                    #expect(notification["messageType"]?.stringValue == "notification")
                    #expect(notification["channelID"]?.stringValue == channelID)
                    let version = try #require(notification["version"]?.stringValue)
                    #expect(accepted.headers["location"] == fixture.emulator.origin + "/m/" + version)
                    #expect(notification["headers"]?["encoding"]?.stringValue == "aes128gcm")
                    let data = try #require(notification["data"]?.stringValue)
                    #expect(!data.contains("="))
                    #expect(Base64URL.decode(data) == body)
                    let plaintext = try WebPushEncryption.decrypt(try #require(Base64URL.decode(data)), receiverKey: browserKey, auth: auth)
                    #expect(String(decoding: plaintext, as: UTF8.self) == "Hello Firefox ✓ 🔔")
                    try await socket.ack(channelID: channelID, version: version, code: 100)
                    let ack = try #require(await next(.ack, in: events))
                    #expect(ack.messageID == version && ack.code == 100 && ack.uaid == uaid)

                    // One flipped bit of the tag: Firefox cannot decrypt it and acks 101.
                    var tampered = try WebPushEncryption.encrypt(Array("tampered".utf8), for: keys)
                    tampered[tampered.count - 1] ^= 0x01
                    #expect(try await fixture.push(endpoint, body: tampered, headers: fixture.headers()).status == 201)
                    let second = try await socket.receive()
                    let secondVersion = try #require(second["version"]?.stringValue)
                    #expect(throws: WebPushDecryptionError.badTag) {
                        try WebPushEncryption.decrypt(Base64URL.decode(second["data"]?.stringValue ?? "") ?? [], receiverKey: browserKey, auth: auth)
                    }
                    try await socket.ack(channelID: channelID, version: secondVersion, code: 101)
                    #expect(try #require(await next(.ack, in: events)).code == 101)

                    // The acks, as the Firefox end-to-end test reads them.
                    let firefox = try await RawHTTPClient.json(port: fixture.port, "GET", "/emulator/firefox")
                    let channel = try #require(firefox.json?["channels"]?.arrayValue?.first)
                    #expect(channel["channelID"]?.stringValue == channelID)
                    #expect(channel["endpoint"]?.stringValue == endpoint)
                    let acks = channel["acks"]?.arrayValue?.map { ($0["version"]?.stringValue ?? "", $0["code"]?.intValue ?? 0) }
                    #expect(acks?.map(\.0) == [version, secondVersion])
                    #expect(acks?.map(\.1) == [100, 101])
                    #expect(firefox.json?["clients"]?.arrayValue?.first?["connected"]?.boolValue == true)

                    // A key other than the registered one is refused (Mozilla: 401, errno 109).
                    let wrongKey = try await fixture.push(
                        endpoint, body: body, headers: fixture.headers([("Authorization", fixture.authorization(key: VAPIDKey()))])
                    )
                    #expect(wrongKey.status == 401 && wrongKey.mozillaErrno == 109)

                    // Unregister: answered 200, and the endpoint is gone.
                    try await socket.send(#"{"channelID":"\#(channelID)","messageType":"unregister","code":200}"#)
                    let unregistered = try await socket.receive()
                    #expect(unregistered["messageType"]?.stringValue == "unregister" && unregistered["status"]?.intValue == 200)
                    let gone = try await fixture.push(endpoint, body: body, headers: fixture.headers())
                    #expect(gone.status == 410)
                }
            }
            let counters = fixture.emulator.counters
            #expect(counters.acks == ["100": 1, "101": 1])
            #expect(counters.notificationsSent == 2)
            #expect(fixture.emulator.firefoxChannels.first?.registered == false)
        }
    }

    @Test("a message for a disconnected uaid waits for its hello; TTL 0 does not")
    func reconnect() async throws {
        try await withFixture { fixture in
            let keys = try WebPushSubscriptionKeys(
                p256dh: Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation), auth: [UInt8](repeating: 1, count: 16)
            )
            let channelID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
            let (uaid, endpoint) = try await withHangGuard {
                try await FirefoxSocket.connect(fixture) { socket in
                    let uaid = try #require(try await socket.hello(uaid: nil)["uaid"]?.stringValue)
                    try await socket.send(#"{"channelID":"\#(channelID)","messageType":"register"}"#)
                    let endpoint = try #require(try await socket.receive()["pushEndpoint"]?.stringValue)
                    #expect(endpoint.contains("/wpush/v1/"))
                    return (uaid, endpoint)
                }
            }
            let stored = try await fixture.push(
                endpoint, body: try WebPushEncryption.encrypt(Array("stored".utf8), for: keys), headers: fixture.headers())
            #expect(stored.status == 201)
            let dropped = try await fixture.push(
                endpoint, body: try WebPushEncryption.encrypt(Array("now or never".utf8), for: keys), headers: fixture.headers(ttl: "0")
            )
            #expect(dropped.status == 201)
            try await withHangGuard {
                try await FirefoxSocket.connect(fixture) { socket in
                    let hello = try await socket.hello(uaid: uaid)
                    #expect(hello["uaid"]?.stringValue == uaid)
                    let notification = try await socket.receive()
                    #expect(notification["messageType"]?.stringValue == "notification")
                    #expect(stored.headers["location"]?.hasSuffix("/m/" + (notification["version"]?.stringValue ?? "?")) == true)
                    try await socket.ack(channelID: channelID, version: notification["version"]?.stringValue ?? "", code: 100)
                    // Nothing else was waiting: the next frame answers the ping.
                    try await socket.send("{}")
                    #expect(try await socket.receive().objectMembers?.isEmpty == true)
                }
            }
            #expect(fixture.emulator.counters.dropped == 1)
        }
    }

    @Test("shutdown() closes an open Firefox socket")
    func shutdownWithOpenSocket() async throws {
        try await withFixture { fixture in
            try await withHangGuard {
                try await FirefoxSocket.connect(fixture) { socket in
                    _ = try await socket.hello(uaid: nil)
                    await fixture.emulator.shutdown()
                    await #expect(throws: (any Error).self) { _ = try await socket.receive() }
                }
            }
        }
    }

    @Test("the upgrade echoes the push-notification subprotocol")
    func subprotocol() async throws {
        try await withFixture { fixture in
            let (status, headers) = try await RawHTTPClient.upgradeHead(port: fixture.port, protocols: "push-notification")
            #expect(status == 101)
            #expect(headers["sec-websocket-protocol"] == "push-notification")
            let (plainStatus, plainHeaders) = try await RawHTTPClient.upgradeHead(port: fixture.port, protocols: nil)
            #expect(plainStatus == 101)
            #expect(plainHeaders["sec-websocket-protocol"] == nil)
        }
    }
}

/// One WebSocket as Firefox opens it (subprotocol `push-notification`), inside `body`.
struct FirefoxSocket {
    var iterator: WebSocketInboundStream.AsyncIterator
    let outbound: WebSocketOutboundWriter

    static func connect<Result: Sendable>(
        _ fixture: Fixture, _ body: @escaping @Sendable (inout FirefoxSocket) async throws -> Result
    ) async throws -> Result {
        let result = ResultBox<Result>()
        var configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 16)
        configuration.additionalHeaders[.secWebSocketProtocol] = "push-notification"
        try await WebSocketClient.connect(
            url: fixture.emulator.webSocketURL, configuration: configuration,
            logger: Logger(label: "firefox-socket", factory: { _ in SwiftLogNoOpLogHandler() })
        ) { inbound, outbound, _ in
            var socket = FirefoxSocket(iterator: inbound.makeAsyncIterator(), outbound: outbound)
            result.set(try await body(&socket))
        }
        return try result.get()
    }

    func send(_ text: String) async throws {
        try await self.outbound.write(.text(text))
    }

    mutating func receive() async throws -> JSONValue {
        guard let message = try await self.iterator.nextMessage(maxSize: 1 << 16) else {
            throw FixtureError(description: "the socket closed")
        }
        guard case .text(let text) = message else { throw FixtureError(description: "a binary frame") }
        return try JSONValue.parse(text)
    }

    /// Firefox's first hello (with `uaid` when it has subscriptions) and the answer.
    mutating func hello(uaid: String?) async throws -> JSONValue {
        let uaidMember = uaid.map { #","uaid":"\#($0)""# } ?? ""
        try await self.send(#"{"messageType":"hello","broadcasts":{},"use_webpush":true\#(uaidMember)}"#)
        let reply = try await self.receive()
        guard reply["messageType"]?.stringValue == "hello" else { throw FixtureError(description: "no hello: \(reply.jsonString)") }
        return reply
    }

    func ack(channelID: String, version: String, code: Int) async throws {
        try await self.send(#"{"messageType":"ack","updates":[{"channelID":"\#(channelID)","version":"\#(version)","code":\#(code)}]}"#)
    }
}

/// Carries the body's result out of the WebSocket client's handler.
final class ResultBox<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)

    func set(_ value: Value) { self.value.withLock { $0 = value } }

    func get() throws -> Value {
        guard let value = self.value.withLock({ $0 }) else { throw FixtureError(description: "the socket closed before the test ended") }
        return value
    }
}

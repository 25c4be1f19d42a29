// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldTesting
import NIOCore
import NIOHPACK
import Testing

@testable import APNSEmulator

/// The request checks without a socket: one connection's state across a moving clock.
@Suite(.heavy) struct RequestProcessorTests {
    let clock = EmulatorClock(fixedAt: 1_800_000_000)
    let state = EmulatorState(inboxCapacity: 10, logCapacity: 10, seed: 1)
    let key = SigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")

    func processor(_ configure: (inout APNSEmulator.Configuration) -> Void = { _ in }) -> RequestProcessor {
        var configuration = APNSEmulator.Configuration.testing()
        configure(&configuration)
        self.state.register(key: RegisteredKey(teamID: self.key.teamID, keyID: self.key.keyID, publicKey: self.key.publicKey))
        return RequestProcessor(configuration: configuration, state: self.state, clock: self.clock, tokenCache: VerifiedTokenCache())
    }

    /// A development device of com.example.app, and a fresh connection to push to it on.
    func deviceAndConnection(online: Bool = true) -> (token: String, connection: ConnectionContext) {
        let device = self.state.createDevice(
            bundleID: "com.example.app", environment: .development, kind: .device, online: online, now: self.clock.nowMilliseconds
        )
        return (device.token, ConnectionContext(id: 1, environment: .development, certificate: nil, seed: 1))
    }

    func push(
        _ processor: RequestProcessor, _ connection: inout ConnectionContext, token: String, bearer: String, pushType: String = "alert"
    ) -> Outcome {
        let headers: HPACKHeaders = [
            ":method": "POST", ":path": "/3/device/\(token)", ":scheme": "https", "authorization": "bearer \(bearer)",
            "apns-topic": "com.example.app", "apns-push-type": pushType,
        ]
        return processor.process(RequestHeaders(headers), body: ByteBuffer(string: #"{"aps":{"alert":"x"}}"#), connection: &connection)
    }

    @Test("on one connection a token may change again 20 minutes after the last change")
    func tokenChangeInterval() throws {
        let processor = self.processor()
        var (token, connection) = self.deviceAndConnection()
        let first = try self.key.providerToken(issuedAt: self.clock.nowSeconds)
        #expect(self.push(processor, &connection, token: token, bearer: first).status == 200)
        self.clock.advance(seconds: 60)
        let second = try self.key.providerToken(issuedAt: self.clock.nowSeconds)
        #expect(self.push(processor, &connection, token: token, bearer: second).reason == .tooManyProviderTokenUpdates)
        self.clock.advance(seconds: 19 * 60)
        #expect(self.push(processor, &connection, token: token, bearer: second).status == 200)
        #expect(self.push(processor, &connection, token: token, bearer: first).reason == .tooManyProviderTokenUpdates)
        self.clock.advance(seconds: 40 * 60 + 1)
        #expect(self.push(processor, &connection, token: token, bearer: first).reason == .expiredProviderToken)
    }

    @Test("a valid token raises the stream limit even when the request fails for another reason")
    func firstAuthenticationSurvivesFailures() throws {
        let processor = self.processor()
        var connection = ConnectionContext(id: 1, environment: .development, certificate: nil, seed: 1)
        let bearer = try self.key.providerToken(issuedAt: self.clock.nowSeconds)
        let mdm = self.push(processor, &connection, token: "abcd", bearer: bearer, pushType: "mdm")
        #expect(mdm.reason == .topicDisallowed)
        #expect(mdm.firstAuthentication)
        let next = self.push(processor, &connection, token: "abcd", bearer: bearer)
        #expect(next.reason == .badDeviceToken)
        #expect(!next.firstAuthentication)
    }

    @Test("re-registering a key under the same id invalidates tokens verified with the old one")
    func keyReplacement() throws {
        let processor = self.processor()
        var (token, connection) = self.deviceAndConnection()
        let bearer = try self.key.providerToken(issuedAt: self.clock.nowSeconds)
        #expect(self.push(processor, &connection, token: token, bearer: bearer).status == 200)
        let replacement = SigningKey.generate(keyID: self.key.keyID, teamID: self.key.teamID)
        self.state.register(key: RegisteredKey(teamID: replacement.teamID, keyID: replacement.keyID, publicKey: replacement.publicKey))
        #expect(self.push(processor, &connection, token: token, bearer: bearer).reason == .invalidProviderToken)
    }

    @Test("a body remembered as valid JSON passes again only byte for byte")
    func rememberedBody() {
        var last: [UInt8] = []
        #expect(!RequestProcessor.isJSONObject(ByteBuffer(string: ""), lastValid: &last))
        #expect(RequestProcessor.isJSONObject(ByteBuffer(string: #"{"a":1}"#), lastValid: &last))
        #expect(last == Array(#"{"a":1}"#.utf8))
        #expect(RequestProcessor.isJSONObject(ByteBuffer(string: #"{"a":1}"#), lastValid: &last))
        #expect(!RequestProcessor.isJSONObject(ByteBuffer(string: #"{"a":1 "#), lastValid: &last))  // same length, not JSON
        #expect(!RequestProcessor.isJSONObject(ByteBuffer(string: #"["a",1]"#), lastValid: &last))
        #expect(!RequestProcessor.isJSONObject(ByteBuffer(string: ""), lastValid: &last))
        #expect(last == Array(#"{"a":1}"#.utf8))
    }

    @Test("absurd numbers in headers and tokens are refused, not trapped on")
    func overflow() throws {
        let processor = self.processor()
        var (token, connection) = self.deviceAndConnection(online: false)
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"KEY1234567"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"TEAM123456","iat":9223372036854775807}"#.utf8))
        #expect(
            self.push(processor, &connection, token: token, bearer: header + "." + claims + "." + Base64URL.encode([UInt8](repeating: 1, count: 64)))
                .reason == .invalidProviderToken)
        var fresh = ConnectionContext(id: 2, environment: .development, certificate: nil, seed: 2)
        let bearer = try self.key.providerToken(issuedAt: self.clock.nowSeconds)
        let headers: HPACKHeaders = [
            ":method": "POST", ":path": "/3/device/\(token)", "authorization": "bearer \(bearer)",
            "apns-topic": "com.example.app", "apns-expiration": "999999999999999999",
        ]
        let outcome = processor.process(RequestHeaders(headers), body: ByteBuffer(string: "{}"), connection: &fresh)
        #expect(outcome.status == 200)
        #expect(self.state.device(token: token)?.hasStoredNotification == true)
    }
}

extension RequestProcessorTests {
    @Test("a shared token source keeps one connection valid for hours of moved clock")
    func tokenSourceAcrossHours() throws {
        let processor = self.processor()
        var (token, connection) = self.deviceAndConnection()
        let source = ProviderTokenSource(key: self.key, clock: self.clock)
        var generations: Set<Int> = []
        // A push every 7 minutes for 5 hours on one connection, the token read from the source each time.
        for _ in 0..<43 {
            let providerToken = try source.current()
            generations.insert(providerToken.generation)
            let outcome = self.push(processor, &connection, token: token, bearer: String(providerToken.authorization.dropFirst(7)))
            #expect(outcome.status == 200, "\(outcome.reason?.rawValue ?? "")")
            self.clock.advance(seconds: 7 * 60)
        }
        #expect(generations.count == 6)
    }
}

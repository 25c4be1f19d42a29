// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// The provider-token rules, with the emulator's clock moved instead of waiting.
@Suite(.heavy) struct ProviderTokenRuleTests {
    static let body = #"{"aps":{"alert":"Hello"}}"#

    func request(_ fixture: EmulatorFixture, token: String, bearer: String) throws -> CurlRequest {
        var headers = try fixture.alertHeaders().filter { $0.0 != "authorization" }
        headers.append(("authorization", bearer))
        return CurlRequest(path: "/3/device/\(token)", headers: headers, json: Self.body)
    }

    @Test("a token is good for an hour after its iat, then ExpiredProviderToken")
    func expiry() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let bearer = try fixture.bearer()
            #expect(try await fixture.development.send(self.request(fixture, token: token, bearer: bearer)).status == 200)
            fixture.clock.advance(seconds: 3599)
            #expect(try await fixture.development.send(self.request(fixture, token: token, bearer: bearer)).status == 200)
            fixture.clock.advance(seconds: 2)
            let expired = try await fixture.development.send(self.request(fixture, token: token, bearer: bearer))
            #expect(expired.status == 403)
            #expect(expired.reason == "ExpiredProviderToken")
        }
    }

    @Test("a new token on one connection within 20 minutes is refused, unless it is a genuine refresh")
    func updateInterval() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let first = try fixture.bearer(issuedAt: fixture.clock.nowSeconds)
            let second = try fixture.bearer(issuedAt: fixture.clock.nowSeconds - 1)
            let early = try await fixture.development.send([
                try self.request(fixture, token: token, bearer: first), try self.request(fixture, token: token, bearer: second),
            ])
            #expect(early.map(\.status) == [200, 429])
            #expect(early[1].reason == "TooManyProviderTokenUpdates")
            #expect(early[1].newConnections == 0)

            // A fresh connection may start with any token.
            #expect(try await fixture.development.send(self.request(fixture, token: token, bearer: second)).status == 200)

            // 25 minutes on, a client that shares one token across connections refreshes it. A
            // connection that starts with the old token may switch to the refreshed one at once:
            // it is 25 minutes newer, a genuine refresh.
            let start = fixture.clock.nowSeconds
            fixture.clock.advance(seconds: 20 * 60)
            let old = try await fixture.development.send([try self.request(fixture, token: token, bearer: first)])
            #expect(old[0].status == 200)
            fixture.clock.advance(seconds: 5 * 60)
            let refreshed = try fixture.bearer(issuedAt: start + 25 * 60)
            let later = try await fixture.development.send([
                try self.request(fixture, token: token, bearer: first),
                try self.request(fixture, token: token, bearer: refreshed),
            ])
            #expect(later.map(\.status) == [200, 200])
            // But regenerating again right away is not a refresh.
            let again = try fixture.bearer(issuedAt: start + 25 * 60 - 1)
            let churn = try await fixture.development.send([
                try self.request(fixture, token: token, bearer: refreshed),
                try self.request(fixture, token: token, bearer: again),
            ])
            #expect(churn.map(\.status) == [200, 429])
            // 20 minutes after the last change any valid token is fine: RequestProcessorTests
            // shows it on one connection, which one curl run cannot keep across a clock move.
        }
    }

    @Test("a connection belongs to the first team that pushes on it")
    func teamBinding() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let otherTeam = SigningKey.generate(keyID: "OTHERKEY01", teamID: "OTHERTEAM1")
            fixture.emulator.register(key: otherTeam)
            let responses = try await fixture.development.send([
                try self.request(fixture, token: token, bearer: try fixture.bearer()),
                try self.request(fixture, token: token, bearer: try fixture.bearer(otherTeam)),
            ])
            #expect(responses[0].status == 200)
            #expect(responses[1].reason == "InvalidProviderToken")
        }
    }

    @Test("related topic-specific keys may share a connection")
    func relatedKeys() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let a = SigningKey.generate(keyID: "TOPICKEYA1", teamID: EmulatorFixture.teamID)
            let b = SigningKey.generate(keyID: "TOPICKEYB1", teamID: EmulatorFixture.teamID)
            fixture.emulator.state.register(
                key: RegisteredKey(
                    teamID: a.teamID, keyID: a.keyID, publicKey: a.publicKey, topics: [EmulatorFixture.bundleID], relatedKeyID: b.keyID)
            )
            fixture.emulator.state.register(
                key: RegisteredKey(teamID: b.teamID, keyID: b.keyID, publicKey: b.publicKey, topics: [EmulatorFixture.bundleID]))
            fixture.clock.advance(seconds: 0)
            let responses = try await fixture.development.send([
                try self.request(fixture, token: token, bearer: try fixture.bearer(a)),
                try self.request(fixture, token: token, bearer: try fixture.bearer(b)),
            ])
            // b's token differs from a's, so the 20-minute rule answers: the keys themselves were accepted.
            #expect(responses.map(\.status) == [200, 429])
            // A topic-specific key cannot push to another app.
            let other = try await fixture.createDevice(bundleID: "com.example.other")
            var headers = try fixture.alertHeaders(topic: "com.example.other").filter { $0.0 != "authorization" }
            headers.append(("authorization", try fixture.bearer(a)))
            #expect(
                try await fixture.development.send(CurlRequest(path: "/3/device/\(other)", headers: headers, json: Self.body)).reason
                    == "InvalidProviderToken")
        }
    }

    @Test("keys registered and revoked through the control API take effect at once")
    func keyRegistration() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let key = SigningKey.generate(keyID: "NEWKEY0001", teamID: "NEWTEAM001")
            let pem = key.publicKeyPEM.replacingOccurrences(of: "\n", with: "\\n")
            let before = try await fixture.development.send(self.request(fixture, token: token, bearer: try fixture.bearer(key)))
            #expect(before.reason == "InvalidProviderToken")
            let created = try await fixture.control("POST", "/v1/keys", json: #"{"keyId":"NEWKEY0001","teamId":"NEWTEAM001","publicKey":"\#(pem)"}"#)
            #expect(created.status == 201)
            #expect(try await fixture.development.send(self.request(fixture, token: token, bearer: try fixture.bearer(key))).status == 200)
            #expect(try await fixture.control("DELETE", "/v1/keys/NEWKEY0001").status == 200)
            #expect(
                try await fixture.development.send(self.request(fixture, token: token, bearer: try fixture.bearer(key))).reason
                    == "InvalidProviderToken")
        }
    }

    @Test("DER signatures and string iat values are accepted, as APNs accepts them")
    func lenientEncodings() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let keyFile = try fixture.directory.write("key.p8", fixture.key.privateKeyPEM)
            let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"\#(EmulatorFixture.keyID)"}"#.utf8))
            let claims = Base64URL.encode(Array(#"{"iss":"\#(EmulatorFixture.teamID)","iat":"\#(fixture.clock.nowSeconds)"}"#.utf8))
            let input = header + "." + claims
            // openssl signs with a DER-encoded ECDSA signature, like Apple's command-line recipe.
            let signature = try await ProcessRunner.run(
                "sh", ["-c", "printf '%s' \"$1\" | openssl dgst -sha256 -sign \"$2\" | base64 -w0 | tr '+/' '-_' | tr -d '='", "sh", input, keyFile]
            ).standardOutput
            let response = try await fixture.development.send(self.request(fixture, token: token, bearer: "bearer \(input).\(signature)"))
            #expect(response.status == 200, "\(response.body)")
        }
    }
}

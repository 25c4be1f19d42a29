// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldTesting
import Testing
import WebPush
import WebPushEmulator

/// Accepted pushes: 201, `Location`, `TTL`, and the text the virtual browser decrypted.
@Suite(.heavy) struct PushTests {
    @Test("a good push is answered 201 and decrypted into the inbox", arguments: WebPushPersonality.allCases)
    func goodPush(personality: WebPushPersonality) async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(personality)
            let origin = fixture.emulator.origin
            switch personality {
            case .apple: #expect(browser.endpoint.hasPrefix(origin + "/apple/"))
            case .mozilla: #expect(browser.endpoint.hasPrefix(origin + "/wpush/v2/"))
            case .fcm: #expect(browser.endpoint.hasPrefix(origin + "/fcm/send/"))
            }
            #expect(Base64URL.decode(browser.p256dh)?.count == 65)
            #expect(Base64URL.decode(browser.auth)?.count == 16)

            let text = "Hello ✓ 🔔 from \(personality.rawValue)"
            let response = try await fixture.push(text, to: browser, [("Urgency", "high"), ("Topic", "greeting")])
            #expect(response.status == 201, "\(response.body)")
            let location = try #require(response.headers["location"])
            #expect(location.hasPrefix(origin + "/m/"))
            #expect(response.headers["ttl"] == "60")
            #expect((response.headers["apns-id"] != nil) == (personality == .apple))

            let inbox = try #require(fixture.emulator.inbox(browser.id))
            #expect(inbox.decryptionFailures.isEmpty)
            let message = try #require(inbox.messages.first)
            #expect(message.text == text)
            #expect(location == origin + "/m/" + message.id)
            #expect(message.ttl == 60)
            #expect(message.urgency == "high")
            #expect(message.topic == "greeting")
            let counters = fixture.emulator.counters
            #expect(counters.accepted == 1 && counters.delivered == 1 && counters.requests == 1)
        }
    }

    @Test("TTL above 30 days is capped and the cap is echoed")
    func ttlCap() async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(.mozilla)
            let response = try await fixture.push("long", to: browser, [("TTL", "99999999")])
            #expect(response.status == 201)
            #expect(response.headers["ttl"] == "2592000")
            #expect(fixture.emulator.inbox(browser.id)?.messages.first?.ttl == 2_592_000)
        }
    }

    @Test("Mozilla and FCM relay a body they cannot frame; the browser records the failure")
    func relayBadCiphertext() async throws {
        try await withFixture { fixture in
            for personality in [WebPushPersonality.mozilla, .fcm] {
                let browser = try fixture.browser(personality)
                var body = try Fixture.encrypt("tamper", for: browser)
                body[body.count - 1] ^= 0x01  // one bit of the GCM tag
                let response = try await fixture.push(browser.endpoint, body: body, headers: fixture.headers())
                #expect(response.status == 201)
                let inbox = try #require(fixture.emulator.inbox(browser.id))
                #expect(inbox.messages.isEmpty)
                #expect(inbox.decryptionFailures.map(\.error) == ["badTag"])
            }
            #expect(fixture.emulator.counters.decryptionFailures == 2)
        }
    }

    @Test("an unrestricted Mozilla subscription takes pushes without VAPID")
    func unrestricted() async throws {
        try await withFixture { fixture in
            let browser = try fixture.emulator.makeBrowser(personality: .mozilla, applicationServerKey: nil)
            #expect(browser.endpoint.contains("/wpush/v1/"))
            let body = try Fixture.encrypt("no vapid", for: browser)
            let response = try await fixture.push(browser.endpoint, body: body, headers: fixture.headers([("Authorization", nil)]))
            #expect(response.status == 201)
            #expect(fixture.emulator.inbox(browser.id)?.messages.first?.text == "no vapid")
            #expect(throws: (any Error).self) { try fixture.emulator.makeBrowser(personality: .apple, applicationServerKey: nil) }
        }
    }

    @Test("legacy WebPush authorization with Crypto-Key p256ecdsa is accepted")
    func legacyAuthorization() async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(.mozilla)
            let token = fixture.vapid.token(
                audience: fixture.emulator.origin, subject: Fixture.subject, expiresAt: fixture.emulator.clock.nowSeconds + 600
            )
            let response = try await fixture.push(
                "legacy", to: browser, [("Authorization", "WebPush \(token)"), ("Crypto-Key", "p256ecdsa=\(fixture.vapid.publicKeyBase64URL)")]
            )
            #expect(response.status == 201, "\(response.body)")
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldTesting
import Testing
import WebPush
import WebPushEmulator

/// Each check refuses the way each real service does: Apple's `{"reason"}` with an `apns-id`,
/// Mozilla's `{"code","errno","error","message"}`, FCM's plain text.
@Suite(.heavy) struct RefusalTests {
    enum Scenario: String, CaseIterable, Sendable {
        case wrongVAPIDKey, expiredJWT, expiryTooFar, wrongAudience, missingAuthorization, malformedAuthorization
        case missingTTL, negativeTTL, textTTL, badUrgency, longTopic, topicWithSpace
        case aesgcm, saltWithAES128GCM, dhWithAES128GCM, tooLarge

        /// `(status, Apple reason, Mozilla errno, FCM status)`.
        var expected: (status: Int, reason: String, errno: Int, fcm: Int) {
            switch self {
            case .wrongVAPIDKey: (403, "VapidPkHashMismatch", 109, 403)
            case .expiredJWT, .expiryTooFar, .wrongAudience: (403, "BadJwtToken", 109, 403)
            case .missingAuthorization, .malformedAuthorization: (403, "BadAuthorizationHeader", 109, 401)
            case .missingTTL: (400, "BadTtl", 111, 400)
            case .negativeTTL, .textTTL: (400, "BadTtl", 112, 400)
            case .badUrgency: (400, "BadUrgency", 114, 400)
            case .longTopic, .topicWithSpace: (400, "BadWebPushTopic", 113, 400)
            case .aesgcm, .saltWithAES128GCM, .dhWithAES128GCM: (400, "BadWebPushRequest", 110, 400)
            case .tooLarge: (413, "PayloadTooLarge", 104, 413)
            }
        }

        func request(_ fixture: Fixture, _ browser: WebPushBrowserSubscription) throws -> (body: [UInt8], headers: [(String, String)]) {
            let body = try Fixture.encrypt("refused", for: browser)
            switch self {
            case .wrongVAPIDKey: return (body, fixture.headers([("Authorization", fixture.authorization(key: VAPIDKey()))]))
            case .expiredJWT: return (body, fixture.headers([("Authorization", fixture.authorization(lifetime: -60))]))
            case .expiryTooFar: return (body, fixture.headers([("Authorization", fixture.authorization(lifetime: 25 * 3600))]))
            case .wrongAudience:
                return (body, fixture.headers([("Authorization", fixture.authorization(audience: fixture.emulator.origin + "/"))]))
            case .missingAuthorization: return (body, fixture.headers([("Authorization", nil)]))
            case .malformedAuthorization: return (body, fixture.headers([("Authorization", "Bearer abc")]))
            case .missingTTL: return (body, fixture.headers(ttl: nil))
            case .negativeTTL: return (body, fixture.headers(ttl: "-1"))
            case .textTTL: return (body, fixture.headers(ttl: "soon"))
            case .badUrgency: return (body, fixture.headers([("Urgency", "urgent")]))
            case .longTopic: return (body, fixture.headers([("Topic", String(repeating: "a", count: 33))]))
            case .topicWithSpace: return (body, fixture.headers([("Topic", "two words")]))
            case .aesgcm: return (body, fixture.headers([("Content-Encoding", "aesgcm")]))
            case .saltWithAES128GCM: return (body, fixture.headers([("Encryption", "salt=AAAAAAAAAAAAAAAAAAAAAA")]))
            case .dhWithAES128GCM: return (body, fixture.headers([("Crypto-Key", "dh=BBBB")]))
            case .tooLarge: return ([UInt8](repeating: 7, count: 4097), fixture.headers())
            }
        }
    }

    @Test("each refusal, answered per personality", arguments: Scenario.allCases, WebPushPersonality.allCases)
    func refusal(scenario: Scenario, personality: WebPushPersonality) async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(personality)
            let (body, headers) = try scenario.request(fixture, browser)
            let response = try await fixture.push(browser.endpoint, body: body, headers: headers)
            let expected = scenario.expected
            switch personality {
            case .apple:
                #expect(response.status == expected.status, "\(response.body)")
                #expect(response.reason == expected.reason)
                #expect(response.headers["apns-id"]?.count == 36)
            case .mozilla:
                let status = expected.status == 403 ? 401 : expected.status
                #expect(response.status == status, "\(response.body)")
                #expect(response.mozillaErrno == expected.errno)
                #expect(response.json?["code"]?.intValue == Int64(status))
                #expect(response.json?["error"]?.stringValue?.isEmpty == false)
                #expect(response.json?["message"]?.stringValue?.isEmpty == false)
            case .fcm:
                #expect(response.status == expected.fcm, "\(response.body)")
                #expect(response.headers["content-type"]?.hasPrefix("text/plain") == true)
            }
            let inbox = try #require(fixture.emulator.inbox(browser.id))
            #expect(inbox.messages.isEmpty && inbox.decryptionFailures.isEmpty)
            let counters = fixture.emulator.counters
            #expect(counters.accepted == 0)
            #expect(counters.refused.values.reduce(0, +) == 1)
        }
    }

    @Test("Apple refuses a body whose aes128gcm header is malformed", arguments: [0, 20, 85])
    func appleFraming(length: Int) async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(.apple)
            var body = try Fixture.encrypt("framing", for: browser)
            if length > 0 {
                body = Array(body.prefix(length))
            } else {
                body[20] = 64  // idlen ≠ 65
            }
            let response = try await fixture.push(browser.endpoint, body: body, headers: fixture.headers())
            #expect(response.status == 400)
            #expect(response.reason == "BadWebPushRequest")
            #expect(fixture.emulator.counters.refused["badFraming"] == 1)
        }
    }

    @Test("Apple refuses subjects Apple refuses; Mozilla takes them, FCM needs none")
    func subjects() async throws {
        try await withFixture { fixture in
            for subject in ["mailto:x@localhost", "mailto: <a@example.com>", "me"] {
                let apple = try fixture.browser(.apple)
                let refused = try await fixture.push("s", to: apple, [("Authorization", fixture.authorization(subject: subject))])
                #expect(refused.status == 403)
                #expect(refused.reason == "BadJwtToken")
            }
            let mozilla = try fixture.browser(.mozilla)
            let taken = try await fixture.push("s", to: mozilla, [("Authorization", fixture.authorization(subject: "mailto:x@localhost"))])
            #expect(taken.status == 201)
            let noSubject = try await fixture.push("s", to: mozilla, [("Authorization", fixture.authorization(subject: "me"))])
            #expect(noSubject.status == 401)
            let fcm = try fixture.browser(.fcm)
            let anything = try await fixture.push("s", to: fcm, [("Authorization", fixture.authorization(subject: "me"))])
            #expect(anything.status == 201)
        }
    }

    @Test("unknown and unsubscribed endpoints", arguments: WebPushPersonality.allCases)
    func deadSubscriptions(personality: WebPushPersonality) async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(personality)
            let unknown = browser.endpoint.dropLast(4) + "AAAA"
            let notFound = try await fixture.push(String(unknown), body: [1], headers: fixture.headers())
            #expect(notFound.status == 404)
            #expect(fixture.emulator.unsubscribe(browser.id))
            let gone = try await fixture.push("after", to: browser)
            #expect(gone.status == 410)
            switch personality {
            case .apple:
                #expect(notFound.reason == "BadPath")
                #expect(gone.reason == "Unregistered")
            case .mozilla:
                #expect(notFound.mozillaErrno == 102)
                #expect(gone.mozillaErrno == 106)
            case .fcm:
                #expect(gone.body.contains("unsubscribed or expired"))
            }
            #expect(fixture.emulator.counters.refused == ["unknownSubscription": 1, "unsubscribed": 1])
        }
    }

    @Test("an injected 429 carries Retry-After, then pushes go through", arguments: WebPushPersonality.allCases)
    func fault(personality: WebPushPersonality) async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(personality)
            fixture.emulator.inject(fault: WebPushFault(status: 429, retryAfter: 7), count: 2)
            for _ in 0..<2 {
                let throttled = try await fixture.push("busy", to: browser)
                #expect(throttled.status == 429)
                #expect(throttled.headers["retry-after"] == "7")
                if personality == .apple { #expect(throttled.reason == "TooManyRequests") }
            }
            #expect(try await fixture.push("ok", to: browser).status == 201)
            #expect(fixture.emulator.counters.refused["fault429"] == 2)
        }
    }
}

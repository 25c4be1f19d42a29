// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMEmulator
import HeraldTesting
import Testing

/// Injected faults and the bearer-token checks of `messages:send`.
@Suite(.heavy) struct FaultAndAuthTests {
    static let unauthenticatedMessage =
        "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid "
        + "authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."

    @Test("a 429 fault answers QUOTA_EXCEEDED with retry-after, then service resumes")
    func quota() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let access = try await fixture.accessToken()
            fixture.emulator.inject([.status(429, retryAfter: 7), .status(503, retryAfter: nil), .status(500, retryAfter: nil)])
            let body = Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#)
            let quota = try await fixture.send(body, accessToken: access)
            #expect(quota.status == 429)
            #expect(quota.headers["retry-after"] == "7")
            #expect(quota.googleStatus == "RESOURCE_EXHAUSTED")
            #expect(quota.errorCode == "QUOTA_EXCEEDED")
            let unavailable = try await fixture.send(body, accessToken: access)
            #expect(unavailable.status == 503)
            #expect(unavailable.headers["retry-after"] == nil)
            #expect(unavailable.googleStatus == "UNAVAILABLE")
            #expect(unavailable.errorCode == "UNAVAILABLE")
            let internalError = try await fixture.send(body, accessToken: access)
            #expect(internalError.status == 500)
            #expect(internalError.googleStatus == "INTERNAL")
            let success = try await fixture.send(body, accessToken: access)
            #expect(success.status == 200)
            #expect(await fixture.emulator.messages(token, count: 1).count == 1)
            let counters = fixture.emulator.counters
            #expect(counters.sendRequests == 4)
            #expect(counters.delivered == 1)
            #expect(counters.refused == ["QUOTA_EXCEEDED": 1, "UNAVAILABLE": 1, "INTERNAL": 1])
        }
    }

    @Test("a drop fault closes the connection without an answer")
    func drop() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let access = try await fixture.accessToken()
            fixture.emulator.inject([.drop])
            let body = Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#)
            await #expect(throws: RawHTTPError.closedWithoutResponse) { try await fixture.send(body, accessToken: access) }
            #expect(try await fixture.send(body, accessToken: access).status == 200)
            #expect(fixture.emulator.counters.refused["DROPPED"] == 1)
            #expect(fixture.emulator.inbox(token).count == 1)
        }
    }

    @Test("a missing or unknown bearer token is UNAUTHENTICATED")
    func missingToken() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let body = Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#)
            for access in [nil, "ya29.unknown"] {
                let response = try await fixture.send(body, accessToken: access)
                #expect(response.status == 401)
                #expect(response.headers["www-authenticate"] == #"Bearer realm="https://accounts.google.com/", error="invalid_token""#)
                #expect(response.googleStatus == "UNAUTHENTICATED")
                #expect(response.googleMessage == Self.unauthenticatedMessage)
            }
            #expect(fixture.emulator.counters.refused["UNAUTHENTICATED"] == 2)
        }
    }

    @Test("expired access tokens are refused until a new one is fetched")
    func expiry() async throws {
        let clock = FCMEmulatorClock.manual(startingAt: 1_800_000_000_000)
        try await withFixture(clock: clock) { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let body = Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#)
            let first = try await fixture.accessToken()
            #expect(try await fixture.send(body, accessToken: first).status == 200)
            fixture.emulator.expireAccessTokens()
            #expect(try await fixture.send(body, accessToken: first).status == 401)
            let second = try await fixture.accessToken()
            #expect(try await fixture.send(body, accessToken: second).status == 200)
            // Tokens live for the configured lifetime on the emulator's clock.
            fixture.emulator.setAccessTokenLifetime(seconds: 60)
            let short = try await fixture.tokenRequest(assertion: try fixture.assertion())
            #expect(short.json?["expires_in"]?.intValue == 59)
            let third = try #require(short.json?["access_token"]?.stringValue)
            clock.advance(seconds: 59)
            #expect(try await fixture.send(body, accessToken: third).status == 200)
            clock.advance(seconds: 1)
            #expect(try await fixture.send(body, accessToken: third).status == 401)
        }
    }

    @Test("a token of another project's account is PERMISSION_DENIED")
    func otherProject() async throws {
        try await withFixture { fixture in
            let other = try fixture.emulator.makeServiceAccount(projectID: "other-project")
            let access = try await fixture.accessToken(account: other)
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let response = try await fixture.send(Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#), accessToken: access)
            #expect(response.status == 403)
            #expect(response.googleStatus == "PERMISSION_DENIED")
            #expect(response.errorCode == nil)
        }
    }
}

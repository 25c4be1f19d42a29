// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMEmulator
import HeraldTesting
import Testing
import _CryptoExtras

/// `POST /token`: Google's JWT-bearer grant, checked the way Google checks it.
@Suite(.heavy) struct TokenEndpointTests {
    static let timeDescription =
        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."

    @Test("a JWT signed by the account's key gets an access token")
    func grant() async throws {
        try await withFixture { fixture in
            let response = try await fixture.tokenRequest(assertion: try fixture.assertion())
            #expect(response.status == 200)
            #expect(response.headers["content-type"]?.hasPrefix("application/json") == true)
            let token = try #require(response.json?["access_token"]?.stringValue)
            #expect(token.hasPrefix("ya29."))
            #expect(response.json?["expires_in"]?.intValue == 3599)
            #expect(response.json?["token_type"]?.stringValue == "Bearer")
            // cloud-platform among other scopes is enough (firebase-admin asks for that list).
            let broad = try await fixture.tokenRequest(
                assertion: try fixture.assertion(
                    scope: "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email"
                )
            )
            #expect(broad.status == 200)
            // The emulator's own token URL is an accepted audience too.
            let own = try await fixture.tokenRequest(assertion: try fixture.assertion(audience: fixture.emulator.tokenURL))
            #expect(own.status == 200)
            let counters = fixture.emulator.counters
            #expect(counters.tokenRequests == 3)
            #expect(counters.tokensIssued == 3)
            #expect(counters.tokenFailures == 0)
        }
    }

    @Test("a bad signature, another key id or an unknown account is refused")
    func badSignature() async throws {
        try await withFixture { fixture in
            let otherKey = try _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation
            let forged = try await fixture.tokenRequest(assertion: try fixture.assertion(signingKeyPEM: otherKey))
            #expect(forged.status == 400)
            #expect(forged.json?["error"]?.stringValue == "invalid_grant")
            #expect(forged.json?["error_description"]?.stringValue == "Invalid JWT Signature.")

            let wrongKeyID = try await fixture.tokenRequest(assertion: try fixture.assertion(keyID: "0123456789abcdef"))
            #expect(wrongKeyID.json?["error_description"]?.stringValue == "Invalid JWT Signature.")

            let stranger = try FCMServiceAccount.generate(projectID: Fixture.project)
            let unknown = try await fixture.tokenRequest(assertion: try fixture.assertion(account: stranger))
            #expect(unknown.status == 400)
            #expect(unknown.json?["error"]?.stringValue == "invalid_grant")

            // Once trusted, the account made elsewhere works.
            fixture.emulator.trust(stranger)
            let trusted = try await fixture.tokenRequest(assertion: try fixture.assertion(account: stranger))
            #expect(trusted.status == 200)
            #expect(fixture.emulator.counters.tokenFailures == 3)
        }
    }

    @Test("a wrong audience is refused")
    func wrongAudience() async throws {
        try await withFixture { fixture in
            let response = try await fixture.tokenRequest(assertion: try fixture.assertion(audience: "https://example.com/token"))
            #expect(response.status == 400)
            #expect(response.json?["error"]?.stringValue == "invalid_grant")
            #expect(response.json?["error_description"]?.stringValue?.hasPrefix("Invalid JWT: Failed audience check.") == true)
        }
    }

    @Test("long-lived, future and expired assertions are refused with Google's words")
    func timeChecks() async throws {
        try await withFixture { fixture in
            let now = fixture.emulator.clock.nowSeconds
            for assertion in [
                try fixture.assertion(lifetime: 7200),
                try fixture.assertion(issuedAt: now + 900),
                try fixture.assertion(issuedAt: now - 7200),
                try fixture.assertion(lifetime: 0),
            ] {
                let response = try await fixture.tokenRequest(assertion: assertion)
                #expect(response.status == 400)
                #expect(response.json?["error"]?.stringValue == "invalid_grant")
                #expect(response.json?["error_description"]?.stringValue == Self.timeDescription)
            }
            // A little clock skew is fine.
            #expect(try await fixture.tokenRequest(assertion: try fixture.assertion(issuedAt: now + 120)).status == 200)
        }
    }

    @Test("the assertion must ask for an FCM scope")
    func scope() async throws {
        try await withFixture { fixture in
            let missing = try await fixture.tokenRequest(assertion: try fixture.assertion(scope: nil))
            #expect(missing.status == 400)
            #expect(missing.json?["error"]?.stringValue == "invalid_scope")
            #expect(missing.json?["error_description"]?.stringValue == "Empty or missing scope not allowed.")
            let other = try await fixture.tokenRequest(
                assertion: try fixture.assertion(scope: "https://www.googleapis.com/auth/devstorage.read_only"))
            #expect(other.status == 400)
            #expect(other.json?["error"]?.stringValue == "invalid_scope")
        }
    }

    @Test("a wrong grant type or a malformed body is refused")
    func malformed() async throws {
        try await withFixture { fixture in
            let grant = try await fixture.tokenRequest(assertion: try fixture.assertion(), grantType: "client_credentials")
            #expect(grant.status == 400)
            #expect(grant.json?["error"]?.stringValue == "unsupported_grant_type")
            let empty = try await RawHTTPClient.send(port: fixture.port, method: "POST", path: "/token")
            #expect(empty.status == 400)
            #expect(empty.json?["error"]?.stringValue == "invalid_request")
            let garbage = try await fixture.tokenRequest(assertion: "not-a-jwt")
            #expect(garbage.status == 400)
            #expect(garbage.json?["error"]?.stringValue == "invalid_request")
        }
    }
}

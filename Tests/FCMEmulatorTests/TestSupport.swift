// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import FCMEmulator
import Foundation
import HeraldTesting
import Logging
import _CryptoExtras

/// An emulator started for one test, with a service account of project `herald-test`.
struct Fixture: Sendable {
    static let project = "herald-test"
    static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    let emulator: FCMEmulator
    let account: FCMServiceAccount
    var port: Int { self.emulator.port ?? 0 }

    /// A JWT-bearer assertion as google-auth makes it, with knobs to get it wrong.
    func assertion(
        account: FCMServiceAccount? = nil, audience: String = "https://oauth2.googleapis.com/token",
        scope: String? = Fixture.messagingScope, issuedAt: Int64? = nil, lifetime: Int64 = 3600, keyID: String? = nil,
        signingKeyPEM: String? = nil
    ) throws -> String {
        let account = account ?? self.account
        let now = issuedAt ?? self.emulator.clock.nowSeconds
        let header: JSONValue = ["alg": "RS256", "typ": "JWT", "kid": .string(keyID ?? account.privateKeyID)]
        var claims: [(String, JSONValue)] = [
            ("iss", .string(account.clientEmail)), ("aud", .string(audience)), ("iat", .int(now)), ("exp", .int(now + lifetime)),
        ]
        if let scope { claims.append(("scope", .string(scope))) }
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(JSONValue.object(claims).serialized())
        let key = try _RSA.Signing.PrivateKey(pemRepresentation: signingKeyPEM ?? account.privateKeyPEM)
        let signature = try key.signature(for: SHA256.hash(data: Array(input.utf8)), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// `POST /token` with a form body.
    func tokenRequest(assertion: String, grantType: String = "urn:ietf:params:oauth:grant-type:jwt-bearer") async throws -> RawResponse {
        let form = "grant_type=\(grantType.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")&assertion=\(assertion)"
        return try await RawHTTPClient.send(
            port: self.port, method: "POST", path: "/token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: Array(form.utf8)
        )
    }

    /// A fresh access token for the fixture's account (or `account`).
    func accessToken(account: FCMServiceAccount? = nil) async throws -> String {
        let response = try await self.tokenRequest(assertion: try self.assertion(account: account))
        guard response.status == 200, let token = response.json?["access_token"]?.stringValue else {
            throw FixtureError(message: "token request failed: \(response.status) \(response.body)")
        }
        return token
    }

    /// `POST /v1/projects/{project}/messages:send`.
    func send(_ json: String, accessToken: String?, project: String = Fixture.project) async throws -> RawResponse {
        var headers: [(String, String)] = []
        if let accessToken { headers.append(("Authorization", "Bearer \(accessToken)")) }
        return try await RawHTTPClient.json(port: self.port, "POST", "/v1/projects/\(project)/messages:send", json, headers: headers)
    }

    /// A send body for `message` (a JSON object's text).
    static func body(_ message: String, validateOnly: Bool = false) -> String {
        validateOnly ? #"{"validate_only":true,"message":\#(message)}"# : #"{"message":\#(message)}"#
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var message: String
    var description: String { self.message }
}

/// Starts an emulator (on a free port), makes a service account, runs `body`, stops it.
func withFixture<Result: Sendable>(clock: FCMEmulatorClock = .system, _ body: (Fixture) async throws -> Result) async throws -> Result {
    let emulator = FCMEmulator(clock: clock, logger: Logger(label: "fcm-emulator-test", factory: { _ in SwiftLogNoOpLogHandler() }))
    try await emulator.start()
    do {
        let account = try emulator.makeServiceAccount(projectID: Fixture.project)
        let result = try await body(Fixture(emulator: emulator, account: account))
        await emulator.stop()
        return result
    } catch {
        await emulator.stop()
        throw error
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import _CryptoExtras

/// Google's OAuth 2.0 token endpoint for the JWT-bearer grant, as google-auth uses it with a
/// service-account key: `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`.
struct TokenEndpoint: Sendable {
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let googleAudience = "https://oauth2.googleapis.com/token"
    static let acceptedScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// How far `iat` may be ahead of the emulator's clock.
    static let clockSkewSeconds: Int64 = 300
    static let maximumAssertionLifetimeSeconds: Int64 = 3600

    let state: FCMState
    let clock: FCMEmulatorClock
    /// The emulator's own token URL, also accepted as `aud`.
    let ownTokenURL: String?

    /// Answers one token request: 200 with the access token, or 400 with Google's OAuth error.
    func handle(body: [UInt8]) -> (status: Int, json: JSONValue) {
        self.state.count { $0.tokenRequests += 1 }
        do {
            let (token, lifetime) = try self.grant(form: Self.parseForm(String(decoding: body, as: UTF8.self)))
            return (
                200,
                .object([("access_token", .string(token)), ("expires_in", .int(max(0, lifetime - 1))), ("token_type", "Bearer")])
            )
        } catch {
            self.state.count { $0.tokenFailures += 1 }
            return (400, error.json)
        }
    }

    private func grant(form: [String: String]) throws(OAuthError) -> (String, Int64) {
        guard let grantType = form["grant_type"], !grantType.isEmpty else {
            throw OAuthError(error: "invalid_request", description: "Missing required parameter: grant_type")
        }
        guard grantType == Self.grantType else {
            throw OAuthError(error: "unsupported_grant_type", description: "Invalid grant_type: \(grantType)")
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            throw OAuthError(error: "invalid_request", description: "Missing required parameter: assertion")
        }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let header = try? JSONValue.parse(headerBytes), header.objectMembers != nil,
            let claims = try? JSONValue.parse(claimBytes), claims.objectMembers != nil
        else {
            throw OAuthError(error: "invalid_request", description: "Invalid JWT: the assertion is not a JSON Web Token.")
        }
        guard header["alg"]?.stringValue == "RS256" else { throw .invalidSignature }
        guard let issuer = claims["iss"]?.stringValue, let account = self.state.account(email: issuer) else {
            throw OAuthError(error: "invalid_grant", description: "Invalid grant: account not found")
        }
        if let keyID = header["kid"], keyID.stringValue != account.privateKeyID { throw .invalidSignature }
        let signed = Array(assertion.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard let publicKey = account.publicKey,
            publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signed), padding: .insecurePKCS1v1_5
            )
        else { throw .invalidSignature }

        let audience = claims["aud"]?.stringValue
        guard audience == Self.googleAudience || (audience != nil && audience == self.ownTokenURL) else {
            throw OAuthError(
                error: "invalid_grant", description: "Invalid JWT: Failed audience check. The right audience is \(Self.googleAudience)"
            )
        }
        let now = self.clock.nowSeconds
        guard let issuedAt = claims["iat"]?.intValue, let expires = claims["exp"]?.intValue, expires > issuedAt,
            expires - issuedAt <= Self.maximumAssertionLifetimeSeconds,
            now >= issuedAt - Self.clockSkewSeconds, now <= expires
        else { throw .badTime }
        let scopes = (claims["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        guard !scopes.isEmpty else { throw OAuthError(error: "invalid_scope", description: "Empty or missing scope not allowed.") }
        guard scopes.contains(where: { Self.acceptedScopes.contains($0) }) else {
            throw OAuthError(
                error: "invalid_scope",
                description: "The requested scopes do not allow sending FCM messages: ask for "
                    + "https://www.googleapis.com/auth/firebase.messaging or https://www.googleapis.com/auth/cloud-platform."
            )
        }
        let issued = self.state.issueAccessToken(projectID: account.projectID, clientEmail: issuer, now: self.clock.nowMilliseconds)
        return (issued.token, issued.lifetime)
    }

    /// `application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte; the last value wins.
    static func parseForm(_ text: String) -> [String: String] {
        var form: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecode(parts[0], plusIsSpace: true) else { continue }
            form[name] = parts.count > 1 ? percentDecode(parts[1], plusIsSpace: true) ?? "" : ""
        }
        return form
    }

    static func percentDecode(_ text: Substring, plusIsSpace: Bool = false) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else { return nil }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

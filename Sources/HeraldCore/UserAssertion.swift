// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Foundation

/// A user assertion: the app's backend vouches that a device belongs to a user.
///
/// A compact JWT signed with HMAC-SHA256 under the app's user secret, which only the backend (and
/// Herald, sealed) holds: header `{"alg":"HS256","typ":"JWT"}`, claims `app` (the Herald app id),
/// `sub` (the user id), `exp` (UNIX seconds, at most ``maximumLifetime`` ahead), `tkh` (the device
/// it vouches for: ``tokenHash(_:)`` of the token being registered) and optionally `iat`. The app
/// sends its token to its backend after login, receives an assertion for that token, and hands it
/// to Herald with the registration that binds the device to the user: an assertion that leaks
/// binds no other device.
package struct UserAssertion: Sendable, Hashable {
    package var appID: String
    package var userID: String
    package var expiresAt: Int64
    /// The `tkh` claim: the one token this assertion may bind; nil for an unbound assertion
    /// (accepted only by apps that still allow them, ``AppSecurity/unboundAssertions``).
    package var tokenHash: String?

    /// How far ahead an assertion may expire: assertions are for binding, not sessions.
    package static let maximumLifetime: Int64 = 3600
    /// Clock difference tolerated between the backend and Herald.
    package static let leeway: Int64 = 60

    package init(appID: String, userID: String, expiresAt: Int64, tokenHash: String? = nil) {
        self.appID = appID
        self.userID = userID
        self.expiresAt = expiresAt
        self.tokenHash = tokenHash
    }

    /// The `tkh` claim for `token` (a device token as registered, lowercase hex, or any other
    /// platform's identifier as registered): base64url without padding of SHA-256 of its UTF-8 bytes.
    package static func tokenHash(_ token: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(token.utf8))))
    }

    /// The signed token.
    package func signed(secret: [UInt8]) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        var members: [(String, JSONValue)] = [("app", .string(self.appID)), ("sub", .string(self.userID)), ("exp", .int(self.expiresAt))]
        if let tokenHash = self.tokenHash { members.append(("tkh", .string(tokenHash))) }
        let claims = JSONValue.object(members)
        let input = header + "." + Base64URL.encode(claims.serialized())
        let signature = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: secret))
        return input + "." + Base64URL.encode(Array(signature))
    }

    /// The assertion `token` carries, checked: its signature under `secret` (in constant time),
    /// its app, its expiry, the device it vouches for. Each refusal has its own code:
    /// `bad_user_assertion` (not an HS256 JWT with app, sub and exp, or a `tkh` that is not a
    /// string), `user_assertion_invalid` (the signature), `user_assertion_wrong_app`,
    /// `user_assertion_expired`, `user_assertion_too_long` (expiring too far ahead),
    /// `user_assertion_wrong_device` (its `tkh` is another token's), `user_assertion_unbound`
    /// (no `tkh`, where `allowUnbound` is false).
    /// - Parameter device: the identifier being registered, as stored (``tokenHash(_:)`` of it must be the `tkh`).
    package static func verify(
        _ token: String, secret: [UInt8], appID: String, now: Int64, device: String, allowUnbound: Bool
    ) throws -> UserAssertion {
        func malformed(_ why: String) -> HeraldError { HeraldError(code: "bad_user_assertion", "the user assertion is not valid: \(why)") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= 4096, parts.count == 3 else { throw malformed("a JWT has three parts") }
        guard let headerBytes = Base64URL.decode(String(parts[0])), let header = try? JSONValue.parse(headerBytes),
            header["alg"]?.stringValue == "HS256"
        else { throw malformed("its header must name alg HS256") }
        guard let signature = Base64URL.decode(String(parts[2])) else { throw malformed("its signature is not base64url") }
        let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: input, using: SymmetricKey(data: secret)) else {
            throw HeraldError(code: "user_assertion_invalid", "the user assertion's signature does not match the app's user secret")
        }
        guard let claimBytes = Base64URL.decode(String(parts[1])), let claims = try? JSONValue.parse(claimBytes),
            let app = claims["app"]?.stringValue, let user = claims["sub"]?.stringValue, !user.isEmpty, let exp = claims["exp"]?.intValue
        else { throw malformed("its claims must hold app, sub and exp") }
        guard app == appID else { throw HeraldError(code: "user_assertion_wrong_app", "the user assertion is for another app") }
        guard exp + Self.leeway >= now else { throw HeraldError(code: "user_assertion_expired", "the user assertion has expired") }
        guard exp <= now + Self.maximumLifetime + Self.leeway else {
            throw HeraldError(
                code: "user_assertion_too_long", "a user assertion may expire at most \(Self.maximumLifetime) seconds after it is used"
            )
        }
        var tokenHash: String?
        if let claim = claims["tkh"] {
            guard let text = claim.stringValue else { throw malformed("its tkh claim must be a string") }
            tokenHash = text
        }
        if let tokenHash {
            // Both sides are hashes: the compare leaks nothing about the token.
            guard tokenHash == Self.tokenHash(device) else {
                throw HeraldError(code: "user_assertion_wrong_device", "the user assertion vouches for another device token (its tkh claim)")
            }
        } else if !allowUnbound {
            throw HeraldError(
                code: "user_assertion_unbound",
                "the user assertion names no device: give it a tkh claim (base64url SHA-256 of the token being registered)")
        }
        return UserAssertion(appID: app, userID: user, expiresAt: exp, tokenHash: tokenHash)
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto

/// VAPID (RFC 8292) from the push service's side: taking an `Authorization` header apart and
/// judging its JWT. ``VAPIDKey`` is the application server's side.
package enum VAPID {
    /// The longest a token may stay valid: "MUST NOT be more than 24 hours from the time of the request" (§2).
    package static let maximumLifetime: Int64 = 86_400

    /// The JWT claims VAPID uses; absent or mistyped claims are `nil`.
    package struct Claims: Sendable, Equatable {
        package var audience: String?
        /// `exp`, UNIX seconds.
        package var expiresAt: Int64?
        package var subject: String?

        package init(audience: String? = nil, expiresAt: Int64? = nil, subject: String? = nil) {
            self.audience = audience
            self.expiresAt = expiresAt
            self.subject = subject
        }
    }

    /// An `Authorization` header taken apart; its signature not yet checked (see ``verify(_:audience:now:cryptoKey:requireSubject:)``).
    package struct Authorization: Sendable {
        /// The compact JWT.
        package var token: String
        /// The application server's public key (`k`, or `p256ecdsa` of the legacy form): 65 octets, on P-256.
        package var key: [UInt8]
        package var claims: Claims
        /// The JWT header's `alg`.
        package var algorithm: String?
        let signingInput: [UInt8]
        let signature: [UInt8]

        /// Whether the JWT is ES256 and its raw `r ‖ s` signature verifies against ``key``.
        package var isSignatureValid: Bool {
            guard self.algorithm == "ES256", self.signature.count == 64,
                let publicKey = try? P256.Signing.PublicKey(x963Representation: self.key),
                let signature = try? P256.Signing.ECDSASignature(rawRepresentation: self.signature)
            else { return false }
            return publicKey.isValidSignature(signature, for: SHA256.hash(data: self.signingInput))
        }
    }

    /// Takes apart `vapid t=<jwt>, k=<key>` (RFC 8292 §3): the scheme in any case, the
    /// parameters in either order, separated by a comma with or without white space, values
    /// bare or quoted. The draft form `WebPush <jwt>` takes its key from the `Crypto-Key`
    /// header's `p256ecdsa` parameter; see ``parse(_:cryptoKey:)``.
    package static func parse(_ header: String) throws(VAPIDError) -> Authorization {
        try Self.parse(header, cryptoKey: nil)
    }

    /// As ``parse(_:)``, with the `Crypto-Key` header (`p256ecdsa=<key>`, possibly among other
    /// parameters such as `dh=…`, separated by `;` or `,`) that the legacy `WebPush <jwt>` form
    /// needs. A `vapid` header without `k` also takes its key from there.
    ///
    /// Errors: an empty header is ``VAPIDError/missing``; an unknown scheme, a missing `t` or a
    /// JWT that is not three base64url parts of JSON objects is ``VAPIDError/malformed``; a
    /// missing key, or one that is not base64url of an uncompressed P-256 point, is ``VAPIDError/badKey``.
    package static func parse(_ header: String, cryptoKey: String?) throws(VAPIDError) -> Authorization {
        let trimmed = Self.trimmed(Substring(header))
        guard !trimmed.isEmpty else { throw .missing }
        guard let space = trimmed.firstIndex(where: { $0 == " " || $0 == "\t" }) else { throw .malformed }
        let scheme = trimmed[..<space].lowercased()
        let rest = Self.trimmed(trimmed[space...])
        var token: Substring? = nil
        var keyText: Substring? = nil
        switch scheme {
        case "vapid":
            for parameter in rest.split(separator: ",") {
                guard let pair = Self.parameter(parameter) else { throw .malformed }
                switch pair.name {
                case "t":
                    guard token == nil else { throw .malformed }
                    token = pair.value
                case "k":
                    guard keyText == nil else { throw .malformed }
                    keyText = pair.value
                default: continue
                }
            }
        case "webpush":
            guard !rest.contains(where: { $0 == " " || $0 == "\t" || $0 == "," }) else { throw .malformed }
            token = rest
        default:
            throw .malformed
        }
        guard let token, !token.isEmpty else { throw .malformed }
        if keyText == nil, let cryptoKey {
            for parameter in cryptoKey.split(whereSeparator: { $0 == ";" || $0 == "," }) {
                if let pair = Self.parameter(parameter), pair.name == "p256ecdsa" { keyText = pair.value }
            }
        }
        guard let keyText, let key = WebPushSubscriptionKeys.decodeBase64URL(String(keyText)), key.count == 65, key[0] == 0x04,
            (try? P256.Signing.PublicKey(x963Representation: key)) != nil
        else { throw .badKey }
        return try Self.decodeToken(String(token), key: key)
    }

    /// Parses the header and judges it as a push service does: the ES256 signature against the
    /// key (else ``VAPIDError/badSignature``), `aud` equal to `audience` exactly, `exp` present,
    /// later than `now` and at most ``maximumLifetime`` after it, and, when `requireSubject`
    /// (Mozilla's and Apple's rule; FCM does not insist), `sub` starting `mailto:` or `https:`.
    package static func verify(
        _ header: String,
        audience: String,
        now: Int64,
        cryptoKey: String? = nil,
        requireSubject: Bool = true
    ) throws(VAPIDError) -> Authorization {
        let authorization = try Self.parse(header, cryptoKey: cryptoKey)
        guard authorization.isSignatureValid else { throw .badSignature }
        guard authorization.claims.audience == audience else { throw .wrongAudience }
        guard let expiresAt = authorization.claims.expiresAt else { throw .missingExpiry }
        guard expiresAt > now else { throw .expired }
        guard expiresAt <= now + Self.maximumLifetime else { throw .expiryTooFar }
        if requireSubject {
            guard let subject = authorization.claims.subject, subject.hasPrefix("mailto:") || subject.hasPrefix("https:") else {
                throw .badSubject
            }
        }
        return authorization
    }

    /// Whether Apple's push service takes `subject` as a VAPID `sub`, by what has been observed
    /// rather than documented (Apple says only "a URL or mailto"): an `https:` URL with a host,
    /// or a `mailto:` with one address of a non-empty local part and domain, no white space or
    /// angle brackets (`"mailto: <a@b>"` is refused), and a domain other than `localhost`
    /// (`mailto:x@localhost` is refused; web-push-libs/web-push#947, Apple forum 725473).
    package static func isAppleAcceptableSubject(_ subject: String) -> Bool {
        if subject.hasPrefix("https:") { return Self.origin(of: subject) != nil }
        guard subject.hasPrefix("mailto:") else { return false }
        let address = subject.utf8.dropFirst("mailto:".utf8.count)
        let forbidden: Set<UInt8> = [UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "<"), UInt8(ascii: ">"), 0x0A, 0x0D]
        guard !address.contains(where: { forbidden.contains($0) }) else { return false }
        let parts = address.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        let domain = String(decoding: parts[1], as: UTF8.self).lowercased()
        return domain != "localhost" && !domain.hasSuffix(".localhost")
    }

    private static func decodeToken(_ token: String, key: [UInt8]) throws(VAPIDError) -> Authorization {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Self.decodeJWTPart(parts[0]),
            let claimBytes = Self.decodeJWTPart(parts[1]),
            let signature = Self.decodeJWTPart(parts[2]),
            let header = try? JSONValue.parse(headerBytes), header.objectMembers != nil,
            let claims = try? JSONValue.parse(claimBytes), claims.objectMembers != nil
        else { throw .malformed }
        return Authorization(
            token: token,
            key: key,
            claims: Claims(
                audience: claims["aud"]?.stringValue,
                expiresAt: claims["exp"]?.intValue,
                subject: claims["sub"]?.stringValue
            ),
            algorithm: header["alg"]?.stringValue,
            signingInput: Array(token.utf8[token.utf8.startIndex..<parts[1].endIndex]),
            signature: signature
        )
    }

    /// JWS parts are unpadded base64url (RFC 7515 §2).
    private static func decodeJWTPart(_ part: Substring.UTF8View.SubSequence) -> [UInt8]? {
        let text = Substring(part)
        guard !text.isEmpty, !text.utf8.contains(UInt8(ascii: "=")) else { return nil }
        return WebPushSubscriptionKeys.decodeBase64URL(String(text))
    }

    /// `name=value` with the name in lower case and a quoted value unquoted.
    private static func parameter(_ text: Substring) -> (name: String, value: Substring)? {
        let item = Self.trimmed(text)
        guard let equals = item.firstIndex(of: "=") else { return nil }
        let name = Self.trimmed(item[..<equals]).lowercased()
        var value = Self.trimmed(item[item.index(after: equals)...])
        if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
        guard !name.isEmpty else { return nil }
        return (name, value)
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}

/// What is wrong with a request's VAPID authorization, in the order a push service checks.
package enum VAPIDError: Error, Equatable, Sendable {
    /// No `Authorization` header, or an empty one.
    case missing
    /// Not `vapid t=…, k=…` (or `WebPush <jwt>`), or the JWT is not three base64url JSON parts.
    case malformed
    /// No key, or not base64url of a 65-octet uncompressed P-256 point; or a private key that is not a P-256 scalar.
    case badKey
    /// Not ES256, or the signature does not verify against the key.
    case badSignature
    /// `aud` is absent or not the push service's origin.
    case wrongAudience
    case missingExpiry
    /// `exp` is not after the time of the request.
    case expired
    /// `exp` is more than 24 hours after the time of the request.
    case expiryTooFar
    /// `sub` is absent or neither a `mailto:` nor an `https:` URL.
    case badSubject
}

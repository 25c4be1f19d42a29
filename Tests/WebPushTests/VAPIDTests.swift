// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Testing

@testable import WebPush

@Suite struct VAPIDTests {
    static let audience = "https://updates.push.services.mozilla.com"
    static let subject = "mailto:ops@herald.example"
    static let now: Int64 = 1_800_000_000
    let key = VAPIDKey()

    var header: String { self.key.authorization(audience: Self.audience, subject: Self.subject, expiresAt: Self.now + 43_200) }

    /// A token over arbitrary JSON, signed by `key` (or raw r‖s from `signature`).
    static func token(header: JSONValue, claims: JSONValue, key: VAPIDKey, der: Bool = false) throws -> String {
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized())
        let signature = try key.privateKey.signature(for: SHA256.hash(data: Array(input.utf8)))
        return input + "." + Base64URL.encode(der ? Array(signature.derRepresentation) : Array(signature.rawRepresentation))
    }

    func verifyError(_ header: String, audience: String = Self.audience, cryptoKey: String? = nil) -> VAPIDError? {
        do {
            _ = try VAPID.verify(header, audience: audience, now: Self.now, cryptoKey: cryptoKey)
            return nil
        } catch {
            return error
        }
    }

    func claims(_ claims: JSONValue, alg: String = "ES256", der: Bool = false) throws -> String {
        let token = try Self.token(header: ["typ": "JWT", "alg": .string(alg)], claims: claims, key: self.key, der: der)
        return "vapid t=\(token), k=\(self.key.publicKeyBase64URL)"
    }

    @Test("a header Herald signs verifies, with the claims it was given")
    func signThenVerify() throws {
        let authorization = try VAPID.verify(self.header, audience: Self.audience, now: Self.now)
        #expect(authorization.key == self.key.publicKey)
        #expect(authorization.claims == VAPID.Claims(audience: Self.audience, expiresAt: Self.now + 43_200, subject: Self.subject))
        #expect(authorization.algorithm == "ES256")
        #expect(self.header.hasPrefix("vapid t="))
        #expect(self.header.hasSuffix(", k=" + self.key.publicKeyBase64URL))
    }

    @Test("the token is a compact ES256 JWT with the JOSE header and claims of RFC 8292")
    func tokenShape() throws {
        let token = self.key.token(audience: Self.audience, subject: Self.subject, expiresAt: 1_800_000_123)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        #expect(String(decoding: try bytes(String(parts[0])), as: UTF8.self) == #"{"typ":"JWT","alg":"ES256"}"#)
        #expect(
            String(decoding: try bytes(String(parts[1])), as: UTF8.self)
                == #"{"aud":"https://updates.push.services.mozilla.com","exp":1800000123,"sub":"mailto:ops@herald.example"}"#
        )
        #expect(try bytes(String(parts[2])).count == 64)
        #expect(!token.contains("="))
    }

    @Test("the key survives its raw scalar; its public key is a 65-octet point")
    func keyStorage() throws {
        let restored = try VAPIDKey(rawRepresentation: self.key.rawRepresentation)
        #expect(restored.publicKey == self.key.publicKey)
        #expect(self.key.rawRepresentation.count == 32)
        #expect(self.key.publicKey.count == 65 && self.key.publicKey[0] == 0x04)
        #expect(Base64URL.decode(self.key.publicKeyBase64URL) == self.key.publicKey)
        #expect(throws: VAPIDError.badKey) { try VAPIDKey(rawRepresentation: Array(self.key.rawRepresentation.prefix(31))) }
        #expect(throws: VAPIDError.badKey) { try VAPIDKey(rawRepresentation: Array(repeating: 0, count: 32)) }
        #expect(throws: VAPIDError.badKey) { try VAPIDKey(rawRepresentation: Array(repeating: 0xFF, count: 32)) }
        #expect(VAPIDKey().publicKey != self.key.publicKey)
    }

    @Test("both header forms, parameters in either order, any scheme case, quoted values, the legacy WebPush form")
    func headerForms() throws {
        let token = self.key.token(audience: Self.audience, subject: Self.subject, expiresAt: Self.now + 60)
        let k = self.key.publicKeyBase64URL
        let forms = [
            "vapid t=\(token), k=\(k)", "vapid t=\(token),k=\(k)", "VAPID k=\(k), t=\(token)", "Vapid  t=\(token) ,  k=\(k) ",
            "vapid t=\"\(token)\", k=\"\(k)\"", "vapid t=\(token), k=\(k)=", "vapid t=\(token), k=\(k), extra=1",
        ]
        for form in forms {
            let authorization = try VAPID.verify(form, audience: Self.audience, now: Self.now)
            #expect(authorization.token == token, "\(form)")
            #expect(authorization.key == self.key.publicKey, "\(form)")
        }
        for cryptoKey in ["p256ecdsa=\(k)", "dh=BBBB;p256ecdsa=\(k)", "dh=BBBB, p256ecdsa=\"\(k)\""] {
            let legacy = try VAPID.verify("WebPush \(token)", audience: Self.audience, now: Self.now, cryptoKey: cryptoKey)
            #expect(legacy.key == self.key.publicKey)
        }
        let parsed = try VAPID.parse("webpush \(token)", cryptoKey: "p256ecdsa=\(k)")
        #expect(parsed.claims.audience == Self.audience)
        #expect(try VAPID.parse("vapid t=\(token)", cryptoKey: "p256ecdsa=\(k)").key == self.key.publicKey)
    }

    @Test("missing, malformed and badKey")
    func parseErrors() throws {
        let token = self.key.token(audience: Self.audience, subject: Self.subject, expiresAt: Self.now + 60)
        let k = self.key.publicKeyBase64URL
        #expect(self.verifyError("") == .missing)
        #expect(self.verifyError("   ") == .missing)
        #expect(self.verifyError("vapid") == .malformed)
        #expect(self.verifyError("Bearer \(token)") == .malformed)
        #expect(self.verifyError("vapid k=\(k)") == .malformed)
        #expect(self.verifyError("vapid t=\(token), t=\(token), k=\(k)") == .malformed)
        #expect(self.verifyError("vapid t=\(token), junk, k=\(k)") == .malformed)
        #expect(self.verifyError("vapid t=a.b, k=\(k)") == .malformed)
        #expect(self.verifyError("vapid t=a.b.c, k=\(k)") == .malformed)
        #expect(self.verifyError("vapid t=\(token)=, k=\(k)") == .malformed)
        #expect(self.verifyError("WebPush \(token), k=\(k)") == .malformed)
        #expect(self.verifyError("vapid t=\(token)") == .badKey)
        #expect(self.verifyError("WebPush \(token)") == .badKey)
        #expect(self.verifyError("WebPush \(token)", cryptoKey: "dh=\(k)") == .badKey)
        #expect(self.verifyError("vapid t=\(token), k=\(Base64URL.encode(self.key.publicKey.prefix(64)))") == .badKey)
        var offCurve = self.key.publicKey
        offCurve[64] ^= 1
        #expect(self.verifyError("vapid t=\(token), k=\(Base64URL.encode(offCurve))") == .badKey)
        let standardAlphabet = String(k.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        if standardAlphabet != k { #expect(self.verifyError("vapid t=\(token), k=\(standardAlphabet)") == .badKey) }
    }

    @Test("another key's signature, altered claims, another alg and DER signatures are badSignature")
    func badSignature() throws {
        let other = VAPIDKey()
        let token = other.token(audience: Self.audience, subject: Self.subject, expiresAt: Self.now + 60)
        #expect(self.verifyError("vapid t=\(token), k=\(self.key.publicKeyBase64URL)") == .badSignature)
        let mine = self.key.token(audience: Self.audience, subject: Self.subject, expiresAt: Self.now + 60)
        let parts = mine.split(separator: ".")
        let altered = Base64URL.encode(
            Array(#"{"aud":"https://updates.push.services.mozilla.com","exp":1800000061,"sub":"mailto:ops@herald.example"}"#.utf8))
        #expect(self.verifyError("vapid t=\(parts[0]).\(altered).\(parts[2]), k=\(self.key.publicKeyBase64URL)") == .badSignature)
        let claims: JSONValue = ["aud": .string(Self.audience), "exp": .int(Self.now + 60), "sub": .string(Self.subject)]
        #expect(self.verifyError(try self.claims(claims, alg: "ES384")) == .badSignature)
        #expect(self.verifyError(try self.claims(claims, alg: "none")) == .badSignature)
        #expect(self.verifyError(try self.claims(claims, der: true)) == .badSignature)
        #expect(self.verifyError(try self.claims(claims)) == nil)
    }

    @Test("aud must be the audience exactly; exp present, in the future, at most 24 h ahead; sub mailto: or https:")
    func claimErrors() throws {
        let sub = JSONValue.string(Self.subject)
        func header(aud: String? = Self.audience, exp: Int64? = Self.now + 60, sub: JSONValue? = sub) throws -> String {
            var members: [(String, JSONValue)] = []
            if let aud { members.append(("aud", .string(aud))) }
            if let exp { members.append(("exp", .int(exp))) }
            if let sub { members.append(("sub", sub)) }
            return try self.claims(.object(members))
        }
        #expect(self.verifyError(try header(aud: nil)) == .wrongAudience)
        #expect(self.verifyError(try header(aud: Self.audience + "/")) == .wrongAudience)
        #expect(self.verifyError(try header(aud: "https://fcm.googleapis.com")) == .wrongAudience)
        #expect(self.verifyError(try header(exp: nil)) == .missingExpiry)
        #expect(self.verifyError(try header(exp: Self.now)) == .expired)
        #expect(self.verifyError(try header(exp: Self.now - 1)) == .expired)
        #expect(self.verifyError(try header(exp: Self.now + 1)) == nil)
        #expect(self.verifyError(try header(exp: Self.now + 86_400)) == nil)
        #expect(self.verifyError(try header(exp: Self.now + 86_401)) == .expiryTooFar)
        #expect(self.verifyError(try header(sub: nil)) == .badSubject)
        #expect(self.verifyError(try header(sub: "ops@herald.example")) == .badSubject)
        #expect(self.verifyError(try header(sub: "http://herald.example")) == .badSubject)
        #expect(self.verifyError(try header(sub: .int(1))) == .badSubject)
        #expect(self.verifyError(try header(sub: "https://herald.example/contact")) == nil)
        let noSubject = try header(sub: nil)
        #expect(try VAPID.verify(noSubject, audience: Self.audience, now: Self.now, requireSubject: false).claims.subject == nil)
        let exp = try self.claims(["aud": .string(Self.audience), "exp": .string("1800000060"), "sub": sub])
        #expect(self.verifyError(exp) == .missingExpiry)
    }

    @Test("Apple's observed sub rules")
    func appleSubjects() {
        #expect(VAPID.isAppleAcceptableSubject("mailto:ops@herald.example"))
        #expect(VAPID.isAppleAcceptableSubject("https://herald.example"))
        #expect(VAPID.isAppleAcceptableSubject("https://herald.example/contact"))
        #expect(!VAPID.isAppleAcceptableSubject("mailto:ops@localhost"))
        #expect(!VAPID.isAppleAcceptableSubject("mailto:ops@LocalHost"))
        #expect(!VAPID.isAppleAcceptableSubject("mailto: <ops@herald.example>"))
        #expect(!VAPID.isAppleAcceptableSubject("mailto:<ops@herald.example>"))
        #expect(!VAPID.isAppleAcceptableSubject("mailto:ops @herald.example"))
        #expect(!VAPID.isAppleAcceptableSubject("mailto:herald.example"))
        #expect(!VAPID.isAppleAcceptableSubject("mailto:"))
        #expect(!VAPID.isAppleAcceptableSubject("ops@herald.example"))
        #expect(!VAPID.isAppleAcceptableSubject("http://herald.example"))
        #expect(!VAPID.isAppleAcceptableSubject("https://"))
    }

    @Test(
        "origin(of:) is scheme://host[:port] of http(s) URLs",
        arguments: [
            ("https://fcm.googleapis.com/fcm/send/abc:def", "https://fcm.googleapis.com"),
            ("https://fcm.googleapis.com/wp/abc", "https://fcm.googleapis.com"),
            ("HTTPS://Updates.Push.Services.Mozilla.COM/wpush/v2/gAAA", "https://updates.push.services.mozilla.com"),
            ("https://web.push.apple.com:443/QGuQ", "https://web.push.apple.com"),
            ("https://web.push.apple.com:0443/QGuQ", "https://web.push.apple.com"),
            ("https://web.push.apple.com:/QGuQ", "https://web.push.apple.com"),
            ("http://127.0.0.1:29102/wpush/v2/t", "http://127.0.0.1:29102"),
            ("http://127.0.0.1:80/", "http://127.0.0.1"),
            ("https://push.example:80/", "https://push.example:80"),
            ("http://push.example:443", "http://push.example:443"),
            ("http://[::1]:29102/wpush/v2/t", "http://[::1]:29102"),
            ("https://[2001:DB8::1]/x", "https://[2001:db8::1]"),
            ("https://[::ffff:127.0.0.1]:443", "https://[::ffff:127.0.0.1]"),
            ("https://user:secret@push.example/x", "https://push.example"),
            ("https://push.example?x=1", "https://push.example"),
            ("https://push.example#frag", "https://push.example"),
            ("https://push.example", "https://push.example"),
        ]
    )
    func origins(endpoint: String, origin: String) {
        #expect(VAPID.origin(of: endpoint) == origin)
    }

    @Test(
        "origin(of:) is nil for anything but an absolute http(s) URL with a host",
        arguments: [
            "", "push.example/x", "//push.example/x", "ftp://push.example/x", "wss://push.example", "mailto:a@b.c", "https:push.example",
            "https:///x", "https://:443/x", "https://push.example:99999/", "https://push.example:-1/", "https://push.example:8o/",
            "https://[::1/x", "https://[]/x", "https://[::1]x/", "https://[zz::1]/", "https://push example/", "https://push<x>/",
        ]
    )
    func notOrigins(endpoint: String) {
        #expect(VAPID.origin(of: endpoint) == nil)
    }
}

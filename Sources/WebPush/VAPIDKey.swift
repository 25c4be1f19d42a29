// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import Crypto

/// An application server's VAPID key (RFC 8292): a P-256 signing key whose public half is the
/// `applicationServerKey` browsers subscribe with, and which signs the JWT of every request.
package struct VAPIDKey: Sendable {
    let privateKey: P256.Signing.PrivateKey

    /// A fresh key.
    package init() {
        self.privateKey = P256.Signing.PrivateKey()
    }

    package init(privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// The 32-octet private scalar, as ``rawRepresentation`` gives it (what Herald seals and stores).
    package init(rawRepresentation: [UInt8]) throws(VAPIDError) {
        guard rawRepresentation.count == 32, let key = try? P256.Signing.PrivateKey(rawRepresentation: rawRepresentation) else {
            throw .badKey
        }
        self.privateKey = key
    }

    /// The private scalar, 32 octets. Secret.
    package var rawRepresentation: [UInt8] { Array(self.privateKey.rawRepresentation) }

    /// The uncompressed public point, 65 octets: the `applicationServerKey` and the `k` parameter.
    package var publicKey: [UInt8] { Array(self.privateKey.publicKey.x963Representation) }

    /// ``publicKey`` in unpadded base64url, the form `PushManager.subscribe` takes as a string.
    package var publicKeyBase64URL: String { Base64URL.encode(self.publicKey) }

    /// A compact ES256 JWT: header `{"typ":"JWT","alg":"ES256"}`, claims `{"aud":…,"exp":…,"sub":…}`
    /// with `exp` a JSON integer (UNIX seconds), and the raw 64-octet `r ‖ s` signature (RFC 7515 §A.3).
    package func token(audience: String, subject: String, expiresAt: Int64) -> String {
        let header = JSONValue.object([("typ", "JWT"), ("alg", "ES256")]).serialized()
        let claims = JSONValue.object([("aud", .string(audience)), ("exp", .int(expiresAt)), ("sub", .string(subject))])
            .serialized()
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try self.privateKey.signature(for: SHA256.hash(data: Array(signingInput.utf8)))
        } catch {
            // BoringSSL fails ECDSA with a valid key only when it cannot allocate.
            preconditionFailure("ES256 signing with a valid P-256 key failed: \(error)")
        }
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// The `Authorization` header value: `vapid t=<jwt>, k=<public key, base64url>` (RFC 8292 §3).
    package func authorization(audience: String, subject: String, expiresAt: Int64) -> String {
        "vapid t=" + self.token(audience: audience, subject: subject, expiresAt: expiresAt) + ", k=" + self.publicKeyBase64URL
    }
}

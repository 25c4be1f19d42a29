// SPDX-License-Identifier: Apache-2.0
public import Crypto
public import Foundation

/// End-to-end encrypted payloads, envelope version 1.
///
/// The device makes a key pair (X25519 or P-256) and registers the public key with Herald; the
/// private key never leaves it. For each delivery, Herald makes an ephemeral key pair, agrees a
/// secret with the device's public key, derives a 32-byte key with HKDF-SHA256 and seals the
/// original payload's JSON with an AEAD (ChaCha20-Poly1305 for X25519, AES-256-GCM for P-256).
/// What APNs carries is a placeholder alert with `mutable-content: 1` and, beside `aps`:
///
/// ```json
/// "herald-e2e": {"v": 1, "kty": "x25519", "epk": "<base64 ephemeral public key>", "ct": "<base64 nonce ‖ ciphertext ‖ tag>"}
/// ```
///
/// HKDF's salt is the ephemeral public key followed by the recipient's (raw for X25519, X9.63
/// for P-256), its info `herald-e2e-v1`. The notification service extension opens it with
/// ``open(_:with:)``; a wrong key, a tampered or truncated envelope fails with an error and the
/// placeholder stays.
public enum EncryptedPayload {
    /// The payload key that carries the envelope.
    public static let key = "herald-e2e"
    /// HKDF's info string.
    public static let info = Data("herald-e2e-v1".utf8)

    /// Why an envelope could not be opened.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        public var code: String
        public init(code: String) { self.code = code }
        public var description: String { self.code }
    }

    /// A device's public key as registered with Herald: `x25519` (32 raw bytes) or `p256`
    /// (65 bytes, X9.63).
    public struct PublicKey: Sendable, Hashable {
        public var type: String
        public var data: Data

        public init(type: String, data: Data) {
            self.type = type
            self.data = data
        }
    }

    /// A device's private key, either curve.
    public enum PrivateKey: Sendable {
        case x25519(Curve25519.KeyAgreement.PrivateKey)
        case p256(P256.KeyAgreement.PrivateKey)

        /// The public key to register with Herald.
        public var publicKey: PublicKey {
            switch self {
            case .x25519(let key): PublicKey(type: "x25519", data: key.publicKey.rawRepresentation)
            case .p256(let key): PublicKey(type: "p256", data: key.publicKey.x963Representation)
            }
        }
    }

    /// Seals `payload` (the original payload's JSON) for the device whose public key is
    /// `publicKey` of type `type` (`x25519` or `p256`); returns the envelope object.
    public static func seal(_ payload: Data, type: String, publicKey: Data) throws -> [String: Any] {
        let sealed = try Self.sealedFields(payload, type: type, publicKey: publicKey)
        return ["v": 1, "kty": type, "epk": sealed.epk, "ct": sealed.ct]
    }

    /// The envelope as JSON text, `{"v":1,"kty":…,"epk":…,"ct":…}` (base64 needs no escaping).
    public static func sealedJSON(_ payload: Data, type: String, publicKey: Data) throws -> String {
        let sealed = try Self.sealedFields(payload, type: type, publicKey: publicKey)
        return #"{"v":1,"kty":""# + type + #"","epk":""# + sealed.epk + #"","ct":""# + sealed.ct + #""}"#
    }

    /// Checks a public key as a device registers it.
    public static func validate(_ key: PublicKey) throws {
        switch key.type {
        case "x25519": _ = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: key.data)
        case "p256": _ = try P256.KeyAgreement.PublicKey(x963Representation: key.data)
        default: throw Failure(code: "unknown_key_type")
        }
    }

    /// The envelope's size for a payload of `count` bytes, at most.
    public static func envelopeSize(payloadBytes count: Int) -> Int {
        // base64 of nonce (12) + ciphertext + tag (16), an X9.63 P-256 key in base64, the keys.
        (count + 28 + 2) / 3 * 4 + 88 + 48
    }

    private static func sealedFields(_ payload: Data, type: String, publicKey: Data) throws -> (epk: String, ct: String) {
        let (ephemeral, secret, recipient): (Data, SharedSecret, Data)
        switch type {
        case "x25519":
            let recipientKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey)
            let key = Curve25519.KeyAgreement.PrivateKey()
            (ephemeral, secret, recipient) = (key.publicKey.rawRepresentation, try key.sharedSecretFromKeyAgreement(with: recipientKey), publicKey)
        case "p256":
            let recipientKey = try P256.KeyAgreement.PublicKey(x963Representation: publicKey)
            let key = P256.KeyAgreement.PrivateKey()
            (ephemeral, secret, recipient) = (key.publicKey.x963Representation, try key.sharedSecretFromKeyAgreement(with: recipientKey), publicKey)
        default:
            throw Failure(code: "unknown_key_type")
        }
        let symmetric = secret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: ephemeral + recipient, sharedInfo: Self.info, outputByteCount: 32)
        let sealed: Data =
            type == "x25519"
            ? try ChaChaPoly.seal(payload, using: symmetric).combined : try AES.GCM.seal(payload, using: symmetric).combined ?? Data()
        return (ephemeral.base64EncodedString(), sealed.base64EncodedString())
    }
}

// SPDX-License-Identifier: Apache-2.0
import Crypto
public import Foundation

extension EncryptedPayload {
    /// Opens an envelope with the device's private key; the original payload's JSON.
    public static func open(_ envelope: PayloadValue, with privateKey: PrivateKey) throws(Failure) -> Data {
        guard envelope["v"]?.number == 1 else { throw Failure(code: "unsupported_version") }
        guard let type = envelope["kty"]?.string, let epk = envelope["epk"]?.string.flatMap({ Data(base64Encoded: $0) }),
            let ct = envelope["ct"]?.string.flatMap({ Data(base64Encoded: $0) })
        else { throw Failure(code: "malformed_envelope") }
        do {
            switch (type, privateKey) {
            case ("x25519", .x25519(let key)):
                let secret = try key.sharedSecretFromKeyAgreement(with: try Curve25519.KeyAgreement.PublicKey(rawRepresentation: epk))
                let symmetric = secret.hkdfDerivedSymmetricKey(
                    using: SHA256.self, salt: epk + key.publicKey.rawRepresentation, sharedInfo: Self.info, outputByteCount: 32
                )
                return try ChaChaPoly.open(try ChaChaPoly.SealedBox(combined: ct), using: symmetric)
            case ("p256", .p256(let key)):
                let secret = try key.sharedSecretFromKeyAgreement(with: try P256.KeyAgreement.PublicKey(x963Representation: epk))
                let symmetric = secret.hkdfDerivedSymmetricKey(
                    using: SHA256.self, salt: epk + key.publicKey.x963Representation, sharedInfo: Self.info, outputByteCount: 32
                )
                return try AES.GCM.open(try AES.GCM.SealedBox(combined: ct), using: symmetric)
            default:
                throw Failure(code: "key_type_mismatch")
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            // Wrong key, tampered or truncated: the AEAD (or the key parser) refuses it.
            throw Failure(code: "cannot_decrypt")
        }
    }
}

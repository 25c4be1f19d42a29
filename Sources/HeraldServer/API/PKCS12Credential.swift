// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import NIOSSL

/// A certificate credential uploaded as a PKCS#12 bundle (`.p12`, as Keychain Access exports
/// it), opened once when uploaded and kept as PEM like any certificate credential.
enum PKCS12Credential {
    /// The bundle's certificate chain and private key as PEM. 422 `bad_certificate` when the
    /// text is not base64, the bundle cannot be opened (not PKCS#12, or a wrong passphrase) or
    /// holds no certificate; the message never quotes the material.
    static func pem(base64 text: String, passphrase: String?) throws -> (certificate: String, privateKey: String) {
        func bad(_ message: String) -> HeraldError { HeraldError.unprocessable(message, code: "bad_certificate") }
        guard let bytes = Data(base64Encoded: text, options: .ignoreUnknownCharacters), !bytes.isEmpty else {
            throw bad("pkcs12 must be the .p12 file in base64")
        }
        let bundle: NIOSSLPKCS12Bundle
        do {
            bundle = try NIOSSLPKCS12Bundle(buffer: Array(bytes), passphrase: Array((passphrase ?? "").utf8))
        } catch {
            throw bad("the .p12 cannot be opened: not a PKCS#12 bundle, or a wrong passphrase")
        }
        guard !bundle.certificateChain.isEmpty else { throw bad("the .p12 holds no certificate") }
        let certificates = try bundle.certificateChain.map { Self.pem(try $0.toDERBytes(), label: "CERTIFICATE") }.joined()
        let der = try bundle.privateKey.derBytes
        // BoringSSL writes the key in its algorithm's own form (PKCS#1 for RSA, SEC 1 for EC):
        // the label that reads back as the same key is the right one.
        for label in ["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY"] {
            let key = Self.pem(der, label: label)
            if let parsed = try? NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem), parsed == bundle.privateKey {
                return (certificates, key)
            }
        }
        throw bad("the .p12's private key is of a kind Herald cannot use")
    }

    static func pem(_ der: [UInt8], label: String) -> String {
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN \(label)-----\n\(base64)\n-----END \(label)-----\n"
    }
}

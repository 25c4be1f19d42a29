// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Testing

/// Decodes a base64url literal of a test vector; a typo fails the test rather than crashing it.
func bytes(_ base64URL: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
    try #require(Base64URL.decode(base64URL), "not base64url: \(base64URL)", sourceLocation: sourceLocation)
}

/// A subscription as a browser makes one: its key pair and a random auth secret.
struct Browser {
    let privateKey = P256.KeyAgreement.PrivateKey()
    let auth: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }

    var publicKey: [UInt8] { Array(self.privateKey.publicKey.x963Representation) }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Foundation
import Testing

@Suite struct ProviderTokenTests {
    let key = SigningKey.generate(keyID: "ABC123DEFG", teamID: "TEAM123456")

    @Test("a signed token has ES256, kid, iss, an integer iat and a raw 64-byte signature")
    func shape() throws {
        let token = try self.key.providerToken(issuedAt: 1_700_000_000)
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        #expect(String(decoding: Base64URL.decode(parts[0])!, as: UTF8.self) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self) == #"{"iss":"TEAM123456","iat":1700000000}"#)
        #expect(Base64URL.decode(parts[2])!.count == 64)
        #expect(!token.contains("="))
    }

    @Test("sign then verify round-trips; another key or a changed byte fails")
    func roundTrip() throws {
        let claims = try ProviderTokenClaims(token: try self.key.providerToken(issuedAt: 1_700_000_000))
        #expect(claims.keyID == "ABC123DEFG")
        #expect(claims.teamID == "TEAM123456")
        #expect(claims.issuedAt == 1_700_000_000)
        #expect(claims.isSigned(by: self.key.publicKey))
        #expect(!claims.isSigned(by: P256.Signing.PrivateKey().publicKey))

        // Flip one byte of the signature: it still parses, and no longer verifies.
        var tampered = Array(try self.key.providerToken(issuedAt: 1_700_000_000).utf8)
        let index = tampered.lastIndex(of: UInt8(ascii: "."))! + 5
        tampered[index] = tampered[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let changed = try ProviderTokenClaims(token: String(decoding: tampered, as: UTF8.self))
        #expect(!changed.isSigned(by: self.key.publicKey))
    }

    @Test("DER signatures and string iat values verify too, as APNs accepts them")
    func derAndStringIAT() throws {
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"ABC123DEFG","typ":"JWT"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"TEAM123456","iat":"1700000000"}"#.utf8))
        let input = header + "." + claims
        let privateKey = try P256.Signing.PrivateKey(pemRepresentation: self.key.privateKeyPEM)
        let signature = try privateKey.signature(for: SHA256.hash(data: Array(input.utf8)))
        let token = input + "." + Base64URL.encode(signature.derRepresentation)
        let parsed = try ProviderTokenClaims(token: token)
        #expect(parsed.issuedAt == 1_700_000_000)
        #expect(parsed.isSigned(by: self.key.publicKey))
    }

    @Test("a .p8 file from openssl loads and signs")
    func p8() throws {
        let pem = self.key.privateKeyPEM
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let loaded = try SigningKey(pem: pem, keyID: "ABC123DEFG", teamID: "TEAM123456")
        let claims = try ProviderTokenClaims(token: try loaded.providerToken(issuedAt: 1))
        #expect(claims.isSigned(by: self.key.publicKey))
        #expect(throws: APNSValidationError.self) { try SigningKey(pem: "not a key", keyID: "A", teamID: "B") }
        #expect(throws: APNSValidationError.self) { try SigningKey(pem: pem, keyID: "", teamID: "B") }
    }

    @Test("malformed tokens are refused", arguments: ["", "a.b", "a.b.c.d", "!!.e30.e30", "e30.e30.e30"])
    func malformed(token: String) {
        #expect(throws: APNSValidationError.self) { try ProviderTokenClaims(token: token) }
    }

    @Test("alg other than ES256 never verifies")
    func otherAlgorithm() throws {
        let header = Base64URL.encode(Array(#"{"alg":"none","kid":"ABC123DEFG"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"TEAM123456","iat":1}"#.utf8))
        let parsed = try ProviderTokenClaims(token: header + "." + claims + ".")
        #expect(!parsed.isSigned(by: self.key.publicKey))
    }
}

// SPDX-License-Identifier: Apache-2.0
import Crypto
import HeraldCore
import Testing

@Suite struct KeyedHMACTests {
    @Test(
        "RFC 4231's HMAC-SHA256 test cases: a short key, a key shorter than the hash, data longer than a block, a key longer than a block",
        arguments: [
            // Test case 1
            ("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            // Test case 2
            (
                "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            // Test case 3
            (
                String(repeating: "aa", count: 20), String(repeating: "dd", count: 50),
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
            ),
            // Test case 6: a 131-byte key, hashed first
            (
                String(repeating: "aa", count: 131),
                "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
        ]
    )
    func rfc4231(key: String, data: String, expected: String) throws {
        let code = KeyedHMACSHA256(key: try #require(APIKeySecret.bytes(hex: key))).code(try #require(APIKeySecret.bytes(hex: data)))
        #expect(APIKeySecret.hex(Array(code)) == expected)
    }

    @Test("the same codes as swift-crypto's HMAC<SHA256>, for keys and messages of every length around a block, and one key used many times")
    func matchesCrypto() {
        var generator = SystemRandomNumberGenerator()
        for keyLength in [0, 1, 31, 32, 63, 64, 65, 200] {
            let key = (0..<keyLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let keyed = KeyedHMACSHA256(key: key)
            for messageLength in [0, 1, 55, 56, 63, 64, 65, 1000] {
                let message = (0..<messageLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
                #expect(Array(keyed.code(message)) == expected, "key \(keyLength) bytes, message \(messageLength) bytes")
                // Fed in two pieces: the same code.
                let split = messageLength / 3
                let pieces = keyed.code { hash in
                    message[..<split].withUnsafeBytes { hash.update(bufferPointer: $0) }
                    message[split...].withUnsafeBytes { hash.update(bufferPointer: $0) }
                }
                #expect(Array(pieces) == expected, "in pieces: key \(keyLength) bytes, message \(messageLength) bytes")
            }
        }
    }
}

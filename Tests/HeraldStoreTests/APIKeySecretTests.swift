// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import Testing

/// What every authenticated request reads first: the bearer token of its header, and the key id
/// inside the token.
@Suite struct APIKeySecretTests {
    @Test("a generated token's id is found in it; anything not shaped like one of ours has none")
    func ids() {
        let key = APIKeySecret.generate()
        #expect(APIKeySecret.id(of: key.token) == key.id && key.id.utf8.count == 16)
        let secret = String(repeating: "a", count: 64)
        #expect(APIKeySecret.id(of: "hk_0123456789abcdef_\(secret)") == "0123456789abcdef")
        for bad in [
            "", "hk_0123456789abcdef_\(secret)0", "hk_0123456789abcde_\(secret)a", "hx_0123456789abcdef_\(secret)",
            "hk_0123456789ab_def_\(secret)", "hk_0123456789abcdef_\(secret.dropLast())_", "hk_0123456789abcdéf_\(secret.dropLast())",
            "hk_0123456789abcdef-\(secret)",
        ] {
            #expect(APIKeySecret.id(of: bad) == nil, "\(bad)")
        }
    }

    @Test("hex digits to bytes: pairs of digits in either case; an odd count, a non-digit or a fullwidth digit is none")
    func hexBytes() {
        #expect(APIKeySecret.bytes(hex: "00ff7Fa0") == [0x00, 0xFF, 0x7F, 0xA0])
        #expect(APIKeySecret.bytes(hex: "") == [])
        for bad in ["0", "0g", "ab c", "\u{FF10}\u{FF11}", "-1"] { #expect(APIKeySecret.bytes(hex: bad) == nil, "\(bad)") }
    }

    @Test("a master key: 64 hex digits or base64 of 32 bytes, blanks around dropped; anything else is none")
    func masterKey() {
        let bytes = (0..<32).map { UInt8($0 * 7) }
        #expect(SecretBox.parseMasterKey(" " + APIKeySecret.hex(bytes) + "\n") == bytes)
        #expect(SecretBox.parseMasterKey(APIKeySecret.hex(bytes).uppercased()) == bytes)
        #expect(SecretBox.parseMasterKey(Data(bytes).base64EncodedString()) == bytes)
        let fullwidth = String(repeating: "\u{FF10}", count: 64)
        for bad in [APIKeySecret.hex(Array(bytes.dropLast())), APIKeySecret.hex(bytes) + "00", fullwidth, ""] {
            #expect(SecretBox.parseMasterKey(bad) == nil, "\(bad)")
        }
    }

    @Test("the bearer token: the scheme in any case, blanks around the token dropped; another scheme or none is no token")
    func bearer() {
        #expect(APIKeySecret.bearerToken("Bearer hk_a") == "hk_a")
        #expect(APIKeySecret.bearerToken("bEaReR \t hk_a \t") == "hk_a")
        #expect(APIKeySecret.bearerToken("Bearer   ") == "")
        for other in ["Bearer", "Bearer", "Basic hk_a", "Bearerhk_abc", "Bearer\thk_a", "Béarer hk_a", "bearer"] {
            #expect(APIKeySecret.bearerToken(other) == nil, "\(other)")
        }
    }
}

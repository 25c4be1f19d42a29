// SPDX-License-Identifier: Apache-2.0
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

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto

/// The keys of a browser's push subscription (`PushSubscription.getKey`, the `keys` of its JSON):
/// the user agent's P-256 public key and its 16-octet authentication secret (RFC 8291 §3).
package struct WebPushSubscriptionKeys: Sendable, Hashable {
    /// `ua_public`: 65 octets, `0x04 ‖ X ‖ Y`, a point on P-256.
    package let p256dh: [UInt8]
    /// `auth_secret`: exactly 16 octets (RFC 8291 §3.2).
    package let auth: [UInt8]
    /// The parsed `p256dh`, kept so that encrypting does not parse it again.
    let publicKey: P256.KeyAgreement.PublicKey

    package init(p256dh: [UInt8], auth: [UInt8]) throws(WebPushKeyError) {
        guard p256dh.count == 65, p256dh[0] == 0x04,
            let publicKey = try? P256.KeyAgreement.PublicKey(x963Representation: p256dh)
        else { throw .badP256DH }
        guard auth.count == 16 else { throw .badAuth }
        self.p256dh = p256dh
        self.auth = auth
        self.publicKey = publicKey
    }

    /// The keys as a subscription's JSON carries them: base64url. Trailing `=` padding is
    /// tolerated (Firefox pads what it hands out in places, Chrome does not); the standard
    /// alphabet (`+`, `/`), white space and anything else are refused.
    package init(p256dh: String, auth: String) throws(WebPushKeyError) {
        guard let p256dhBytes = Self.decodeBase64URL(p256dh) else { throw .badP256DH }
        guard let authBytes = Self.decodeBase64URL(auth) else { throw .badAuth }
        try self.init(p256dh: p256dhBytes, auth: authBytes)
    }

    package var p256dhBase64URL: String { Base64URL.encode(self.p256dh) }
    package var authBase64URL: String { Base64URL.encode(self.auth) }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.p256dh == rhs.p256dh && lhs.auth == rhs.auth }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.p256dh)
        hasher.combine(self.auth)
    }

    /// Strict base64url (RFC 4648 §5) with optional trailing padding; `nil` for anything else.
    static func decodeBase64URL(_ text: String) -> [UInt8]? {
        var sawPadding = false
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                if sawPadding { return nil }
            case UInt8(ascii: "="): sawPadding = true
            default: return nil
            }
        }
        return Base64URL.decode(text)
    }
}

/// Which subscription key is unusable.
package enum WebPushKeyError: Error, Equatable, Sendable {
    /// `p256dh` is not base64url, not 65 octets, or not an uncompressed point on P-256.
    case badP256DH
    /// `auth` is not base64url or not exactly 16 octets.
    case badAuth
}

// SPDX-License-Identifier: Apache-2.0
import Crypto
import Testing
import WebPush

@Suite struct WebPushSubscriptionKeysTests {
    let browser = Browser()

    @Test("a browser's keys are taken, as octets and as base64url with or without padding")
    func accepts() throws {
        let keys = try WebPushSubscriptionKeys(p256dh: self.browser.publicKey, auth: self.browser.auth)
        #expect(keys.p256dh == self.browser.publicKey)
        #expect(keys.auth == self.browser.auth)
        #expect(!keys.p256dhBase64URL.contains("=") && !keys.authBase64URL.contains("="))
        let fromText = try WebPushSubscriptionKeys(p256dh: keys.p256dhBase64URL, auth: keys.authBase64URL)
        #expect(fromText == keys)
        let padded = try WebPushSubscriptionKeys(p256dh: keys.p256dhBase64URL + "=", auth: keys.authBase64URL + "==")
        #expect(padded == keys)
        #expect(Set([keys, fromText, padded]).count == 1)
    }

    @Test("p256dh must be a 65-octet uncompressed point on P-256")
    func badP256DH() throws {
        let auth = self.browser.auth
        let point = self.browser.publicKey
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: Array(point.prefix(64)), auth: auth) }
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: point + [0], auth: auth) }
        #expect(throws: WebPushKeyError.badP256DH) {
            try WebPushSubscriptionKeys(p256dh: [0x04] + [UInt8](repeating: 1, count: 64), auth: auth)
        }
        var offCurve = point
        offCurve[64] ^= 1
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: offCurve, auth: auth) }
        let compressed = Array(self.browser.privateKey.publicKey.compressedRepresentation)
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: compressed, auth: auth) }
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: [], auth: auth) }
    }

    @Test("auth must be exactly 16 octets")
    func badAuth() throws {
        let point = self.browser.publicKey
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: point, auth: Array(repeating: 1, count: 15)) }
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: point, auth: Array(repeating: 1, count: 17)) }
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: point, auth: []) }
    }

    @Test("the standard alphabet, white space, inner padding and junk are refused")
    func strictBase64URL() throws {
        let keys = try WebPushSubscriptionKeys(p256dh: self.browser.publicKey, auth: self.browser.auth)
        let p256dh = keys.p256dhBase64URL
        let auth = keys.authBase64URL
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: p256dh, auth: "BTBZMqHH6r4Tts7J/aSIgg") }
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: p256dh, auth: "BTBZMqHH6r4Tts7J+aSIgg") }
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: " " + p256dh, auth: auth) }
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: p256dh + "\n", auth: auth) }
        #expect(throws: WebPushKeyError.badP256DH) { try WebPushSubscriptionKeys(p256dh: p256dh + "===", auth: auth) }
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: p256dh, auth: "=" + auth) }
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: p256dh, auth: "BTBZMqHH6r4Tts7J_aSIg") }
        #expect(throws: WebPushKeyError.badAuth) { try WebPushSubscriptionKeys(p256dh: p256dh, auth: "not base64!") }
    }
}

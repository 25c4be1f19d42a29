// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation
import HeraldKit
import Testing

@Suite struct PayloadDecodingTests {
    struct Score: Decodable, Equatable {
        var home: Int
        var away: Int
    }

    @Test("aps fields, Live Activity content-state and custom keys are typed, from JSON and from userInfo")
    func decoding() throws {
        let json = #"""
            {"aps":{"alert":{"title":"Goal","subtitle":"Ajax","body":"2-1"},"badge":3,"sound":{"critical":1,"name":"siren.caf","volume":1},
            "thread-id":"match-7","category":"SCORE","mutable-content":1,"interruption-level":"time-sensitive","relevance-score":0.8,
            "event":"update","timestamp":1700000000,"content-state":{"home":2,"away":1}},"matchId":7,"teams":["Ajax","PSV"]}
            """#
        let fromJSON = try ReceivedNotification(jsonData: Data(json.utf8))
        let userInfo = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [AnyHashable: Any])
        let fromUserInfo = try ReceivedNotification(userInfo: userInfo)
        for received in [fromJSON, fromUserInfo] {
            #expect(received.alert?.title == "Goal" && received.alert?.subtitle == "Ajax" && received.alert?.body == "2-1")
            #expect(received.badge == 3)
            #expect(received.sound == "siren.caf" && received.isCriticalSound)
            #expect(received.threadID == "match-7" && received.category == "SCORE")
            #expect(received.mutableContent && !received.contentAvailable)
            #expect(received.interruptionLevel == "time-sensitive" && received.relevanceScore == 0.8)
            #expect(received.event == "update" && received.timestamp == 1_700_000_000)
            #expect(try received.contentState(as: Score.self) == Score(home: 2, away: 1))
            #expect(try received.custom("matchId", as: Int.self) == 7)
            #expect(try received.custom("teams", as: [String].self) == ["Ajax", "PSV"])
            #expect(received.custom["aps"] == nil)
        }
        let plain = try ReceivedNotification(jsonData: Data(#"{"aps":{"alert":"Hi","content-available":1}}"#.utf8))
        #expect(plain.alert?.body == "Hi" && plain.contentAvailable)
        #expect(throws: (any Error).self) { try ReceivedNotification(jsonData: Data("[1]".utf8)) }
        #expect(throws: (any Error).self) { try plain.contentState(as: Score.self) }
    }
}

@Suite struct EncryptedPayloadTests {
    static let original = Data(#"{"aps":{"alert":{"title":"Secret","body":"for your eyes"}},"orderId":"A17"}"#.utf8)

    static func keys() -> [EncryptedPayload.PrivateKey] {
        [.x25519(Curve25519.KeyAgreement.PrivateKey()), .p256(P256.KeyAgreement.PrivateKey())]
    }

    static func envelope(_ object: [String: Any]) throws -> PayloadValue {
        try JSONDecoder().decode(PayloadValue.self, from: JSONSerialization.data(withJSONObject: object))
    }

    @Test("sealed for a device's X25519 or P-256 key, opened only with that key")
    func roundTrip() throws {
        for key in Self.keys() {
            let (type, publicKey) = (key.publicKey.type, key.publicKey.data)
            let sealed = try EncryptedPayload.seal(Self.original, type: type, publicKey: publicKey)
            let text = try #require(sealed["ct"] as? String)
            #expect(!text.contains("Secret") && !(Data(base64Encoded: text).map { String(decoding: $0, as: UTF8.self).contains("Secret") } ?? true))
            #expect(try EncryptedPayload.open(try Self.envelope(sealed), with: key) == Self.original)
            // Another device's key of the same curve.
            let other: EncryptedPayload.PrivateKey = type == "x25519" ? .x25519(.init()) : .p256(.init())
            #expect(throws: EncryptedPayload.Failure(code: "cannot_decrypt")) { try EncryptedPayload.open(try Self.envelope(sealed), with: other) }
        }
    }

    @Test("tampered, truncated, wrong version or curve: a clean failure with a code")
    func failures() throws {
        let key = EncryptedPayload.PrivateKey.x25519(.init())
        let sealed = try EncryptedPayload.seal(Self.original, type: "x25519", publicKey: key.publicKey.data)
        var bytes = try #require(Data(base64Encoded: sealed["ct"] as? String ?? ""))
        bytes[bytes.count / 2] ^= 0x01
        var tampered = sealed
        tampered["ct"] = bytes.base64EncodedString()
        var truncated = sealed
        truncated["ct"] = try #require(Data(base64Encoded: sealed["ct"] as? String ?? "")).prefix(20).base64EncodedString()
        var version = sealed
        version["v"] = 2
        var garbage = sealed
        garbage["epk"] = "not base64!"
        let cases: [([String: Any], String)] = [
            (tampered, "cannot_decrypt"), (truncated, "cannot_decrypt"), (version, "unsupported_version"), (garbage, "malformed_envelope"),
        ]
        for (envelope, code) in cases {
            #expect(throws: EncryptedPayload.Failure(code: code)) { try EncryptedPayload.open(try Self.envelope(envelope), with: key) }
        }
        #expect(throws: EncryptedPayload.Failure(code: "key_type_mismatch")) {
            try EncryptedPayload.open(try Self.envelope(sealed), with: .p256(.init()))
        }
        #expect(throws: (any Error).self) { try EncryptedPayload.seal(Self.original, type: "rsa", publicKey: Data()) }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation
import HeraldKit
import Testing

/// The Apple glue's payload handling (HeraldKit.docc/AppleGlue.md), the part that is not
/// Apple-only: a service extension reads `userInfo`, hands it to the handler, and copies every
/// field the result has back, so nothing the payload asked for is lost after decryption.
@Suite struct GlueTests {
    static let key = EncryptedPayload.PrivateKey.x25519(.init())
    static let handler = NotificationServiceHandler(privateKey: Self.key, deadline: 25) { _ in Data() }

    @Test("an encrypted push shows the decrypted payload's badge, sound, category and thread, not the placeholder's silence")
    func encrypted() async throws {
        let secret = #"{"aps":{"alert":{"title":"Ann","body":"Dinner at 8?"},"badge":4,"sound":"chime.caf","category":"MESSAGE","thread-id":"ann"}}"#
        let envelope = try EncryptedPayload.seal(Data(secret.utf8), type: "x25519", publicKey: Self.key.publicKey.data)
        // What userInfo holds on the device: the placeholder APNs carried, and the envelope.
        let userInfo: [AnyHashable: Any] = ["aps": ["alert": ["title": "New message"], "mutable-content": 1], EncryptedPayload.key: envelope]
        let result = await Self.handler.process(try NotificationContent(userInfo: userInfo))
        #expect(result.title == "Ann" && result.body == "Dinner at 8?")
        #expect(result.badge == 4 && result.sound == "chime.caf" && result.categoryID == "MESSAGE" && result.threadID == "ann")
    }

    @Test("a plain push through the same extension keeps its own badge, sound, category and thread")
    func plain() async throws {
        let userInfo: [AnyHashable: Any] = [
            "aps": [
                "alert": ["title": "Hi", "subtitle": "there"], "badge": 2, "sound": ["critical": 1, "name": "alarm.caf"], "category": "INVITE",
                "thread-id": "t1", "mutable-content": 1,
            ],
            "custom": ["k": "v"],
        ]
        let result = await Self.handler.process(try NotificationContent(userInfo: userInfo))
        #expect(result.title == "Hi" && result.subtitle == "there")
        #expect(result.badge == 2 && result.sound == "alarm.caf" && result.categoryID == "INVITE" && result.threadID == "t1")
        #expect(result.payload["custom"]?["k"]?.string == "v")
    }

    @Test("userInfo that is not JSON is refused, not guessed")
    func notJSON() {
        #expect(throws: (any Error).self) { try NotificationContent(userInfo: ["aps": Date()]) }
    }
}

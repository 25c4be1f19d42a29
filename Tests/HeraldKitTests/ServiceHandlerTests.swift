// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation
import HeraldKit
import Synchronization
import Testing

/// The notification service extension's core, with a clock that moves only when told to.
@Suite struct ServiceHandlerTests {
    static let key = EncryptedPayload.PrivateKey.x25519(.init())

    /// What APNs would carry: a placeholder alert, mutable-content, and the envelope.
    static func encrypted(_ original: String) throws -> NotificationContent {
        let envelope = try EncryptedPayload.seal(Data(original.utf8), type: "x25519", publicKey: Self.key.publicKey.data)
        let payload: [String: Any] = ["aps": ["alert": ["title": "New message"], "mutable-content": 1], EncryptedPayload.key: envelope]
        return try NotificationContent(payload: JSONSerialization.data(withJSONObject: payload))
    }

    static let secret = #"{"aps":{"alert":{"title":"Ann","body":"Dinner at 8?"},"thread-id":"ann"},"attachment-url":"https://example.com/photo.jpg"}"#

    @Test("decrypts and attaches the picture when both finish in time")
    func complete() async throws {
        let handler = NotificationServiceHandler(privateKey: Self.key, clock: TestClock()) { url in Data("jpeg of \(url.lastPathComponent)".utf8) }
        let content = await handler.process(try Self.encrypted(Self.secret))
        #expect(content.title == "Ann" && content.body == "Dinner at 8?" && content.threadID == "ann")
        #expect(content.attachments.map(\.identifier) == ["photo.jpg"])
        #expect(content.attachments.first?.data == Data("jpeg of photo.jpg".utf8))
    }

    @Test("at the deadline (moved clock) the best attempt is handed back: decrypted, without the attachment")
    func deadline() async throws {
        let clock = TestClock()
        let started = Mutex(false)
        // A download that never finishes on its own, and stops when cancelled.
        let handler = NotificationServiceHandler(privateKey: Self.key, deadline: .seconds(25), clock: clock) { _ in
            started.withLock { $0 = true }
            try await Task.sleep(for: .seconds(3600))
            return Data()
        }
        let content = try Self.encrypted(Self.secret)
        async let result = handler.process(content)
        // Once the download started and the deadline sleeps on the clock, move it past 25 s.
        // (A wait for that event; 300 s is only a hang guard.)
        let deadline = ContinuousClock.now + .seconds(300)
        while !(started.withLock { $0 } && clock.sleepers == 1), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        clock.advance(by: .seconds(24))
        #expect(clock.sleepers == 1, "not yet")
        clock.advance(by: .seconds(1))
        let best = await result
        #expect(best.title == "Ann" && best.body == "Dinner at 8?")
        #expect(best.attachments.isEmpty)
    }

    @Test("the system's expiry ends it at once with the best attempt; a wrong key leaves the placeholder")
    func expiryAndWrongKey() async throws {
        let job = NotificationServiceHandler.Job()
        let started = Mutex(false)
        let handler = NotificationServiceHandler(privateKey: Self.key, clock: TestClock()) { _ in
            started.withLock { $0 = true }
            try await Task.sleep(for: .seconds(3600))
            return Data()
        }
        let content = try Self.encrypted(Self.secret)
        async let result = handler.process(content, job: job)
        // Expire once the download started (decrypted by then), not after a fixed moment.
        let deadline = ContinuousClock.now + .seconds(300)
        while !started.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        job.expire()
        let best = await result
        #expect(best.title == "Ann" && best.attachments.isEmpty)

        let stranger = NotificationServiceHandler(privateKey: .x25519(.init()), clock: TestClock()) { _ in Data() }
        let placeholder = await stranger.process(try Self.encrypted(Self.secret))
        #expect(placeholder.title == "New message" && placeholder.body.isEmpty, "the placeholder stays")
        let keyless = NotificationServiceHandler(privateKey: nil, clock: TestClock()) { _ in Data() }
        #expect(await keyless.process(try Self.encrypted(Self.secret)).title == "New message")
    }

}

// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import Crypto
import Foundation
import HeraldCore
import HeraldKit
import HeraldServer
import HeraldTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// App → Herald → APNs (the emulator) → device, encrypted end to end: the device registers its
/// public key through HeraldKit, the backend sends with `"encrypt": true`, the emulator holds
/// only ciphertext, and the device's service extension reads the message.
@Suite(.heavy) struct EndToEndEncryptionTests {
    @Test("only the device can read it; APNs sees ciphertext and a placeholder; Herald forgets the plaintext")
    func roundTrip() async throws {
        try await HeraldClientTests.withServer { server, directory in
            let base = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
            let control = try #require(URL(string: "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"))
            let admin = try #require(server.initialAdminKey)
            _ = try await HeraldClientTests.admin(base, admin, "POST", "/v1/apps", #"{"id":"demo","bundleId":"com.example.app"}"#)
            let registerKey = try #require(
                try await HeraldClientTests.admin(base, admin, "POST", "/v1/keys", #"{"scope":"register","appId":"demo"}"#)["key"] as? String)
            let client = HeraldClient(
                serverURL: base, appID: "demo", registerKey: registerKey, persistence: .memoryOnly,
                userAssertions: try await HeraldClientTests.backend(base, admin))

            // Two phones of ann's: one with a key, one without.
            var tokens: [String] = []
            for _ in 0..<2 {
                let device = try await HeraldClientTests.admin(
                    control, "", "POST", "/v1/devices", #"{"bundleId":"com.example.app","environment":"development"}"#)
                tokens.append(try #require(device["token"] as? String))
            }
            let privateKey = EncryptedPayload.PrivateKey.x25519(.init())
            try await client.register(
                .device(try #require(PushToken.data(hex: tokens[0]))),
                DeviceDetails(environment: .sandbox, userID: "ann", encryptionKey: privateKey.publicKey)
            )
            try await client.register(.device(try #require(PushToken.data(hex: tokens[1]))), DeviceDetails(environment: .sandbox, userID: "ann"))

            let sent = try await HeraldClientTests.admin(
                base, admin, "POST", "/v1/apps/demo/notifications",
                #"{"audience":{"users":["ann"]},"encrypt":true,"title":"Ann","body":"the code is 4711","data":{"orderId":"A17"},"placeholder":{"title":"New message"}}"#
            )
            #expect(sent["deliveries"] as? Int == 1, "only the device with a key: \(sent)")
            let id = try #require(sent["id"] as? String)
            let deadline = ContinuousClock.now + .seconds(300)  // a hang guard: the loop ends when it is sent
            while ContinuousClock.now < deadline {
                let status = try await HeraldClientTests.admin(base, admin, "GET", "/v1/apps/demo/notifications/\(id)")
                if (status["counts"] as? [String: Int])?["sent"] == 1 { break }
                try await Task.sleep(for: .milliseconds(25))
            }

            let inbox = try await HeraldClientTests.admin(control, "", "GET", "/v1/devices/\(tokens[0])/inbox")
            let payload = try #require((inbox["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any])
            let carried = try JSONSerialization.data(withJSONObject: payload)
            #expect(!String(decoding: carried, as: UTF8.self).contains("4711"), "APNs sees no plaintext")
            let aps = try #require(payload["aps"] as? [String: Any])
            #expect((aps["alert"] as? [String: Any])?["title"] as? String == "New message")
            #expect(aps["mutable-content"] as? Int == 1)
            #expect(payload["orderId"] == nil)
            let other = try await HeraldClientTests.admin(control, "", "GET", "/v1/devices/\(tokens[1])/inbox")
            #expect((other["notifications"] as? [Any])?.isEmpty == true, "a device without a key gets nothing")

            // The device's service extension.
            let handler = NotificationServiceHandler(privateKey: privateKey) { _ in Data() }
            let shown = await handler.process(try NotificationContent(payload: carried))
            #expect(shown.title == "Ann" && shown.body == "the code is 4711")
            #expect(shown.payload["orderId"]?.string == "A17")
            let stranger = NotificationServiceHandler(privateKey: .x25519(.init())) { _ in Data() }
            #expect(await stranger.process(try NotificationContent(payload: carried)).title == "New message")

            // Herald keeps no plaintext once the deliveries are done.
            let check = try await ProcessRunner.run(
                "python3",
                [
                    "-c",
                    "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select length(payload) from notifications where id=?', (sys.argv[2],)).fetchone()[0])",
                    directory.path + "/herald.sqlite", id,
                ])
            #expect(check.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(check.standardError)")
        }
    }
}

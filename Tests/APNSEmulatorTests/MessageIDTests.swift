// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// The ids the emulator answers with, through curl over TLS: generated ones never repeat in the
/// emulator's life (a counter reset included), a caller's own comes back exactly as sent.
@Suite(.heavy) struct MessageIDTests {
    static let body = #"{"aps":{"alert":"Hello"}}"#
    static let update = #"{"aps":{"timestamp":1,"event":"update","content-state":{"score":"2-1"}}}"#

    /// `count` pushes without an `apns-id` on one new connection; the ids and unique ids answered.
    func pushes(_ fixture: EmulatorFixture, to token: String, count: Int) async throws -> [String] {
        let request = CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body)
        let responses = try await fixture.development.send(Array(repeating: request, count: count))
        var ids: [String] = []
        for response in responses {
            #expect(response.status == 200, "\(response.body)")
            ids.append(try #require(response.headers["apns-id"]))
            ids.append(try #require(response.headers["apns-unique-id"]))
        }
        return ids
    }

    @Test("generated apns-ids and unique ids never repeat, across DELETE /v1/counters too")
    func uniqueAcrossCounterReset() async throws {
        // The testing configuration has a fixed random seed: before the fix, the first connection
        // after a reset drew the same ids as the first connection ever.
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            var ids = try await self.pushes(fixture, to: token, count: 3)
            #expect(try await fixture.control("DELETE", "/v1/counters").status == 200)
            #expect(try await fixture.counter("connections") == 0)
            ids += try await self.pushes(fixture, to: token, count: 3)
            #expect(try await fixture.control("DELETE", "/v1/counters").status == 200)
            ids += try await self.pushes(fixture, to: token, count: 3)
            #expect(ids.count == 18)
            #expect(ids.allSatisfy { UUIDText.isCanonical($0) })
            #expect(Set(ids).count == ids.count, "repeated ids: \(ids)")
            // The inbox records carry the same ids.
            let stored = try await fixture.inbox(token).compactMap { $0["apnsId"] as? String }
            #expect(stored.count == 9)
            #expect(Set(stored).count == 9)
        }
    }

    @Test("a client's apns-id is echoed byte for byte, uppercase included, and stored as sent")
    func echoedExactly() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            for id in ["0C3A4D7E-AAAA-4BBB-8CCC-00000000000A", "0c3a4d7e-aaaa-4bbb-8ccc-00000000000b", "0C3a4d7E-aAaA-4bBb-8CcC-00000000000c"] {
                let response = try await fixture.development.send(
                    CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders() + [("apns-id", id)], json: Self.body)
                )
                #expect(response.status == 200)
                #expect(response.headers["apns-id"] == id)
                // An error answer echoes it too.
                let rejected = try await fixture.development.send(
                    CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders() + [("apns-id", id)], json: "")
                )
                #expect(rejected.reason == "PayloadEmpty")
                #expect(rejected.headers["apns-id"] == id)
            }
            let stored = try await fixture.inbox(token).compactMap { $0["apnsId"] as? String }
            #expect(
                stored == ["0C3A4D7E-AAAA-4BBB-8CCC-00000000000A", "0c3a4d7e-aaaa-4bbb-8ccc-00000000000b", "0C3a4d7E-aAaA-4bBb-8CcC-00000000000c"])
        }
    }

    @Test("a broadcast's apns-request-id is echoed byte for byte")
    func broadcastRequestIDEchoed() async throws {
        try await withEmulatorFixture { fixture in
            let created = try await fixture.development.send(
                CurlRequest(
                    path: "/1/apps/\(EmulatorFixture.bundleID)/channels", headers: [("authorization", try fixture.bearer())],
                    json: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#
                )
            )
            let channel = try #require(created.headers["apns-channel-id"])
            let id = "5D0C1E2F-ABCD-4EF0-9ABC-DEF012345678"
            let response = try await fixture.development.send(
                CurlRequest(
                    path: "/4/broadcasts/apps/\(EmulatorFixture.bundleID)",
                    headers: [
                        ("authorization", try fixture.bearer()), ("apns-push-type", "liveactivity"), ("apns-channel-id", channel),
                        ("apns-request-id", id),
                    ],
                    json: Self.update
                )
            )
            #expect(response.status == 200, "\(response.body)")
            #expect(response.headers["apns-request-id"] == id)
        }
    }
}

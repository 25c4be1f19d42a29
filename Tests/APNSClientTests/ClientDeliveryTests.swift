// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Pushes through the client to the emulator's virtual devices, over real TLS sockets.
@Suite(.heavy) struct ClientDeliveryTests {
    @Test("every push type reaches a virtual device of its kind", arguments: EmulatorFixture.pushKinds)
    func everyPushType(kind: String, pushType: String, topic: String, body: String) async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice(kind: kind)
            let type = try #require(PushType(rawValue: pushType))
            let apnsID = UUIDText.random()
            let request = APNSRequest(
                deviceToken: try DeviceToken(hex: token),
                headers: NotificationHeaders(pushType: type, topic: topic, priority: type == .background ? .throttled : nil, apnsID: apnsID),
                payload: Array(body.utf8)
            )
            let delivery = try await fixture.withClient { try await $0.send(request) }
            #expect(delivery.apnsID == apnsID)
            #expect(delivery.uniqueID != nil, "development answers carry apns-unique-id")
            let inbox = try await fixture.inbox(token)
            #expect(inbox.count == 1)
            #expect(inbox.first?["pushType"] as? String == pushType)
        }
    }

    @Test("a typed payload is encoded and delivered; APNs's apns-id comes back when none was set")
    func typedPayload() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            var aps = APS()
            aps.alert = .fields(AlertFields(title: "Typed", body: "payload"))
            aps.badge = 3
            let request = try APNSRequest(
                deviceToken: try DeviceToken(hex: token),
                headers: NotificationHeaders(pushType: .alert, topic: EmulatorFixture.bundleID),
                payload: Payload(aps: aps)
            )
            let delivery = try await fixture.withClient { try await $0.send(request) }
            #expect(delivery.apnsID.map(UUIDText.isCanonical) == true)
            let inbox = try await fixture.inbox(token)
            let payload = inbox.first?["payload"] as? [String: Any]
            #expect((payload?["aps"] as? [String: Any])?["badge"] as? Int == 3)
        }
    }

    @Test("rejections carry status, reason, class and the 410 timestamp")
    func rejections() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let gone = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/devices/\(gone)/uninstall")
            try await fixture.withClient { client async throws in
                let bad = await clientError { try await client.send(try alert(String(repeating: "0", count: 64))) }
                #expect(bad?.code == .rejected)
                #expect(bad?.status == 400)
                #expect(bad?.reason == .badDeviceToken)
                #expect(bad?.failureClass == .invalidateToken)
                let unregistered = await clientError { try await client.send(try alert(gone)) }
                #expect(unregistered?.status == 410)
                #expect(unregistered?.reason == .unregistered)
                #expect(unregistered?.timestampMilliseconds != nil)
                #expect(unregistered?.failureClass == .invalidateToken)
                // The connection keeps working after rejections.
                #expect(try await client.send(try alert(token)).apnsID != nil)
            }
            #expect(try await fixture.counter("connections") == 1)
        }
    }

    @Test("many pushes share one connection after the stream ramp, with no stream refused")
    func rampAndBulk() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let requests = try (0..<400).map { _ in try alert(token) }
            let outcomes = try await fixture.withClient { try await $0.sendAll(requests) }
            #expect(outcomes.count == 400)
            #expect(outcomes.allSatisfy { (try? $0.result.get()) != nil })
            #expect(try await fixture.counter("connections") == 1)
            #expect(try await fixture.counter("refusedStreams") == 0, "the client never exceeded the advertised stream limit")
            #expect(try await fixture.counter("accepted") == 400)
        }
    }

    @Test("a pool of three connections spreads the load over three connections")
    func severalConnections() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let requests = try (0..<300).map { _ in try alert(token) }
            let outcomes = try await fixture.withClient(configure: { $0.connections = 3 }) { try await $0.sendAll(requests) }
            #expect(outcomes.allSatisfy { (try? $0.result.get()) != nil })
            #expect(try await fixture.counter("connections") == 3)
            #expect(try await fixture.counter("accepted") == 300)
        }
    }

    @Test("a small intake queue holds callers back instead of growing")
    func backPressure() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let requests = try (0..<200).map { _ in try alert(token) }
            let outcomes = try await fixture.withClient(configure: { $0.maximumQueuedRequests = 3 }) { client async throws in
                try await client.sendAll(requests, maxInFlight: 50)
            }
            #expect(outcomes.count == 200)
            #expect(outcomes.allSatisfy { (try? $0.result.get()) != nil })
        }
    }

    @Test("after shutdown, sends fail with code shutdown")
    func shutdown() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let client = try APNSClient(configuration: fixture.clientConfiguration(), clock: fixture.clock)
            try await client.send(try alert(token))
            await client.shutdown()
            let error = await clientError { try await client.send(try alert(token)) }
            #expect(error?.code == .shutdown)
        }
    }
}

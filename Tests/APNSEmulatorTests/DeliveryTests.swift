// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// What happens behind the wire: virtual devices, storage, expiry, collapse, uninstall.
@Suite(.heavy) struct DeliveryTests {
    func push(
        _ fixture: EmulatorFixture,
        _ token: String,
        body: String = #"{"aps":{"alert":"Hello"}}"#,
        pushType: String = "alert",
        topic: String = EmulatorFixture.bundleID,
        extra: [(String, String)] = []
    ) async throws -> CurlResponse {
        try await fixture.development.send(
            CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(topic: topic, pushType: pushType) + extra, json: body)
        )
    }

    @Test("every token kind receives its push type on its topic", arguments: EmulatorFixture.pushKinds)
    func everyKind(kind: String, pushType: String, topic: String, body: String) async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice(kind: kind)
            if kind == "liveactivity" || kind == "push-to-start" { #expect(token.count == 160) } else { #expect(token.count == 64) }
            let priority = pushType == "background" ? [("apns-priority", "5")] : []
            let response = try await self.push(fixture, token, body: body, pushType: pushType, topic: topic, extra: priority)
            #expect(response.status == 200, "\(response.body)")
            let inbox = try await fixture.inbox(token)
            #expect(inbox.count == 1)
            #expect(inbox.first?["pushType"] as? String == pushType)
            #expect(inbox.first?["topic"] as? String == topic)
            // The same push to a bare device token is for another topic.
            if kind != "device" {
                let device = try await fixture.createDevice()
                #expect(
                    try await self.push(fixture, device, body: body, pushType: pushType, topic: topic, extra: priority).reason
                        == "DeviceTokenNotForTopic")
            }
        }
    }

    @Test("an offline device keeps only the newest notification and gets it when back online")
    func storeAndForward() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice(online: false)
            #expect(try await self.push(fixture, token, body: #"{"aps":{"alert":"first"}}"#).status == 200)
            #expect(try await self.push(fixture, token, body: #"{"aps":{"alert":"second"}}"#).status == 200)
            #expect(try await fixture.inbox(token).isEmpty)
            var counters = try await fixture.counters()
            #expect(counters["stored"] as? Int == 2)
            #expect(counters["discarded"] as? Int == 1)
            #expect(try await fixture.control("PATCH", "/v1/devices/\(token)", json: #"{"online":true}"#).status == 200)
            let inbox = try await fixture.inbox(token)
            #expect(inbox.count == 1)
            #expect((inbox.first?["payload"] as? [String: Any]).flatMap { ($0["aps"] as? [String: Any])?["alert"] as? String } == "second")
            #expect(inbox.first?["wasStored"] as? Bool == true)
            counters = try await fixture.counters()
            #expect(counters["delivered"] as? Int == 1)
        }
    }

    @Test("expiration 0 is never stored; stored notifications expire; 30 days at most")
    func expiry() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice(online: false)
            let now = fixture.clock.nowSeconds
            #expect(try await self.push(fixture, token, extra: [("apns-expiration", "0")]).status == 200)
            #expect(try await fixture.control("GET", "/v1/devices/\(token)").json?["hasStoredNotification"] as? Bool == false)
            #expect(try await self.push(fixture, token, extra: [("apns-expiration", String(now + 60))]).status == 200)
            fixture.clock.advance(seconds: 61)
            try await fixture.control("PATCH", "/v1/devices/\(token)", json: #"{"online":true}"#)
            #expect(try await fixture.inbox(token).isEmpty)
            let counters = try await fixture.counters()
            #expect(counters["expired"] as? Int == 1)
            #expect(counters["discarded"] as? Int == 1)

            // No header: kept for 30 days, not a second more.
            try await fixture.control("PATCH", "/v1/devices/\(token)", json: #"{"online":false}"#)
            #expect(try await self.push(fixture, token).status == 200)
            fixture.clock.advance(seconds: 30 * 86_400 - 1)
            #expect((try await fixture.counters())["expired"] as? Int == 1)
            #expect(try await fixture.control("GET", "/v1/devices/\(token)").json?["hasStoredNotification"] as? Bool == true)
            fixture.clock.advance(seconds: 2)
            #expect((try await fixture.counters())["expired"] as? Int == 2)
            // A later expiration is capped at 30 days too.
            #expect(try await self.push(fixture, token, extra: [("apns-expiration", String(fixture.clock.nowSeconds + 90 * 86_400))]).status == 200)
            fixture.clock.advance(seconds: 30 * 86_400 + 1)
            #expect((try await fixture.counters())["expired"] as? Int == 3)
        }
    }

    @Test("a collapse id replaces the earlier notification")
    func collapse() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            #expect(try await self.push(fixture, token, body: #"{"aps":{"alert":"3-1"}}"#, extra: [("apns-collapse-id", "score")]).status == 200)
            #expect(try await self.push(fixture, token, body: #"{"aps":{"alert":"other"}}"#).status == 200)
            #expect(try await self.push(fixture, token, body: #"{"aps":{"alert":"3-2"}}"#, extra: [("apns-collapse-id", "score")]).status == 200)
            let inbox = try await fixture.inbox(token)
            #expect(inbox.count == 2)
            #expect(inbox.last?["collapseId"] as? String == "score")
            #expect((inbox.last?["payload"] as? [String: Any]).flatMap { ($0["aps"] as? [String: Any])?["alert"] as? String } == "3-2")
            #expect((try await fixture.counters())["collapsed"] as? Int == 1)
        }
    }

    @Test("after uninstall pushes get 410 Unregistered with the uninstall time in ms")
    func uninstall() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            #expect(try await self.push(fixture, token).status == 200)
            fixture.clock.advance(seconds: 100)
            let uninstalled = try await fixture.control("POST", "/v1/devices/\(token)/uninstall").json
            let at = uninstalled?["uninstalledAtMilliseconds"] as? Int
            #expect(at == Int(fixture.clock.nowMilliseconds))
            let response = try await self.push(fixture, token)
            #expect(response.status == 410)
            #expect(response.reason == "Unregistered")
            #expect(response.json?["timestamp"] as? Int == at)
        }
    }

    @Test("disabled notifications: alerts accepted but discarded; background pushes still arrive")
    func notificationsDisabled() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.control("PATCH", "/v1/devices/\(token)", json: #"{"notificationsEnabled":false}"#)
            #expect(try await self.push(fixture, token).status == 200)
            #expect(
                try await self.push(
                    fixture, token, body: #"{"aps":{"content-available":1}}"#, pushType: "background", extra: [("apns-priority", "5")]
                ).status == 200)
            let inbox = try await fixture.inbox(token)
            #expect(inbox.map { $0["pushType"] as? String } == ["background"])
            #expect((try await fixture.counters())["discarded"] as? Int == 1)
        }
    }

    @Test("the live event stream shows each notification as it arrives")
    func liveStream() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let port = fixture.emulator.controlPort!
            // A background process, not a ProcessRunner slot: on a machine loaded with every suite
            // the stream could wait for a slot longer than this test waits for it.
            let stream = try BackgroundProcess(
                "/usr/bin/curl", ["-s", "-N", "--max-time", "900", "http://127.0.0.1:\(port)/v1/devices/\(token)/events"])
            // Push once the stream is attached (the wait ends when it is; 300 s is a hang guard; the
            // stream itself ends when the device is removed, long before its 900 s cap).
            let deadline = ContinuousClock.now + .seconds(300)
            while fixture.emulator.state.listenerCount(token: token) == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            try #require(fixture.emulator.state.listenerCount(token: token) == 1)
            #expect(try await self.push(fixture, token, body: #"{"aps":{"alert":"live!"}}"#).status == 200)
            // Removing the device ends its stream.
            #expect(try await fixture.control("DELETE", "/v1/devices/\(token)").status == 200)
            #expect(try await stream.waitFor("event: removed", timeout: 300))
            let output = stream.printed
            #expect(output.contains("event: notification"))
            #expect(output.contains(#""alert":"live!""#))
            #expect(output.contains("event: removed"))
        }
    }

    @Test("background pushes at priority 10 are refused; liveactivity over the right topic only")
    func priorityRules() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let response = try await self.push(
                fixture, token, body: #"{"aps":{"content-available":1}}"#, pushType: "background", extra: [("apns-priority", "10")])
            #expect(response.reason == "BadPriority")
            #expect(try await self.push(fixture, token, pushType: "liveactivity").reason == "TopicDisallowed")
        }
    }

    @Test("bodies that are not a JSON object are refused")
    func invalidJSON() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            for body in ["{", "[1,2]", "\"text\"", #"{"aps":}"#] {
                #expect(try await self.push(fixture, token, body: body).reason == "BadRequestPayload", "\(body)")
            }
        }
    }
}

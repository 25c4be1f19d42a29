// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

/// `/v1/apps/{app}/channels`: broadcast channels created and deleted at the built-in emulator
/// through the app's client, kept in the store; Apple's channel errors as stable codes.
extension ServerTests {
    /// The emulator's own list of the demo app's channels in `environment`.
    func emulatorChannels(_ context: Context, environment: String = "development") async throws -> [String] {
        let listed = try await context.control.call("GET", "/v1/channels?bundleId=com.example.app&environment=\(environment)")
        return (listed.body["channels"] as? [[String: Any]] ?? []).compactMap { $0["channelId"] as? String }
    }

    /// Apple's id in a path: base64url.
    func pathID(_ id: String) -> String {
        id.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    @Test("channels: created at the emulator with a send key, read, listed per environment, deleted there and here", arguments: StoreDriver.enabled)
    func channelsCRUD(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (register, send) = try await self.setUp(context)
            let made = try await context.api.call(
                "POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox","messageStoragePolicy":1}"#)
            #expect(made.status == 201, "\(made.body)")
            let id = try #require(made.body["id"] as? String)
            #expect(made.body["environment"] as? String == "sandbox" && made.body["messageStoragePolicy"] as? Int == 1)
            #expect(try await self.emulatorChannels(context) == [id], "created at the emulator, with the id it made")
            let second = try await context.api.call("POST", "/v1/apps/demo/channels", key: context.admin, json: #"{"environment":"production"}"#)
            #expect(second.status == 201 && second.body["messageStoragePolicy"] as? Int == 0, "\(second.body)")
            let secondID = try #require(second.body["id"] as? String)
            #expect(try await self.emulatorChannels(context, environment: "production") == [secondID])

            #expect(try await context.api.call("POST", "/v1/apps/demo/channels", key: register, json: #"{"environment":"sandbox"}"#).status == 403)
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels", key: register).status == 403)
            let refused = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"moon"}"#)
            #expect(refused.status == 400 && (refused.body["error"] as? [String: Any])?["code"] as? String == "bad_environment")
            let policy = try await context.api.call(
                "POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox","messageStoragePolicy":2}"#)
            #expect((policy.body["error"] as? [String: Any])?["code"] as? String == "bad_message_storage_policy")

            let all = try await context.api.call("GET", "/v1/apps/demo/channels", key: send)
            #expect((all.body["channels"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id, secondID])
            let sandbox = try await context.api.call("GET", "/v1/apps/demo/channels?environment=sandbox", key: send)
            #expect((sandbox.body["channels"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id])
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels?environment=moon", key: send).status == 400)

            let read = try await context.api.call("GET", "/v1/apps/demo/channels/\(self.pathID(id))", key: send)
            #expect(read.status == 200 && read.body["id"] as? String == id, "\(read.body)")
            let encoded = try #require(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels/\(encoded)", key: send).body["id"] as? String == id)
            let unknown = try await context.api.call("GET", "/v1/apps/demo/channels/AAAA", key: send)
            #expect(unknown.status == 404 && (unknown.body["error"] as? [String: Any])?["code"] as? String == "channel_not_found")
            #expect(
                (try await context.api.call("GET", "/v1/apps/demo/channels/a.b", key: send).body["error"] as? [String: Any])?["code"] as? String
                    == "bad_channel_id")

            #expect(try await context.api.call("DELETE", "/v1/apps/demo/channels/\(self.pathID(id))", key: send).status == 204)
            #expect(try await self.emulatorChannels(context).isEmpty, "deleted at the emulator")
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels/\(self.pathID(id))", key: send).status == 404)
            #expect(try await context.api.call("DELETE", "/v1/apps/demo/channels/\(self.pathID(id))", key: send).status == 404)
        }
    }

    @Test("channels: Apple's channel errors each map to a code; a channel Apple no longer has is forgotten on delete", arguments: StoreDriver.enabled)
    func channelErrors(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (_, send) = try await self.setUp(context)
            func code(_ answer: (status: Int, body: [String: Any])) -> String? { (answer.body["error"] as? [String: Any])?["code"] as? String }
            for (status, reason, expectedStatus, expectedCode) in [
                (400, "FeatureNotEnabled", 422, "broadcast_not_enabled"), (400, "CannotCreateChannelConfig", 422, "channel_limit_reached"),
                (400, "BadChannelId", 400, "bad_channel_id"), (403, "InvalidProviderToken", 422, "apns_rejected"),
                (429, "TooManyRequests", 503, "apns_unavailable"), (503, "ServiceUnavailable", 503, "apns_unavailable"),
            ] {
                let armed = try await context.control.call(
                    "POST", "/v1/faults", json: #"{"type":"status","status":\#(status),"reason":"\#(reason)","scope":"channels","count":1}"#)
                #expect(armed.status == 201)
                let answer = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#)
                #expect(answer.status == expectedStatus && code(answer) == expectedCode, "\(reason): \(answer)")
            }
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels", key: send).body["channels"] as? [Any] != nil)
            #expect((try await context.api.call("GET", "/v1/apps/demo/channels", key: send).body["channels"] as? [Any])?.isEmpty == true)

            let made = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#)
            let id = try #require(made.body["id"] as? String)
            // A refusal other than "not registered" keeps the channel.
            _ = try await context.control.call(
                "POST", "/v1/faults", json: #"{"type":"status","status":400,"reason":"FeatureNotEnabled","scope":"channels"}"#)
            let kept = try await context.api.call("DELETE", "/v1/apps/demo/channels/\(self.pathID(id))", key: send)
            #expect(kept.status == 422 && code(kept) == "broadcast_not_enabled")
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels/\(self.pathID(id))", key: send).status == 200)
            // Gone at Apple already: forgotten here, 204.
            _ = try await context.control.call(
                "POST", "/v1/faults", json: #"{"type":"status","status":400,"reason":"ChannelNotRegistered","scope":"channels"}"#)
            #expect(try await context.api.call("DELETE", "/v1/apps/demo/channels/\(self.pathID(id))", key: send).status == 204)
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels/\(self.pathID(id))", key: send).status == 404)
        }
    }

    @Test("channels: the 10,000th channel of an app and environment is the last; the next is refused here, without asking APNs")
    func channelLimit() async throws {
        try await self.withServer { context in
            let (_, send) = try await self.setUp(context)
            for index in 0..<StoredChannel.maximumPerApp {
                let stored = StoredChannel(
                    appID: "demo", environment: .development, channelID: "c\(index)", messageStoragePolicy: 0, createdAt: Int64(index))
                #expect(try await context.server.store.createChannel(stored))
            }
            _ = try await context.control.call("DELETE", "/v1/counters")
            let refused = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#)
            #expect(refused.status == 422 && (refused.body["error"] as? [String: Any])?["code"] as? String == "channel_limit_reached", "\(refused)")
            #expect(try await self.emulatorChannels(context).isEmpty, "APNs was not asked")
            // The other environment has its own 10,000.
            #expect(try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"production"}"#).status == 201)
        }
    }

    @Test(
        "audience channel: 10,000 subscribers get one broadcast, sent as one request and recorded as one notification with one delivery",
        arguments: StoreDriver.enabled)
    func channelBroadcast(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (_, send) = try await self.setUp(context)
            func code(_ answer: (status: Int, body: [String: Any])) -> String? { (answer.body["error"] as? [String: Any])?["code"] as? String }
            let made = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#)
            let id = try #require(made.body["id"] as? String)
            // Two subscribers through the emulator's control API, the rest through its state (the same call, without 10,000 HTTP round trips).
            var tokens: [String] = []
            for _ in 0..<2 {
                let token = try await self.virtualDevice(context, kind: "liveactivity")
                #expect(try await context.control.call("POST", "/v1/devices/\(token)/channels", json: #"{"channelId":"\#(id)"}"#).status == 200)
                tokens.append(token)
            }
            let emulator = try #require(context.server.emulator)
            for _ in 0..<9_998 {
                let device = emulator.state.createDevice(
                    bundleID: "com.example.app", environment: .development, kind: .liveactivity, now: emulator.clock.nowMilliseconds)
                #expect(emulator.state.subscribe(token: device.token, channelID: id) != nil)
            }
            #expect(try await context.control.call("DELETE", "/v1/counters").status < 300)

            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"channel":"\#(id)"},"aps":{"timestamp":1,"event":"update","content-state":{"score":3}}}"#)
            #expect(sent.status == 202 && sent.body["deliveries"] as? Int == 1, "\(sent)")
            let notificationID = try #require(sent.body["id"] as? String)
            let counters = try await context.control.call("GET", "/v1/counters")
            #expect(counters.body["accepted"] as? Int == 1, "one request: \(counters.body)")
            #expect(counters.body["delivered"] as? Int == 10_000, "\(counters.body)")
            let requests = try await context.control.call("GET", "/v1/requests?limit=100")
            let paths = (requests.body["requests"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
            #expect(paths.filter { $0.hasPrefix("/4/broadcasts/") } == ["/4/broadcasts/apps/com.example.app"], "\(paths)")
            let inbox = try await context.control.call("GET", "/v1/devices/\(tokens[0])/inbox")
            let received = (inbox.body["notifications"] as? [[String: Any]])?.last
            #expect(received?["channelId"] as? String == id && received?["priority"] as? Int == 5, "default priority 5: \(inbox.body)")
            let state = ((received?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["content-state"] as? [String: Any]
            #expect(state?["score"] as? Int == 3)

            let status = try await context.api.call("GET", "/v1/apps/demo/notifications/\(notificationID)", key: send)
            #expect(
                (status.body["counts"] as? [String: Int])?["sent"] == 1 && (status.body["counts"] as? [String: Int])?["pending"] ?? 0 == 0,
                "\(status.body)")
            let deliveries = status.body["deliveries"] as? [[String: Any]] ?? []
            #expect(deliveries.count == 1)
            #expect(deliveries.first?["token"] as? String == id && deliveries.first?["pushType"] as? String == "liveactivity")
            #expect(deliveries.first?["state"] as? String == "sent" && deliveries.first?["apnsId"] as? String != nil)
            let history = try await context.api.call("GET", "/v1/apps/demo/notifications", key: send)
            #expect((history.body["notifications"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [notificationID])

            // Only Live Activity pushes go to a channel; an unknown channel is 404; what APNs refuses is its code, and nothing is recorded.
            let alert = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send, json: #"{"audience":{"channel":"\#(id)"},"pushType":"alert","title":"Hi"}"#)
            #expect(alert.status == 400 && code(alert) == "bad_push_type", "\(alert)")
            let scheduled = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"channel":"\#(id)"},"scheduledAt":1,"aps":{"timestamp":1,"event":"update","content-state":{}}}"#)
            #expect(scheduled.status == 400, "\(scheduled)")
            let unknown = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"channel":"AAAA"},"aps":{"timestamp":1,"event":"update","content-state":{}}}"#)
            #expect(unknown.status == 404 && code(unknown) == "channel_not_found", "\(unknown)")
            _ = try await context.control.call(
                "POST", "/v1/faults", json: #"{"type":"status","status":400,"reason":"ChannelNotRegistered","scope":"broadcast"}"#)
            let gone = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"channel":"\#(id)"},"aps":{"timestamp":2,"event":"update","content-state":{}}}"#)
            #expect(gone.status == 404 && code(gone) == "channel_not_found", "\(gone)")
            let after = try await context.api.call("GET", "/v1/apps/demo/notifications", key: send)
            #expect((after.body["notifications"] as? [[String: Any]])?.count == 1)
        }
    }

    @Test(
        "a broadcast on a channel that keeps the most recent message is kept for an offline subscriber (its expiration is not 0); one that keeps none refuses a later expiration",
        arguments: StoreDriver.enabled)
    func storedBroadcast(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (_, send) = try await self.setUp(context)
            let made = try await context.api.call(
                "POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox","messageStoragePolicy":1}"#)
            let kept = try #require(made.body["id"] as? String)
            let token = try await self.virtualDevice(context, kind: "liveactivity")
            #expect(try await context.control.call("POST", "/v1/devices/\(token)/channels", json: #"{"channelId":"\#(kept)"}"#).status == 200)
            #expect(try await context.control.call("PATCH", "/v1/devices/\(token)", json: #"{"online":false}"#).status == 200)
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"channel":"\#(kept)"},"aps":{"timestamp":1,"event":"update","content-state":{"score":7}}}"#)
            #expect(sent.status == 202, "\(sent.body)")
            #expect(try await context.control.call("PATCH", "/v1/devices/\(token)", json: #"{"online":true}"#).status == 200)
            let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
            let received = (inbox.body["notifications"] as? [[String: Any]]) ?? []
            #expect(received.count == 1 && received.first?["channelId"] as? String == kept, "kept for the offline subscriber: \(inbox.body)")

            let none = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#)
            let unkept = try #require(none.body["id"] as? String)
            let later = Int64(Date().timeIntervalSince1970) + 600
            let refused = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"channel":"\#(unkept)"},"expiration":\#(later),"aps":{"timestamp":1,"event":"update","content-state":{}}}"#)
            #expect(
                refused.status == 400 && (refused.body["error"] as? [String: Any])?["code"] as? String == "bad_expiration", "\(refused.body)")
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
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
            let policy = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox","messageStoragePolicy":2}"#)
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
            #expect((try await context.api.call("GET", "/v1/apps/demo/channels/a.b", key: send).body["error"] as? [String: Any])?["code"] as? String == "bad_channel_id")

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
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"status","status":400,"reason":"FeatureNotEnabled","scope":"channels"}"#)
            let kept = try await context.api.call("DELETE", "/v1/apps/demo/channels/\(self.pathID(id))", key: send)
            #expect(kept.status == 422 && code(kept) == "broadcast_not_enabled")
            #expect(try await context.api.call("GET", "/v1/apps/demo/channels/\(self.pathID(id))", key: send).status == 200)
            // Gone at Apple already: forgotten here, 204.
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"status","status":400,"reason":"ChannelNotRegistered","scope":"channels"}"#)
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
}

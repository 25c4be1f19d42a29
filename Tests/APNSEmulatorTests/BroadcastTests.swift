// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// iOS 18 broadcast channels: the channel-management API and sending on a channel.
@Suite(.heavy) struct BroadcastTests {
    static let update = #"{"aps":{"timestamp":1,"event":"update","content-state":{"score":"2-1"}}}"#

    func auth(_ fixture: EmulatorFixture) throws -> [(String, String)] {
        [("authorization", try fixture.bearer())]
    }

    func createChannel(_ fixture: EmulatorFixture, policy: Int = 1) async throws -> String {
        let response = try await fixture.development.send(
            CurlRequest(
                path: "/1/apps/\(EmulatorFixture.bundleID)/channels", headers: try self.auth(fixture),
                json: #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#
            )
        )
        #expect(response.status == 201)
        #expect(response.body.isEmpty)
        #expect(UUIDText.isCanonical(response.headers["apns-request-id"] ?? ""))
        return try #require(response.headers["apns-channel-id"])
    }

    func broadcast(
        _ fixture: EmulatorFixture, channel: String?, extra: [(String, String)] = [], body: String = BroadcastTests.update
    ) async throws -> CurlResponse {
        var headers = try self.auth(fixture) + [("apns-push-type", "liveactivity")] + extra
        if let channel { headers.append(("apns-channel-id", channel)) }
        return try await fixture.development.send(CurlRequest(path: "/4/broadcasts/apps/\(EmulatorFixture.bundleID)", headers: headers, json: body))
    }

    @Test("create, read, list and delete channels as Apple documents them")
    func channelManagement() async throws {
        try await withEmulatorFixture { fixture in
            let channel = try await self.createChannel(fixture, policy: 0)
            #expect(Base64URL.decode(channel) != nil)
            let path = "/1/apps/\(EmulatorFixture.bundleID)/channels"
            let read = try await fixture.development.send(
                CurlRequest(method: "GET", path: path, headers: try self.auth(fixture) + [("apns-channel-id", channel)]))
            #expect(read.status == 200)
            #expect(read.json?["message-storage-policy"] as? Int == 0)
            #expect(read.json?["push-type"] as? String == "LiveActivity")
            let list = try await fixture.development.send(
                CurlRequest(method: "GET", path: "/1/apps/\(EmulatorFixture.bundleID)/all-channels", headers: try self.auth(fixture)))
            #expect(list.json?["channels"] as? [String] == [channel])
            let deleted = try await fixture.development.send(
                CurlRequest(method: "DELETE", path: path, headers: try self.auth(fixture) + [("apns-channel-id", channel)]))
            #expect(deleted.status == 204)
            let gone = try await fixture.development.send(
                CurlRequest(method: "GET", path: path, headers: try self.auth(fixture) + [("apns-channel-id", channel)]))
            #expect(gone.reason == "ChannelNotRegistered")
            // Channels belong to one environment.
            let production = try await fixture.production.send(
                CurlRequest(method: "GET", path: "/1/apps/\(EmulatorFixture.bundleID)/all-channels", headers: try self.auth(fixture)))
            #expect(production.json?["channels"] as? [String] == [])
        }
    }

    @Test("a broadcast reaches online subscribers; a storing channel keeps it for offline ones")
    func delivery() async throws {
        try await withEmulatorFixture { fixture in
            let channel = try await self.createChannel(fixture, policy: 1)
            let online = try await fixture.createDevice(kind: "liveactivity")
            let offline = try await fixture.createDevice(kind: "liveactivity", online: false)
            let bystander = try await fixture.createDevice(kind: "liveactivity")
            for token in [online, offline] {
                #expect(try await fixture.control("POST", "/v1/devices/\(token)/channels", json: #"{"channelId":"\#(channel)"}"#).status == 200)
            }
            let response = try await self.broadcast(fixture, channel: channel, extra: [("apns-expiration", String(fixture.clock.nowSeconds + 3600))])
            #expect(response.status == 200, "\(response.body)")
            #expect(UUIDText.isCanonical(response.headers["apns-unique-id"] ?? ""))
            #expect(try await fixture.inbox(online).first?["channelId"] as? String == channel)
            #expect(try await fixture.inbox(bystander).isEmpty)
            #expect(try await fixture.inbox(offline).isEmpty)
            try await fixture.control("PATCH", "/v1/devices/\(offline)", json: #"{"online":true}"#)
            #expect(try await fixture.inbox(offline).count == 1)
        }
    }

    @Test("a Live Activity started with input-push-channel subscribes to the channel")
    func startSubscribes() async throws {
        try await withEmulatorFixture { fixture in
            let channel = try await self.createChannel(fixture)
            let device = try await fixture.createDevice(kind: "push-to-start")
            let start =
                #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"Match","attributes":{},"alert":{"title":"Kick-off"},"input-push-channel":"\#(channel)"}}"#
            let pushed = try await fixture.development.send(
                CurlRequest(
                    path: "/3/device/\(device)",
                    headers: try fixture.alertHeaders(topic: "com.example.app.push-type.liveactivity", pushType: "liveactivity"), json: start)
            )
            #expect(pushed.status == 200)
            #expect(try await self.broadcast(fixture, channel: channel).status == 200)
            #expect(try await fixture.inbox(device).count == 2)
        }
    }

    @Test("broadcast errors carry their reasons")
    func errors() async throws {
        try await withEmulatorFixture { fixture in
            let channel = try await self.createChannel(fixture, policy: 0)
            #expect(try await self.broadcast(fixture, channel: nil).reason == "MissingChannelId")
            #expect(try await self.broadcast(fixture, channel: "not base64!").reason == "BadChannelId")
            #expect(try await self.broadcast(fixture, channel: "AAAAAAAAAAAAAAAAAAAAAA==").reason == "ChannelNotRegistered")
            #expect(try await self.broadcast(fixture, channel: channel, extra: [("apns-expiration", "1999999999")]).reason == "BadExpirationDate")
            #expect(
                try await self.broadcast(fixture, channel: channel, extra: [("apns-topic", "com.example.app.push-type.liveactivity")]).reason
                    == "TopicDisallowed")
            #expect(try await self.broadcast(fixture, channel: channel, body: "{").reason == "BadRequestPayload")
            let tooLarge = #"{"aps":{"x":""#.padding(toLength: 5200, withPad: "x", startingAt: 0) + #""}}"#
            #expect(try await self.broadcast(fixture, channel: channel, body: tooLarge).status == 413)
            let noType = try await fixture.development.send(
                CurlRequest(
                    path: "/4/broadcasts/apps/\(EmulatorFixture.bundleID)", headers: try self.auth(fixture) + [("apns-channel-id", channel)],
                    json: Self.update)
            )
            #expect(noType.reason == "MissingPushType")
            let alertType = try await fixture.development.send(
                CurlRequest(
                    path: "/4/broadcasts/apps/\(EmulatorFixture.bundleID)",
                    headers: try self.auth(fixture) + [("apns-channel-id", channel), ("apns-push-type", "alert")], json: Self.update)
            )
            #expect(alertType.reason == "InvalidPushType")
            let path = "/1/apps/\(EmulatorFixture.bundleID)/channels"
            let extra = try await fixture.development.send(
                CurlRequest(
                    path: path, headers: try self.auth(fixture), json: #"{"message-storage-policy":0,"push-type":"LiveActivity","color":"red"}"#))
            #expect(extra.reason == "BadRequestParams")
            let notJSON = try await fixture.development.send(CurlRequest(path: path, headers: try self.auth(fixture), json: "policy=0"))
            #expect(notJSON.reason == "BadRequestPayload")
            let put = try await fixture.development.send(CurlRequest(method: "PUT", path: path, headers: try self.auth(fixture)))
            #expect(put.reason == "MethodNotAllowed")
            #expect(try await fixture.development.send(CurlRequest(path: path, headers: [], json: "{}")).reason == "MissingProviderToken")
            #expect(put.headers["apns-request-id"] != nil)
        }
    }

    @Test("a broadcast to the Live Activity topic instead of the bundle id is 400 TopicDisallowed, whatever the channel")
    func liveActivityTopicInPath() async throws {
        try await withEmulatorFixture { fixture in
            let channel = try await self.createChannel(fixture, policy: 0)
            let device = try await fixture.createDevice(kind: "liveactivity")
            #expect(try await fixture.control("POST", "/v1/devices/\(device)/channels", json: #"{"channelId":"\#(channel)"}"#).status == 200)
            for channelID in [channel, "AAAAAAAAAAAAAAAAAAAAAA=="] {
                let response = try await fixture.development.send(
                    CurlRequest(
                        path: "/4/broadcasts/apps/\(EmulatorFixture.bundleID).push-type.liveactivity",
                        headers: try self.auth(fixture) + [("apns-push-type", "liveactivity"), ("apns-channel-id", channelID)],
                        json: Self.update
                    )
                )
                #expect(response.status == 400)
                #expect(response.reason == "TopicDisallowed")
                #expect(UUIDText.isCanonical(response.headers["apns-request-id"] ?? ""))
            }
            #expect(try await fixture.inbox(device).isEmpty)
            // Credentials still come first: without them the answer is about the token.
            let anonymous = try await fixture.development.send(
                CurlRequest(
                    path: "/4/broadcasts/apps/\(EmulatorFixture.bundleID).push-type.liveactivity",
                    headers: [("apns-push-type", "liveactivity"), ("apns-channel-id", channel)], json: Self.update
                )
            )
            #expect(anonymous.reason == "MissingProviderToken")
            // The channel API names the app the same way.
            let create = try await fixture.development.send(
                CurlRequest(
                    path: "/1/apps/\(EmulatorFixture.bundleID).push-type.liveactivity/channels", headers: try self.auth(fixture),
                    json: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#
                )
            )
            #expect(create.reason == "TopicDisallowed")
            // The bundle id itself still works.
            #expect(try await self.broadcast(fixture, channel: channel).status == 200)
            #expect(try await fixture.inbox(device).count == 1)
        }
    }
}

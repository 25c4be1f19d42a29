// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Broadcast channels in the store, on every driver: per app and environment, Apple's id kept
/// once, gone with its app.
@Suite(.heavy) struct ChannelStoreContractTests {
    func channel(
        _ id: String, _ environment: APNSEnvironment = .development, app: String = "demo", policy: Int = 0, at: Int64 = 10
    )
        -> StoredChannel
    {
        StoredChannel(appID: app, environment: environment, channelID: id, messageStoragePolicy: policy, createdAt: at)
    }

    @Test("create, list by app and environment oldest first, read, delete; an id is kept once", arguments: Driver.enabled)
    func lifecycle(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            try await store.createApp(App(id: "other", bundleID: "com.example.other", createdAt: 1))
            #expect(try await store.createChannel(self.channel("Yg==", at: 20)))
            #expect(try await store.createChannel(self.channel("QQ==", policy: 1, at: 10)))
            #expect(try await store.createChannel(self.channel("QQ==", .production)))
            #expect(try await store.createChannel(self.channel("QQ==", app: "other")))
            #expect(try await store.createChannel(self.channel("QQ==", policy: 0, at: 99)) == false, "Apple's id is kept once")
            let development = try await store.channels(appID: "demo", environment: .development)
            #expect(development.map(\.channelID) == ["QQ==", "Yg=="])
            #expect(development.first == self.channel("QQ==", policy: 1, at: 10))
            #expect(try await store.channels(appID: "demo", environment: .production).map(\.channelID) == ["QQ=="])
            #expect(try await store.channel(appID: "demo", environment: .development, channelID: "Yg==") == self.channel("Yg==", at: 20))
            #expect(try await store.channel(appID: "demo", environment: .production, channelID: "Yg==") == nil)
            #expect(try await store.deleteChannel(appID: "demo", environment: .development, channelID: "QQ=="))
            #expect(try await store.deleteChannel(appID: "demo", environment: .development, channelID: "QQ==") == false)
            #expect(try await store.channels(appID: "demo", environment: .development).map(\.channelID) == ["Yg=="])
            #expect(try await store.channel(appID: "other", environment: .development, channelID: "QQ==") != nil)
        }
    }

    @Test("a broadcast is recorded as one notification with one sent delivery (the channel's), listed, and never claimed", arguments: Driver.enabled)
    func broadcastRecord(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let payload = Array(#"{"aps":{"event":"update","content-state":{"a":1},"timestamp":1}}"#.utf8)
            let spec = NotificationSpec(audience: .channel("QQ=="), pushType: .liveactivity, priority: .throttled, expiration: 0, payload: payload)
            try await store.recordBroadcast(
                BroadcastRecord(
                    appID: "demo", id: "n1", bundleID: "com.example.app", spec: spec, environment: .production, channelID: "QQ==", requestID: "r-1",
                    latencyMilliseconds: 7, now: 1_000))
            let status = try #require(try await store.notification(appID: "demo", id: "n1", deliveryLimit: 10))
            #expect(status.counts == [.sent: 1], "one delivery, nothing pending")
            #expect(status.summary.audienceSize == 1 && !status.summary.expanding && status.summary.createdAt == 1_000)
            #expect(status.summary.content?.pushType == .liveactivity && status.summary.content?.priority == 5)
            #expect(status.summary.content?.targetingJSON.flatMap(Targeting.init(jsonString:))?.audience == .channel("QQ=="))
            let delivery = try #require(status.deliveries.first)
            #expect(status.deliveries.count == 1)
            #expect(delivery.token == "QQ==" && delivery.route == .production && delivery.pushType == .liveactivity)
            #expect(delivery.state == .sent && delivery.apnsID == "r-1" && delivery.status == 200 && delivery.latencyMilliseconds == 7)
            #expect(try await store.notifications(appID: "demo", limit: 10, before: nil).map(\.id) == ["n1"])
            #expect(try await store.claimDeliveries(limit: 10, now: 10_000_000, leaseMilliseconds: 1000).isEmpty, "nothing to send")
        }
    }
}

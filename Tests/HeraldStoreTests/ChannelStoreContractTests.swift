// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Broadcast channels in the store, on every driver: per app and environment, Apple's id kept
/// once, gone with its app.
@Suite struct ChannelStoreContractTests {
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
}

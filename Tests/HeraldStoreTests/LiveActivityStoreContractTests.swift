// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Live Activities in the store, on every driver: kept once per app and id, listed newest first,
/// updated and ended only while active, and the update tokens registered with an activity's id.
@Suite(.heavy) struct LiveActivityStoreContractTests {
    func activity(_ id: String, at: Int64, channel: String? = nil) -> StoredLiveActivity {
        StoredLiveActivity(
            appID: "demo", id: id, attributesType: "GameAttributes", audienceJSON: Targeting(audience: .users(["ann"])).jsonString,
            channelID: channel, environment: channel == nil ? nil : .development, contentState: #"{"score":0}"#, startNotificationID: "n-\(id)",
            startedAt: at)
    }

    func token(_ n: Int) throws -> DeviceToken {
        let hex = String(n, radix: 16)
        return try DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
    }

    @Test("create, read, list newest first (active only on request); an id is kept once per app", arguments: StoreDriver.enabled)
    func lifecycle(driver: StoreDriver) async throws {
        try await driver.withStore { store async throws in
            try await store.createApp(App(id: "other", bundleID: "com.example.other", createdAt: 1))
            #expect(try await store.createLiveActivity(self.activity("a1", at: 10)))
            #expect(try await store.createLiveActivity(self.activity("a2", at: 20, channel: "QQ==")))
            #expect(try await store.createLiveActivity(self.activity("a1", at: 99)) == false, "an id is kept once")
            var other = self.activity("a1", at: 5)
            other.appID = "other"
            #expect(try await store.createLiveActivity(other))

            let read = try #require(try await store.liveActivity(appID: "demo", id: "a2"))
            #expect(read == self.activity("a2", at: 20, channel: "QQ=="))
            #expect(read.isActive && read.users == ["ann"] && read.updatedAt == 20 && read.updates == 0)
            #expect(try await store.liveActivity(appID: "demo", id: "nope") == nil)
            #expect(try await store.liveActivities(appID: "demo", activeOnly: false, limit: 10).map(\.id) == ["a2", "a1"])
            #expect(try await store.liveActivities(appID: "demo", activeOnly: false, limit: 1).map(\.id) == ["a2"])
            // Paged: after a2 (its start and id) comes a1, then nothing; same start, lower id first.
            let afterA2 = LiveActivityPosition(startedAt: 20, id: "a2")
            #expect(try await store.liveActivities(appID: "demo", activeOnly: false, limit: 10, before: afterA2).map(\.id) == ["a1"])
            #expect(try await store.liveActivities(appID: "demo", activeOnly: false, limit: 10, before: .init(startedAt: 10, id: "a1")).isEmpty)
            #expect(
                try await store.liveActivities(appID: "demo", activeOnly: false, limit: 10, before: .init(startedAt: 20, id: "a3")).map(\.id) == [
                    "a2", "a1",
                ])

            #expect(try await store.claimLiveActivityUpdate(appID: "demo", id: "a1", expectedUpdates: 0, contentState: #"{"score":1}"#, now: 30))
            try await store.setLiveActivityNotification(appID: "demo", id: "a1", notificationID: "u1", now: 30)
            #expect(try await store.claimLiveActivityUpdate(appID: "demo", id: "a1", expectedUpdates: 1, contentState: #"{"score":2}"#, now: 40))
            let updated = try #require(try await store.liveActivity(appID: "demo", id: "a1"))
            #expect(updated.updates == 2 && updated.updatedAt == 40 && updated.contentState == #"{"score":2}"#)
            #expect(updated.lastNotificationID == "u1", "an update no token received keeps the last notification")

            #expect(try await store.endLiveActivity(appID: "demo", id: "a1", reason: .userChanged, at: 50))
            #expect(try await store.endLiveActivity(appID: "demo", id: "a1", reason: .ended, at: 60) == false, "ended once")
            #expect(try await store.claimLiveActivityUpdate(appID: "demo", id: "a1", expectedUpdates: 2, contentState: "{}", now: 70) == false)
            let ended = try #require(try await store.liveActivity(appID: "demo", id: "a1"))
            #expect(!ended.isActive && ended.endedAt == 50 && ended.endReason == .userChanged && ended.updates == 2)
            #expect(ended.lastNotificationID == "u1" && ended.contentState == #"{"score":2}"#)
            #expect(try await store.liveActivities(appID: "demo", activeOnly: true, limit: 10).map(\.id) == ["a2"])
            #expect(try await store.endLiveActivity(appID: "demo", id: "nope", reason: .ended, at: 1) == false)
            #expect(try await store.liveActivity(appID: "other", id: "a1")?.isActive == true, "per app")
        }
    }

    @Test(
        "claims: an update compares and swaps its count, an end claims once and returns the newest state; both undone only as claimed",
        arguments: StoreDriver.enabled)
    func claims(driver: StoreDriver) async throws {
        try await driver.withStore { store async throws in
            #expect(try await store.createLiveActivity(self.activity("a1", at: 10)))
            #expect(try await store.claimLiveActivityUpdate(appID: "demo", id: "a1", expectedUpdates: 0, contentState: #"{"score":1}"#, now: 20))
            #expect(
                try await store.claimLiveActivityUpdate(appID: "demo", id: "a1", expectedUpdates: 0, contentState: #"{"score":9}"#, now: 21) == false,
                "another update won")
            #expect(try await store.claimLiveActivityUpdate(appID: "demo", id: "a1", expectedUpdates: 1, contentState: #"{"score":2}"#, now: 22))
            try await store.undoLiveActivityUpdate(
                appID: "demo", id: "a1", claimedUpdates: 2, contentState: #"{"score":2}"#, previousContentState: #"{"score":1}"#)
            var read = try #require(try await store.liveActivity(appID: "demo", id: "a1"))
            #expect(read.updates == 1 && read.contentState == #"{"score":1}"#, "undone")
            try await store.setLiveActivityNotification(appID: "demo", id: "a1", notificationID: "u1", now: 23)
            #expect(try await store.liveActivity(appID: "demo", id: "a1")?.lastNotificationID == "u1")

            #expect(try await store.claimLiveActivityEnd(appID: "demo", id: "a1", at: 30) == #"{"score":1}"#)
            #expect(try await store.claimLiveActivityEnd(appID: "demo", id: "a1", at: 31) == nil, "claimed once")
            #expect(try await store.claimLiveActivityUpdate(appID: "demo", id: "a1", expectedUpdates: 1, contentState: "{}", now: 32) == false)
            try await store.undoLiveActivityEnd(appID: "demo", id: "a1", at: 31)
            #expect(try await store.liveActivity(appID: "demo", id: "a1")?.endedAt == 30, "not that claim")
            try await store.undoLiveActivityEnd(appID: "demo", id: "a1", at: 30)
            read = try #require(try await store.liveActivity(appID: "demo", id: "a1"))
            #expect(read.isActive && read.endReason == nil)
            #expect(try await store.claimLiveActivityEnd(appID: "demo", id: "nope", at: 1) == nil)
        }
    }

    @Test("one active activity per channel; an activity deleted (its start not created) is gone", arguments: StoreDriver.enabled)
    func channelAndDelete(driver: StoreDriver) async throws {
        try await driver.withStore { store async throws in
            #expect(try await store.createLiveActivity(self.activity("a1", at: 10, channel: "QQ==")))
            #expect(try await store.createLiveActivity(self.activity("a2", at: 11, channel: "QQ==")) == false, "the channel is in use")
            #expect(try await store.createLiveActivity(self.activity("t1", at: 12)))
            #expect(try await store.createLiveActivity(self.activity("t2", at: 13)), "activities without a channel do not collide")
            #expect(try await store.claimLiveActivityEnd(appID: "demo", id: "a1", at: 20) != nil)
            #expect(try await store.createLiveActivity(self.activity("a2", at: 21, channel: "QQ==")), "free once it ended")
            #expect(try await store.deleteLiveActivity(appID: "demo", id: "a2"))
            #expect(try await store.deleteLiveActivity(appID: "demo", id: "a2") == false)
            #expect(try await store.liveActivity(appID: "demo", id: "a2") == nil)
        }
    }

    @Test("an activity's tokens: the active update tokens registered with its id, with their users", arguments: StoreDriver.enabled)
    func tokens(driver: StoreDriver) async throws {
        try await driver.withStore { store async throws in
            for (n, kind, activity, user) in [
                (1, DeviceKind.liveActivity, "a1", "ann"), (2, .liveActivity, "a1", nil), (3, .liveActivity, "a2", "ann"),
                (4, .pushToStart, nil, "ann"), (5, .liveActivity, "a1", "bob"),
            ] as [(Int, DeviceKind, String?, String?)] {
                _ = try await store.register(
                    appID: "demo",
                    DeviceRegistration(
                        token: try self.token(n), kind: kind, userID: user, activityID: activity, attributesType: kind == .pushToStart ? "G" : nil),
                    now: 1)
            }
            #expect(try await store.unregister(appID: "demo", token: try self.token(5).hex))
            let tokens = try await store.activityTokens(appID: "demo", activityID: "a1")
            #expect(tokens == [ActivityToken(token: try self.token(1).hex, userID: "ann"), ActivityToken(token: try self.token(2).hex, userID: nil)])
            #expect(try await store.activityTokens(appID: "demo", activityID: "a9").isEmpty)
        }
    }

    @Test(
        "erasing a user takes them out of the activities started for them: one of theirs alone is deleted, a shared one stays for the others",
        arguments: StoreDriver.enabled)
    func erasure(driver: StoreDriver) async throws {
        try await driver.withStore { store async throws in
            var bobs = self.activity("b1", at: 10)
            bobs.audienceJSON = Targeting(audience: .users(["bob", "annie"])).jsonString
            var shared = self.activity("s1", at: 10)
            shared.audienceJSON = Targeting(audience: .users(["ann", "bob"])).jsonString
            var tagged = self.activity("t1", at: 10)
            tagged.audienceJSON = Targeting(audience: .tags(["ann"], matchAll: false)).jsonString
            for activity in [self.activity("a1", at: 10), bobs, shared, tagged] { #expect(try await store.createLiveActivity(activity)) }
            _ = try await store.eraseUser(
                appID: "demo", userID: "ann", audit: AuditRecord(at: 40, keyID: "hk_admin", action: "user.erase", appID: "demo", subject: "ann"))
            #expect(try await store.liveActivity(appID: "demo", id: "a1") == nil)
            #expect(try await store.liveActivities(appID: "demo", activeOnly: false, limit: 10).map(\.id).sorted() == ["b1", "s1", "t1"])
            let left = try #require(try await store.liveActivity(appID: "demo", id: "s1"))
            #expect(left.users == ["bob"] && !left.audienceJSON.contains("ann"), "\(left.audienceJSON)")
            #expect(try await store.liveActivity(appID: "demo", id: "b1")?.users == ["bob", "annie"])
        }
    }
}

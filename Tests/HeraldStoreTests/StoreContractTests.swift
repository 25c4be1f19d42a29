// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldSQLite
import HeraldTesting
import Logging
import Testing

@testable import HeraldPostgres

typealias Driver = StoreDriver

extension StoreDriver {
    /// Runs `body` with a new, empty store of this driver holding one app, "demo": a real SQLite
    /// file, or a new database on the PostgreSQL test server.
    func withStore<Result: Sendable>(_ body: (any HeraldStore) async throws -> Result) async throws -> Result {
        switch self {
        case .sqlite:
            let directory = try TemporaryDirectory(prefix: "herald-store")
            defer { directory.remove() }
            let store = try await SQLiteStore(path: directory.path + "/herald.sqlite")
            try await store.createApp(App(id: "demo", bundleID: "com.example.app", createdAt: 1))
            return try await body(store)
        case .postgres:
            return try await PostgresTestDatabase.with { database in
                try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { store in
                    try await store.createApp(App(id: "demo", bundleID: "com.example.app", createdAt: 1))
                    return try await body(store)
                }
            }
        }
    }
}

/// The store contract, written once and run against every driver, so they cannot drift apart.
@Suite(.heavy) struct StoreContractTests {
    /// Without a PostgreSQL server this is reported as skipped, with how to run it.
    @Test(
        "PostgreSQL: migrations are versioned like SQLite's and applied once, also by processes starting together",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage))
    )
    func postgresMigrations() async throws {
        try await PostgresTestDatabase.with { database in
            let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                for _ in 0..<3 {
                    group.addTask { try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { try await $0.migrate() } }
                }
                var all: [Int] = []
                for try await versions in group { all += versions }
                return all
            }
            #expect(applied.isEmpty, "withStore migrates before the body; migrating again applies nothing")
            #expect(
                try await database.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_version")
                    == "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20")
            #expect(PostgresStore.schemaVersion == 20)
            #expect(
                try await database.psql(
                    "SELECT string_agg(collation_name, ',' ORDER BY column_name) FROM information_schema.columns WHERE table_name = 'frequency_counts' AND data_type = 'text' AND column_name <> 'times'"
                ) == "C,C,C", "the counts' key is compared byte by byte (17)")
            // Migration 18 again, over rows as 17 kept them: each device's own row moves into its
            // row-full's (64 ids to a row), a user's stays.
            _ = try await database.psql(
                """
                INSERT INTO apps (id, bundle_id, created_at) VALUES ('demo', 'com.example.app', 1);
                INSERT INTO frequency_counts VALUES ('demo', 'u:ann', '', '1000,2000'), ('demo', 'd:70', '', '3000'),
                    ('demo', 'd:65', '', '1000,4000'), ('demo', 'd:7', 'news', '5000');
                DELETE FROM schema_version WHERE version >= 18;
                """)
            let again = try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { _ in
                try await database.psql(
                    "SELECT string_agg(subject || '=' || category || '=' || times, ' ' ORDER BY subject, category) FROM frequency_counts")
            }
            #expect(again == "b:0=news=7:5000 b:1==65:1000,4000;70:3000 u:ann==1000,2000")
        }
    }

    func token(_ n: Int, bytes: Int = 32) throws -> DeviceToken {
        let hex = String(n, radix: 16)
        return try DeviceToken(hex: String(repeating: "0", count: bytes * 2 - hex.count) + hex)
    }

    @Test("registering is an idempotent upsert that moves the token to the new user and replaces its tags", arguments: Driver.enabled)
    func upsert(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let first = try await store.register(
                appID: "demo", DeviceRegistration(token: try self.token(1), userID: "ann", tags: ["a", "b"]), now: 10)
            let again = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), userID: "bob", tags: ["c"]), now: 20)
            #expect(first.id == again.id)
            #expect(again.registration.userID == "bob")
            #expect(again.registration.tags == ["c"])
            #expect(again.createdAt == 10)
            #expect(again.lastRegisteredAt == 20)
            #expect(try await store.devices(appID: "demo", DeviceQuery(userID: "ann")).isEmpty)
            #expect(try await store.devices(appID: "demo", DeviceQuery(tag: "c")).count == 1)
            // The earlier tags are gone from the store, not only from the answer.
            #expect(try await store.devices(appID: "demo", DeviceQuery(tag: "a")).isEmpty)
            #expect(try await store.device(appID: "demo", token: try self.token(1).hex)?.registration.tags == ["c"])
            #expect(try await store.devices(appID: "demo", DeviceQuery(tokenPrefix: "0000")).count == 1)
            #expect(try await store.unregister(appID: "demo", token: try self.token(1).hex))
            #expect(try await store.unregister(appID: "demo", token: try self.token(1).hex) == false)
        }
    }

    @Test("a notification expands to one delivery per matching active device, with push type and topic by kind", arguments: Driver.enabled)
    func expansion(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), userID: "ann", tags: ["news", "sport"]), now: 1)
            _ = try await store.register(
                appID: "demo", DeviceRegistration(token: try self.token(2), kind: .voip, userID: "ann", tags: ["news"]), now: 1)
            _ = try await store.register(
                appID: "demo", DeviceRegistration(token: try self.token(3, bytes: 80), kind: .liveActivity, userID: "bob", activityID: "game-1"),
                now: 1)
            func send(_ audience: Audience, pushType: PushType? = nil) async throws -> Int {
                let spec = NotificationSpec(audience: audience, pushType: pushType, payload: Array(#"{"aps":{}}"#.utf8))
                return try await store.createNotification(appID: "demo", id: UUIDText.random(), bundleID: "com.example.app", spec, now: 5).deliveries
            }
            #expect(try await send(.all) == 3)
            #expect(try await send(.users(["ann"])) == 2)
            #expect(try await send(.tags(["news"], matchAll: false)) == 2)
            #expect(try await send(.tags(["news", "sport"], matchAll: true)) == 1)
            #expect(try await send(.tokens([try self.token(2).hex, "ffff"])) == 1)
            #expect(try await send(.all, pushType: .background) == 1, "only alert tokens can take background pushes")
            let claimed = try await store.claimDeliveries(limit: 100, now: 5, leaseMilliseconds: 1000)
            let voip = try #require(claimed.first { $0.token == (try? self.token(2).hex) })
            #expect(voip.pushType == .voip)
            #expect(voip.topic == "com.example.app.voip")
            let activity = try #require(claimed.first { $0.pushType == .liveactivity })
            #expect(activity.topic == "com.example.app.push-type.liveactivity")
            #expect(try await store.claimDeliveries(limit: 100, now: 6, leaseMilliseconds: 1000).isEmpty, "leased")
            #expect(try await store.claimDeliveries(limit: 100, now: 1006, leaseMilliseconds: 1000).count == claimed.count, "lease expired")
        }
    }

    @Test(
        "an audience is expanded chunk by chunk into leased deliveries, from the devices there at acceptance; cancelling stops it",
        arguments: Driver.enabled)
    func chunks(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            for n in 1...25 {
                _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n), tags: n % 2 == 0 ? ["even"] : []), now: 1)
            }
            let spec = NotificationSpec(audience: .all, payload: Array("{}".utf8))
            #expect(try await store.createNotification(appID: "demo", id: "n", bundleID: "com.example.app", spec, now: 10).deliveries == 25)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(26)), now: 11)
            var status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 100))
            #expect(status.summary.expanding)
            #expect(status.counts[.pending] == 25, "not expanded yet, still pending")
            #expect(status.deliveries.isEmpty)
            var seen: Set<Int64> = []
            for expected in [10, 10, 5] {
                let claimed = try await store.claimDeliveries(limit: 10, now: 20, leaseMilliseconds: 1000)
                #expect(claimed.count == expected)
                #expect(claimed.allSatisfy { $0.attempts == 1 && $0.notificationID == "n" && $0.topic == "com.example.app" })
                seen.formUnion(claimed.map(\.deviceID))
            }
            #expect(seen.count == 25, "each device once; the one registered after acceptance is not in the audience")
            #expect(try await store.claimDeliveries(limit: 10, now: 20, leaseMilliseconds: 1000).isEmpty)
            status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 100))
            #expect(!status.summary.expanding)
            #expect(status.counts[.pending] == 25 && status.deliveries.isEmpty, "in flight: a chunk's deliveries get their rows when recorded")
            let again = try await store.claimDeliveries(limit: 100, now: 1020, leaseMilliseconds: 1000)
            #expect(again.count == 25 && again.allSatisfy { $0.attempts == 2 }, "leases ran out: due again")
            try await store.record(again.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 1021)

            let tagged = NotificationSpec(audience: .tags(["even"], matchAll: false), payload: Array("{}".utf8))
            #expect(try await store.createNotification(appID: "demo", id: "m", bundleID: "com.example.app", tagged, now: 1030).deliveries == 12)
            #expect(try await store.claimDeliveries(limit: 5, now: 1040, leaseMilliseconds: 1000).count == 5)
            #expect(try await store.cancelNotification(appID: "demo", id: "m", now: 1050))
            #expect(try await store.claimDeliveries(limit: 100, now: 5000, leaseMilliseconds: 1000).isEmpty, "nothing more expanded or due")
            status = try #require(try await store.notification(appID: "demo", id: "m", deliveryLimit: 100))
            #expect(!status.summary.expanding && status.summary.cancelledAt == 1050)
            #expect(status.counts[.failed] == 5 && status.counts[.pending] == nil)
            #expect(try await store.cancelNotification(appID: "demo", id: "m", now: 1060) == false)
            let recent = try await store.notifications(appID: "demo", limit: 10, before: nil)
            #expect(recent.map(\.id) == ["m", "n"])
            #expect(try await store.deliveries(appID: "demo", token: try self.token(2).hex, limit: 10).map(\.notificationID) == ["m", "n"])
        }
    }

    @Test("a removed device's id is never given to another, so a scheduled notification cannot reach someone else", arguments: Driver.enabled)
    func noIDReuse(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let ann = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), userID: "ann"), now: 1)
            let spec = NotificationSpec(audience: .users(["ann"]), payload: Array("{}".utf8), scheduledAt: 1000)
            #expect(try await store.createNotification(appID: "demo", id: "later", bundleID: "com.example.app", spec, now: 2).deliveries == 1)
            #expect(try await store.unregister(appID: "demo", token: try self.token(1).hex))
            let bob = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(2), userID: "bob"), now: 3)
            #expect(bob.id != ann.id)
            #expect(
                try await store.claimDeliveries(limit: 10, now: 1000, leaseMilliseconds: 1000).isEmpty, "ann's device is gone; bob was never in it")
        }
    }

    @Test(
        "retention deletes finished deliveries older than the cutoff, in batches, and then their empty notifications; never pending ones",
        arguments: Driver.enabled)
    func retention(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            for n in 1...5 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
            let spec = NotificationSpec(audience: .all, payload: Array("{}".utf8))
            _ = try await store.createNotification(appID: "demo", id: "old", bundleID: "com.example.app", spec, now: 10)
            let claimed = try await store.claimDeliveries(limit: 10, now: 10, leaseMilliseconds: 1000)
            // Four sent long ago, one still pending (a retry).
            try await store.record(
                claimed.dropFirst().map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }
                    + [
                        DeliveryResult(
                            claimed[0], outcome: .retry(status: 503, reason: "ServiceUnavailable", retryAt: 99_999), latencyMilliseconds: 1)
                    ],
                now: 20
            )
            _ = try await store.createNotification(appID: "demo", id: "new", bundleID: "com.example.app", spec, now: 5000)
            #expect(try await store.prune(before: 1000, limit: 3) == 3, "a batch")
            #expect(try await store.prune(before: 1000, limit: 3) == 1)
            #expect(try await store.prune(before: 1000, limit: 3) == 0)
            let old = try #require(try await store.notification(appID: "demo", id: "old", deliveryLimit: 10))
            #expect(old.deliveries.count == 1 && old.counts[.pending] == 1, "the pending retry and its notification stay")
            #expect(try await store.notification(appID: "demo", id: "new", deliveryLimit: 10) != nil, "newer than the cutoff")
            _ = try await store.cancelNotification(appID: "demo", id: "old", now: 30)
            #expect(try await store.prune(before: 1000, limit: 3) == 1)
            #expect(try await store.notification(appID: "demo", id: "old", deliveryLimit: 10) == nil, "empty and old: gone")
        }
    }

    @Test("an idempotency key returns the first notification", arguments: Driver.enabled)
    func idempotency(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1)), now: 1)
            let spec = NotificationSpec(audience: .all, payload: Array("{}".utf8), idempotencyKey: "k1")
            let first = try await store.createNotification(appID: "demo", id: "n1", bundleID: "com.example.app", spec, now: 2)
            let second = try await store.createNotification(appID: "demo", id: "n2", bundleID: "com.example.app", spec, now: 3)
            #expect(first.id == "n1" && !first.existing)
            #expect(second.id == "n1" && second.existing && second.deliveries == 1)
        }
    }

    @Test("410 invalidates unless the token was registered again after APNs's timestamp; both are audited", arguments: Driver.enabled)
    func invalidation(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1)), now: 100)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(2)), now: 300)
            _ = try await store.createNotification(
                appID: "demo", id: "n", bundleID: "com.example.app", NotificationSpec(audience: .all, payload: Array("{}".utf8)), now: 400)
            let claimed = try await store.claimDeliveries(limit: 10, now: 400, leaseMilliseconds: 1000)
            let recorded = try await store.record(
                claimed.map {
                    DeliveryResult(
                        $0, outcome: .failed(status: 410, reason: "Unregistered", invalidate: true, timestamp: 200), latencyMilliseconds: 3)
                },
                now: 401
            )
            #expect(recorded.applied == Set(claimed.map(\.id)))
            #expect(recorded.invalidated == Set(claimed.filter { $0.token == (try? self.token(1).hex) }.map(\.id)), "only the device it deactivated")
            let stale = try #require(try await store.device(appID: "demo", token: try self.token(1).hex))
            let renewed = try #require(try await store.device(appID: "demo", token: try self.token(2).hex))
            #expect(!stale.active && stale.invalidationReason == "Unregistered")
            #expect(renewed.active, "registered at 300, after APNs's timestamp 200")
            #expect(try await store.invalidations(appID: "demo", deviceID: stale.id).map(\.applied) == [true])
            #expect(try await store.invalidations(appID: "demo", deviceID: renewed.id).map(\.applied) == [false])
            let status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10))
            #expect(status.counts[.failed] == 2)
            // Registering again reactivates.
            #expect(try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1)), now: 500).active)
        }
    }

    @Test("a failing transaction writes nothing", arguments: Driver.enabled)
    func atomic(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            await #expect(throws: HeraldError.self) { try await store.createApp(App(id: "demo", bundleID: "x", createdAt: 2)) }
            #expect(try await store.apps().count == 1)
        }
    }

    @Test("API keys: looked up while active, listed with revoked ones; the last admin key cannot be revoked", arguments: Driver.enabled)
    func apiKeys(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            #expect(try await store.hasAPIKeys() == false)
            try await store.createAPIKey(id: "a1", hash: [1, 2, 3], scope: .admin, appID: nil, name: "first", now: 1)
            try await store.createAPIKey(id: "r1", hash: [4], scope: .register, appID: "demo", name: nil, now: 2)
            #expect(try await store.hasAPIKeys())
            let key = try #require(try await store.apiKey(id: "r1"))
            #expect(key.scope == .register && key.appID == "demo" && key.hash == [4] && key.name == nil)
            await #expect(throws: HeraldError.self) { try await store.revokeAPIKey(id: "a1", now: 3) }
            #expect(try await store.revokeAPIKey(id: "r1", now: 4))
            #expect(try await store.revokeAPIKey(id: "r1", now: 5) == false, "already revoked")
            #expect(try await store.apiKey(id: "r1") == nil)
            #expect(try await store.apiKeys().map(\.id) == ["a1", "r1"])
            #expect(try await store.apiKeys().last?.revokedAt == 4)
            try await store.setCredential(appID: "demo", environment: .development, sealed: [9, 9], now: 6)
            try await store.setCredential(appID: "demo", environment: .development, sealed: [7], now: 7)
            #expect(try await store.credentials(appID: "demo") == [.development: [7]], "replaced, not added")
        }
    }

    @Test("workers claiming a scheduled broadcast at once never get the same delivery, and together get every one", arguments: Driver.enabled)
    func concurrentClaims(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            for n in 1...600 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
            // Scheduled: it fires once, however many claim when its time comes.
            _ = try await store.createNotification(
                appID: "demo", id: "all", bundleID: "com.example.app", NotificationSpec(audience: .all, payload: Array("{}".utf8), scheduledAt: 20),
                now: 10)
            #expect(try await store.claimDeliveries(limit: 50, now: 19, leaseMilliseconds: 60_000).isEmpty, "not yet")
            let claims = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let batch = try await store.claimDeliveries(limit: 50, now: 20, leaseMilliseconds: 60_000)
                            if batch.isEmpty { return mine }
                            mine += batch.map(\.deviceID)
                        }
                    }
                }
                var all: [[Int64]] = []
                for try await claimed in group { all.append(claimed) }
                return all
            }
            let every = claims.flatMap { $0 }
            #expect(every.count == 600 && Set(every).count == 600, "each device exactly once")
        }
    }

    @Test("one idempotency key sent at once from many places makes one notification", arguments: Driver.enabled)
    func concurrentIdempotency(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1)), now: 1)
            let spec = NotificationSpec(audience: .all, payload: Array("{}".utf8), idempotencyKey: "once")
            let answers = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
                for n in 0..<8 {
                    group.addTask {
                        let created = try await store.createNotification(appID: "demo", id: "n\(n)", bundleID: "com.example.app", spec, now: 2)
                        return (created.id, created.existing)
                    }
                }
                var all: [(String, Bool)] = []
                for try await answer in group { all.append(answer) }
                return all
            }
            #expect(Set(answers.map(\.0)).count == 1, "every caller gets the same notification")
            #expect(answers.filter { !$0.1 }.count == 1, "exactly one created it")
            #expect(try await store.notifications(appID: "demo", limit: 10, before: nil).count == 1)
        }
    }

    @Test("local-time delivery waits for each device's own clock", arguments: Driver.enabled)
    func localTime(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), timeZone: "Asia/Tokyo"), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(2), timeZone: "America/New_York"), now: 1)
            let nine = try #require(LocalTime("2030-01-15T09:00:00"))
            let spec = NotificationSpec(audience: .all, payload: Array("{}".utf8), localTime: nine)
            _ = try await store.createNotification(appID: "demo", id: "morning", bundleID: "com.example.app", spec, now: 10)
            #expect(try await store.claimDeliveries(limit: 10, now: 10, leaseMilliseconds: 1000).isEmpty, "created, not yet due")
            let tokyo = nine.instant(timeZone: "Asia/Tokyo")
            let newYork = nine.instant(timeZone: "America/New_York")
            #expect(newYork - tokyo == 14 * 3_600_000)
            let first = try await store.claimDeliveries(limit: 10, now: tokyo, leaseMilliseconds: 86_400_000)
            #expect(first.map(\.token) == [try self.token(1).hex])
            #expect(try await store.claimDeliveries(limit: 10, now: newYork - 1, leaseMilliseconds: 1000).isEmpty)
            #expect(try await store.claimDeliveries(limit: 10, now: newYork, leaseMilliseconds: 1000).map(\.token) == [try self.token(2).hex])
        }
    }

    @Test(
        "an end-to-end encrypted notification reaches only keyed devices, with their keys; its plaintext is kept while any is pending",
        arguments: Driver.enabled)
    func encrypted(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let key = Array(repeating: UInt8(7), count: 32)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), publicKey: key, publicKeyType: "x25519"), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(2), publicKey: key, publicKeyType: "x25519"), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(3)), now: 1)
            let secret = Array(#"{"secret":1}"#.utf8)
            var spec = NotificationSpec(audience: .all, payload: secret)
            spec.placeholder = Array(#"{"aps":{}}"#.utf8)
            #expect(try await store.createNotification(appID: "demo", id: "e2e", bundleID: "com.example.app", spec, now: 10).deliveries == 2)
            let claimed = try await store.claimDeliveries(limit: 10, now: 20, leaseMilliseconds: 1000)
            #expect(claimed.count == 2 && claimed.allSatisfy { $0.publicKey == DevicePublicKey(type: "x25519", key: key) && $0.payload == secret })
            try await store.record(
                [
                    DeliveryResult(claimed[0], outcome: .sent(apnsID: nil), latencyMilliseconds: 1),
                    DeliveryResult(claimed[1], outcome: .retry(status: 503, reason: "ServiceUnavailable", retryAt: 3000), latencyMilliseconds: 1),
                ],
                now: 30
            )
            try await store.forgetPlaintext(notificationIDs: ["e2e"])
            let retried = try await store.claimDeliveries(limit: 10, now: 3000, leaseMilliseconds: 1000)
            #expect(retried.map(\.id) == [claimed[1].id] && retried.first?.payload == secret, "one still pending: the plaintext stays")
        }
    }

    @Test(
        "an encrypted broadcast's plaintext is forgotten when its chunk, claimed again after its lease, finds its devices gone",
        arguments: Driver.enabled)
    func encryptedChunkEmptied(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let key = Array(repeating: UInt8(7), count: 32)
            for n in 1...3 {
                _ = try await store.register(
                    appID: "demo", DeviceRegistration(token: try self.token(n), publicKey: key, publicKeyType: "x25519"), now: 1)
            }
            let secret = Array(#"{"secret":2}"#.utf8)
            var spec = NotificationSpec(audience: .all, payload: secret)
            spec.placeholder = Array(#"{"aps":{}}"#.utf8)
            _ = try await store.createNotification(appID: "demo", id: "e2e", bundleID: "com.example.app", spec, now: 10)
            // The whole audience in one chunk, claimed; then the process "dies" and every device is
            // removed before the lease ends.
            let claimed = try await store.claimDeliveries(limit: 10, now: 10, leaseMilliseconds: 1000)
            #expect(claimed.count == 3 && claimed.allSatisfy { $0.payload == secret })
            for n in 1...3 { #expect(try await store.unregister(appID: "demo", token: try self.token(n).hex)) }
            #expect(try await self.payloadLength(store, notificationID: "e2e") == Int64(secret.count), "kept while the chunk is in flight")
            // Claimed again: no device left, so the chunk ends with nothing sent, and with it the
            // last thing that needed the plaintext.
            #expect(try await store.claimDeliveries(limit: 10, now: 1010, leaseMilliseconds: 1000).isEmpty)
            #expect(try await self.payloadLength(store, notificationID: "e2e") == 0, "plaintext forgotten")
            #expect(try await store.claimDeliveries(limit: 10, now: 5000, leaseMilliseconds: 1000).isEmpty, "no chunk left")
        }
    }

    /// The stored payload's length in bytes, read from the database itself.
    func payloadLength(_ store: any HeraldStore, notificationID: String) async throws -> Int64? {
        if let store = store as? SQLiteStore {
            return try await store.database.read { db in
                try db.query("SELECT length(payload) FROM notifications WHERE id = ?", [.text(notificationID)]).first?.first?.int
            }
        }
        let store = try #require(store as? PostgresStore)
        return try await store.read { db in
            try await db.query("SELECT octet_length(payload)::bigint FROM notifications WHERE id = $1", [.text(notificationID)]).first?.int(0)
        }
    }

    /// The template and data a notification was sent with, as stored; nil when there are none.
    func storedTemplate(_ store: any HeraldStore, notificationID: String) async throws -> String? {
        if let store = store as? SQLiteStore {
            return try await store.database.read { db in
                try db.query("SELECT template FROM notifications WHERE id = ?", [.text(notificationID)]).first?.first?.string
            }
        }
        let store = try #require(store as? PostgresStore)
        return try await store.read { db in
            try await db.query("SELECT template FROM notifications WHERE id = $1", [.text(notificationID)]).first?.string(0)
        }
    }

    /// Each of `deliveries` accepted by APNs.
    func sent(_ deliveries: some Sequence<ClaimedDelivery>) -> [DeliveryResult] {
        deliveries.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }
    }

    /// Registers `devices` devices, sends notification "n" to all of them at 10, and claims it
    /// (one chunk, leased for 1 s).
    func broadcastClaimed(_ store: any HeraldStore, devices: Int) async throws -> [ClaimedDelivery] {
        for n in 1...devices { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
        _ = try await store.createNotification(
            appID: "demo", id: "n", bundleID: "com.example.app", NotificationSpec(audience: .all, payload: Array("{}".utf8)), now: 10)
        return try await store.claimDeliveries(limit: 10, now: 10, leaseMilliseconds: 1000)
    }

    @Test("a chunk whose lease ran out is claimed again for the devices without a delivery, split when there is less room", arguments: Driver.enabled)
    func chunkReclaim(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let first = try await self.broadcastClaimed(store, devices: 6)
            #expect(first.count == 6 && Set(first.compactMap(\.chunk)).count == 1 && Set(first.map(\.id)).count == 6)
            // Two recorded, then the process "dies": the other four wait for the lease.
            let recorded = try await store.record(
                first.prefix(2).map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 20)
            #expect(recorded.applied == Set(first.prefix(2).map(\.id)))
            #expect(try await store.claimDeliveries(limit: 10, now: 500, leaseMilliseconds: 1000).isEmpty, "still leased")
            #expect(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)?.counts == [.sent: 2, .pending: 4])
            // Room for three: the chunk is split; the rest is due at once.
            let again = try await store.claimDeliveries(limit: 3, now: 1010, leaseMilliseconds: 1000)
            #expect(again.count == 3 && again.allSatisfy { $0.attempts == 2 })
            let rest = try await store.claimDeliveries(limit: 10, now: 1010, leaseMilliseconds: 1000)
            #expect(rest.count == 1)
            let resent = again + rest
            #expect(Set(resent.map(\.deviceID)) == Set(first.suffix(4).map(\.deviceID)), "only the devices without a delivery")
            #expect(Set(resent.map(\.id)).isDisjoint(with: first.map(\.id)), "new ids for the new attempt")
            // The first attempt's late answers are fenced out; the new ones count.
            #expect(
                try await store.record(first.suffix(4).map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 1020)
                    .applied.isEmpty)
            let current = try await store.record(resent.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 1030)
            #expect(current.applied == Set(resent.map(\.id)))
            let status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10))
            #expect(status.counts == [.sent: 6] && status.deliveries.count == 6)
            #expect(try await store.claimDeliveries(limit: 10, now: 5000, leaseMilliseconds: 1000).isEmpty, "every chunk is done")
            #expect(try await store.pendingDeliveries() == 0)
        }
    }

    @Test(
        "a chunk recorded in parts (two calls of record) is done when its last delivery is recorded, not when its lease runs out",
        arguments: Driver.enabled
    )
    func chunkRecordedInParts(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let claimed = try await self.broadcastClaimed(store, devices: 6)
            #expect(claimed.count == 6 && Set(claimed.compactMap(\.chunk)).count == 1)
            #expect(try await store.record(self.sent(claimed.prefix(2)), now: 20).applied == Set(claimed.prefix(2).map(\.id)))
            #expect(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)?.counts == [.sent: 2, .pending: 4])
            #expect(try await store.record(self.sent(claimed[2...]), now: 30).applied == Set(claimed[2...].map(\.id)))
            // Done at once: nothing left in flight (its lease runs to 1010).
            let status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10))
            #expect(status.counts == [.sent: 6], "\(status.counts)")
            #expect(status.deliveries.count == 6)
        }
    }

    @Test("SQLite: a chunk's delivery recorded twice at the same attempt is created and applied once, and its chunk ends with the last")
    func chunkRecordedTwice() async throws {
        try await Driver.sqlite.withStore { store async throws in
            // (PostgreSQL writes a chunk's rows in one COPY, which refuses the whole batch instead.)
            let claimed = try await self.broadcastClaimed(store, devices: 6)
            #expect(try await store.record(self.sent(claimed.prefix(2)), now: 20).applied == Set(claimed.prefix(2).map(\.id)))
            // The same two again, with a third: only the third is new.
            #expect(try await store.record(self.sent(claimed.prefix(3)), now: 30).applied == [claimed[2].id])
            #expect(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)?.counts == [.sent: 3, .pending: 3])
            #expect(try await store.record(self.sent(claimed[3...]), now: 40).applied == Set(claimed[3...].map(\.id)))
            let status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10))
            #expect(status.counts == [.sent: 6], "\(status.counts)")
            #expect(status.deliveries.count == 6)
        }
    }

    @Test("a chunk's deliveries are written with their answers as APNs gave them: tabs, backslashes and line breaks kept", arguments: Driver.enabled)
    func createdVerbatim(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let claimed = try await self.broadcastClaimed(store, devices: 3)
            #expect(claimed.count == 3)
            let odd = "a\tb\\c\nd\re \\N"
            let recorded = try await store.record(
                [
                    DeliveryResult(claimed[0], outcome: .sent(apnsID: odd), latencyMilliseconds: 7),
                    DeliveryResult(claimed[1], outcome: .failed(status: 400, reason: odd, invalidate: false, timestamp: nil), latencyMilliseconds: 8),
                    DeliveryResult(claimed[2], outcome: .sent(apnsID: nil), latencyMilliseconds: 9),
                ],
                now: 20
            )
            #expect(recorded.applied == Set(claimed.map(\.id)))
            let status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10))
            let byID = Dictionary(uniqueKeysWithValues: status.deliveries.map { ($0.id, $0) })
            let sent = try #require(byID[claimed[0].id])
            #expect(sent.state == .sent && sent.apnsID == odd && sent.reason == nil && sent.status == 200 && sent.latencyMilliseconds == 7)
            let failed = try #require(byID[claimed[1].id])
            #expect(
                failed.state == .failed && failed.reason == odd && failed.apnsID == nil && failed.status == 400 && failed.latencyMilliseconds == 8)
            let bare = try #require(byID[claimed[2].id])
            #expect(bare.state == .sent && bare.apnsID == nil && bare.token == claimed[2].token && bare.attempts == 1 && bare.updatedAt == 20)
        }
    }

    @Test("a late record of a chunk claimed again and finished never ends a newer chunk (chunk ids are not reused)", arguments: Driver.enabled)
    func chunkIDsNotReused(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let first = try await self.broadcastClaimed(store, devices: 2)
            // The lease runs out; the chunk is claimed again and finished, so its row is gone.
            let again = try await store.claimDeliveries(limit: 10, now: 1010, leaseMilliseconds: 1000)
            #expect(again.count == 2 && again.allSatisfy { $0.attempts == 2 })
            try await store.record(again.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 1020)
            // A second notification's chunk, at its first attempt like the first claim was.
            _ = try await store.createNotification(
                appID: "demo", id: "m", bundleID: "com.example.app", NotificationSpec(audience: .all, payload: Array("{}".utf8)), now: 1030)
            let second = try await store.claimDeliveries(limit: 10, now: 1030, leaseMilliseconds: 1000)
            #expect(second.count == 2 && second.allSatisfy { $0.attempts == 1 && $0.notificationID == "m" })
            // The first claim's late answers change nothing, the second chunk included.
            #expect(
                try await store.record(first.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 1040).applied
                    .isEmpty)
            #expect(try await store.notification(appID: "demo", id: "m", deliveryLimit: 10)?.counts == [.pending: 2])
            let current = try await store.record(second.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 1050)
            #expect(current.applied == Set(second.map(\.id)))
            #expect(try await store.notification(appID: "demo", id: "m", deliveryLimit: 10)?.counts == [.sent: 2])
            #expect(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)?.counts == [.sent: 2])
        }
    }

    @Test("retention keeps a notification whose chunk is in flight, and its recorded deliveries", arguments: Driver.enabled)
    func pruneKeepsChunks(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let first = try await self.broadcastClaimed(store, devices: 2)
            try await store.record([DeliveryResult(first[0], outcome: .sent(apnsID: nil), latencyMilliseconds: 1)], now: 20)
            // The process dies with the other delivery in flight; retention runs past the notification.
            _ = try await store.prune(before: 100_000, limit: 100)
            #expect(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)?.counts == [.sent: 1, .pending: 1])
            let again = try await store.claimDeliveries(limit: 10, now: 1010, leaseMilliseconds: 1000)
            #expect(again.map(\.deviceID) == [first[1].deviceID], "only the device without a delivery is sent again")
        }
    }

    @Test("a notification cancelled while its chunk is in flight: sent ones are recorded, none is retried", arguments: Driver.enabled)
    func cancelInFlight(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let claimed = try await self.broadcastClaimed(store, devices: 2)
            #expect(claimed.count == 2)
            #expect(try await store.cancelNotification(appID: "demo", id: "n", now: 15), "a chunk in flight can still be cancelled")
            try await store.record(
                [
                    DeliveryResult(claimed[0], outcome: .sent(apnsID: nil), latencyMilliseconds: 1),
                    DeliveryResult(claimed[1], outcome: .retry(status: 503, reason: "ServiceUnavailable", retryAt: 100), latencyMilliseconds: 1),
                ],
                now: 20
            )
            #expect(try await store.claimDeliveries(limit: 10, now: 5000, leaseMilliseconds: 1000).isEmpty, "the retry is not sent after the cancel")
            let status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10))
            #expect(status.counts == [.sent: 1, .failed: 1])
            #expect(status.deliveries.first { $0.state == .failed }?.reason == "Cancelled")
        }
    }

    @Test("a record from a claim whose lease ran out changes nothing once the delivery was claimed again", arguments: Driver.enabled)
    func fencedRecord(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let first = try #require(try await self.broadcastClaimed(store, devices: 1).first)
            let second = try #require(try await store.claimDeliveries(limit: 10, now: 1010, leaseMilliseconds: 1000).first, "the lease ran out")
            #expect(first.attempts == 1 && second.attempts == 2)
            // The first claim's late answers: neither moves the second claim's lease nor ends the delivery.
            let lateRetry = try await store.record(
                [DeliveryResult(first, outcome: .retry(status: 503, reason: "ServiceUnavailable", retryAt: 1100), latencyMilliseconds: 1)],
                now: 1020)
            #expect(lateRetry.applied.isEmpty)
            #expect(try await store.claimDeliveries(limit: 10, now: 1100, leaseMilliseconds: 1000).isEmpty, "still leased to the second claim")
            let lateSent = try await store.record([DeliveryResult(first, outcome: .sent(apnsID: nil), latencyMilliseconds: 1)], now: 1030)
            #expect(lateSent.applied.isEmpty)
            // A late 410 neither ends the delivery nor touches the device: the newer claim answers for both.
            let lateGone = try await store.record(
                [
                    DeliveryResult(
                        first, outcome: .failed(status: 410, reason: "Unregistered", invalidate: true, timestamp: nil), latencyMilliseconds: 1)
                ],
                now: 1035)
            #expect(lateGone == RecordedOutcomes())
            #expect(try await store.device(appID: "demo", token: try self.token(1).hex)?.active == true)
            #expect(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)?.counts[.pending] == 1)
            let current = try await store.record([DeliveryResult(second, outcome: .sent(apnsID: nil), latencyMilliseconds: 1)], now: 1040)
            #expect(current.applied == [second.id] && current.invalidated.isEmpty)
            #expect(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)?.counts[.sent] == 1)
        }
    }

    func webhook(_ id: String, types: Set<DeliveryEventType> = [.failed]) -> Webhook {
        Webhook(id: id, appID: "demo", url: "https://example.com/\(id)", sealedSecret: [1, 2, 3], types: types, createdAt: 5)
    }

    @Test("webhooks: created, listed per app, deleted with their messages", arguments: Driver.enabled)
    func webhooksRegistry(driver: Driver) async throws {
        try await driver.withStore { store in
            try await store.createWebhook(self.webhook("wh_a", types: [.sent, .invalidated]))
            try await store.createWebhook(self.webhook("wh_b"))
            let listed = try await store.webhooks(appID: "demo")
            #expect(listed.map(\.id) == ["wh_a", "wh_b"])
            #expect(listed.first?.types == [.sent, .invalidated] && listed.first?.sealedSecret == [1, 2, 3])
            #expect(try await store.allWebhooks().count == 2)
            #expect(try await store.webhooks(appID: "other").isEmpty)
            try await store.enqueueWebhookMessages([WebhookMessage(webhookID: "wh_a", body: Array("{}".utf8), events: 1)], now: 10, expiresAt: 100)
            #expect(try await store.deleteWebhook(appID: "demo", id: "wh_a"))
            #expect(try await !store.deleteWebhook(appID: "demo", id: "wh_a"))
            #expect(try await store.claimWebhookMessages(limit: 10, now: 20, leaseMilliseconds: 50).isEmpty, "its messages went with it")
            // Messages for a webhook deleted meanwhile are dropped; the others' are kept.
            try await store.enqueueWebhookMessages(
                [WebhookMessage(webhookID: "wh_a", body: [0x31], events: 1), WebhookMessage(webhookID: "wh_b", body: [0x32], events: 1)], now: 30,
                expiresAt: 100
            )
            #expect(try await store.claimWebhookMessages(limit: 10, now: 30, leaseMilliseconds: 50).map(\.body) == [[0x32]])
            await #expect(throws: (any Error).self) { try await store.createWebhook(self.webhook("wh_b")) }
        }
    }

    @Test(
        "webhook messages: claimed under a lease, due again when it runs out, fenced records, delivered or expired, then pruned",
        arguments: Driver.enabled)
    func webhookOutbox(driver: Driver) async throws {
        try await driver.withStore { store in
            try await store.createWebhook(self.webhook("wh_a"))
            try await store.enqueueWebhookMessages(
                (0..<3).map { WebhookMessage(webhookID: "wh_a", body: Array("{\"n\":\($0)}".utf8), events: $0 + 1) }, now: 10, expiresAt: 10_000
            )
            let first = try await store.claimWebhookMessages(limit: 2, now: 20, leaseMilliseconds: 100)
            #expect(first.map(\.body) == [Array("{\"n\":0}".utf8), Array("{\"n\":1}".utf8)])
            #expect(first.allSatisfy { $0.attempt == 1 && $0.webhook.url == "https://example.com/wh_a" && $0.expiresAt == 10_000 })
            let second = try await store.claimWebhookMessages(limit: 5, now: 30, leaseMilliseconds: 100)
            #expect(second.count == 1, "leased ones are not claimed twice")
            // Message 0 acknowledged; message 1's lease (to 120) runs out unanswered; message 2's (to 130) has not.
            try await store.recordWebhookAttempts(
                [WebhookAttempt(messageID: first[0].id, attempt: 1, delivered: true, status: 204, error: nil, retryAt: nil)], now: 40)
            let again = try await store.claimWebhookMessages(limit: 5, now: 125, leaseMilliseconds: 100)
            #expect(again.map(\.id) == [first[1].id] && again.first?.attempt == 2)
            // The first claim's late answer changes nothing; the second's counts.
            try await store.recordWebhookAttempts(
                [WebhookAttempt(messageID: first[1].id, attempt: 1, delivered: true, status: 200, error: nil, retryAt: nil)], now: 140)
            try await store.recordWebhookAttempts(
                [WebhookAttempt(messageID: first[1].id, attempt: 2, delivered: false, status: 500, error: "answered 500", retryAt: 500)], now: 150)
            try await store.recordWebhookAttempts(
                [WebhookAttempt(messageID: second[0].id, attempt: 1, delivered: false, status: nil, error: "gave up", retryAt: nil)], now: 160)
            let records = try await store.webhookMessages(webhookID: "wh_a", limit: 10)
            #expect(records.map(\.state) == [.expired, .pending, .delivered])
            #expect(
                records[1].lastStatus == 500 && records[1].lastError == "answered 500" && records[1].nextAttemptAt == 500 && records[1].attempts == 2)
            #expect(records[2].deliveredAt == 40 && records[2].events == 1)
            #expect(try await store.claimWebhookMessages(limit: 5, now: 499, leaseMilliseconds: 100).isEmpty, "not before its retry time")
            #expect(try await store.claimWebhookMessages(limit: 5, now: 500, leaseMilliseconds: 100).count == 1)
            #expect(try await store.pruneWebhookMessages(before: 11) == 2, "finished ones only")
            #expect(try await store.webhookMessages(webhookID: "wh_a", limit: 10).map(\.state) == [.pending])
        }
    }

    @Test("webhook messages claimed by several workers at once go to one each", arguments: Driver.enabled)
    func webhookConcurrentClaims(driver: Driver) async throws {
        try await driver.withStore { store in
            try await store.createWebhook(self.webhook("wh_a"))
            try await store.enqueueWebhookMessages(
                (0..<200).map { _ in WebhookMessage(webhookID: "wh_a", body: [0x7B, 0x7D], events: 1) }, now: 10, expiresAt: 10_000)
            let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let batch = try await store.claimWebhookMessages(limit: 7, now: 20, leaseMilliseconds: 1000)
                            if batch.isEmpty { return mine }
                            mine += batch.map(\.id)
                        }
                    }
                }
                var all: [Int64] = []
                for try await ids in group { all += ids }
                return all
            }
            #expect(claimed.count == 200 && Set(claimed).count == 200)
        }
    }
}

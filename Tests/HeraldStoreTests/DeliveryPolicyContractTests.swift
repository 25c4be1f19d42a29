// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Logging
import Testing

@testable import HeraldPostgres

/// Delivery policies in the store, on every driver: quiet hours hold alerts in the claim; frequency
/// caps fail or defer those over the cap, exactly, however many claim at once.
@Suite(.heavy) struct DeliveryPolicyContractTests {
    /// 2030-01-15T14:00:00Z: 23:00 in Tokyo, 09:00 in New York.
    static let tokyoEleven = QuietHoursTests.tokyoEleven
    static let hour: Int64 = 3_600_000

    func token(_ n: Int) throws -> DeviceToken {
        let hex = String(n, radix: 16)
        return try DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
    }

    func states(_ store: any HeraldStore, _ id: String) async throws -> [String: (state: DeliveryState, reason: String?, attempts: Int)] {
        let status = try #require(try await store.notification(appID: "demo", id: id, deliveryLimit: 100))
        return Dictionary(uniqueKeysWithValues: status.deliveries.map { ($0.token, ($0.state, $0.reason, $0.attempts)) })
    }

    @Test(
        "quiet hours hold a Tokyo device's alert until 08:00 Tokyo time while New York's goes at once; the hold is no attempt",
        arguments: Driver.enabled)
    func quietHours(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let tokyo = try self.token(1).hex
            let newYork = try self.token(2).hex
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), timeZone: "Asia/Tokyo"), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(2), timeZone: "America/New_York"), now: 1)
            var spec = NotificationSpec(audience: .all, payload: Array("{}".utf8))
            spec.adoptQuietHours(QuietHours(start: "22:00", end: "08:00"))
            let now = Self.tokyoEleven
            _ = try await store.createNotification(appID: "demo", id: "evening", bundleID: "com.example.app", spec, now: now)

            let first = try await store.claimDeliveries(limit: 10, now: now, leaseMilliseconds: 60_000)
            #expect(first.map(\.token) == [newYork], "New York (09:00) at once; Tokyo (23:00) held")
            var held = try await self.states(store, "evening")
            #expect(held[tokyo]?.state == .pending && held[tokyo]?.reason == QuietHours.reason && held[tokyo]?.attempts == 0)
            let morning = now + 9 * Self.hour
            // New York's is answered by a retry that falls in its own night (23:00 there): held too.
            try await store.record(
                [
                    DeliveryResult(
                        first[0], outcome: .retry(status: 503, reason: "ServiceUnavailable", retryAt: now + 14 * Self.hour), latencyMilliseconds: 5)
                ],
                now: now + 1)
            // The chunk is done: its lease running out claims nothing again.
            #expect(try await store.claimDeliveries(limit: 10, now: now + 120_000, leaseMilliseconds: 60_000).isEmpty)
            #expect(try await store.claimDeliveries(limit: 10, now: morning - 1, leaseMilliseconds: 60_000).isEmpty, "07:59:59.999 in Tokyo")

            let released = try await store.claimDeliveries(limit: 10, now: morning, leaseMilliseconds: 60_000)
            #expect(released.map(\.token) == [tokyo], "08:00 in Tokyo")
            #expect(released.first?.attempts == 1, "the hold was not an attempt")
            try await store.record([DeliveryResult(released[0], outcome: .sent(apnsID: nil), latencyMilliseconds: 5)], now: morning)

            // New York's retry comes due at 23:00 New York time: held until 08:00 there.
            #expect(try await store.claimDeliveries(limit: 10, now: now + 14 * Self.hour, leaseMilliseconds: 60_000).isEmpty)
            held = try await self.states(store, "evening")
            #expect(held[newYork]?.state == .pending && held[newYork]?.reason == QuietHours.reason && held[newYork]?.attempts == 1)
            #expect(held[tokyo]?.state == .sent)
            let newYorkMorning = now + 23 * Self.hour
            #expect(try await store.claimDeliveries(limit: 10, now: newYorkMorning - 1, leaseMilliseconds: 60_000).isEmpty)
            let again = try await store.claimDeliveries(limit: 10, now: newYorkMorning, leaseMilliseconds: 60_000)
            #expect(again.map(\.token) == [newYork] && again.first?.attempts == 2)
        }
    }

    @Test("a time-sensitive alert, and a background push, are never held", arguments: Driver.enabled)
    func neverHeld(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), timeZone: "Asia/Tokyo"), now: 1)
            let night = QuietHours(start: "22:00", end: "08:00")
            // A time-sensitive alert (exempt when accepted: it takes no quiet hours).
            var urgent = NotificationSpec(audience: .all, payload: Array(#"{"aps":{"interruption-level":"time-sensitive"}}"#.utf8))
            urgent.ignoresQuietHours = !QuietHours.applies(interruptionLevel: "time-sensitive", ignoreQuietHours: false)
            urgent.adoptQuietHours(night)
            _ = try await store.createNotification(appID: "demo", id: "urgent", bundleID: "com.example.app", urgent, now: Self.tokyoEleven)
            // A background push of a notification that took quiet hours.
            var background = NotificationSpec(audience: .all, pushType: .background, payload: Array(#"{"aps":{"content-available":1}}"#.utf8))
            background.adoptQuietHours(night)
            _ = try await store.createNotification(appID: "demo", id: "background", bundleID: "com.example.app", background, now: Self.tokyoEleven)
            let claimed = try await store.claimDeliveries(limit: 10, now: Self.tokyoEleven, leaseMilliseconds: 60_000)
            #expect(Set(claimed.map(\.notificationID)) == ["urgent", "background"])
        }
    }
}

extension DeliveryPolicyContractTests {
    func capped(_ store: any HeraldStore, limit: Int, windowSeconds: Int64 = 86_400) async throws {
        var security = try #require(try await store.app("demo")).security
        security.frequencyCap = FrequencyCap(limit: limit, windowSeconds: windowSeconds)
        #expect(try await store.setAppSecurity(appID: "demo", security))
    }

    func send(_ store: any HeraldStore, _ id: String, now: Int64, deferring: Bool = false, pushType: PushType? = nil) async throws {
        var spec = NotificationSpec(audience: .all, pushType: pushType, payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8), scheduledAt: now)
        spec.deferOverCap = deferring
        spec.adoptPolicies(try #require(try await store.app("demo")).security)
        _ = try await store.createNotification(appID: "demo", id: id, bundleID: "com.example.app", spec, now: now)
    }

    @Test(
        "a frequency cap admits at most N alerts per person in the rolling window: over it failed FrequencyCapped, or deferred until there is room",
        arguments: Driver.enabled)
    func frequencyCap(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            try await self.capped(store, limit: 3)
            let ann1 = try self.token(1).hex
            let ann2 = try self.token(2).hex
            let anonymous = try self.token(3).hex
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1), userID: "ann"), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(2), userID: "ann"), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(3)), now: 1)
            let now: Int64 = 1_000_000
            func claim(_ at: Int64) async throws -> [String] {
                // Leases longer than the test: nothing is recorded, and nothing is claimed again.
                try await store.claimDeliveries(limit: 10, now: at, leaseMilliseconds: 864_000_000).map(\.token).sorted()
            }
            try await self.send(store, "one", now: now)
            #expect(try await claim(now) == [ann1, ann2, anonymous].sorted())
            try await self.send(store, "two", now: now + 1000)
            #expect(try await claim(now + 1000) == [ann1, anonymous].sorted(), "ann's third alert; her fourth is over the cap")
            let two = try await self.states(store, "two")
            #expect(two[ann2]?.state == .failed && two[ann2]?.reason == FrequencyCap.reason)
            // Not an alert: never counted, never capped.
            try await self.send(store, "quiet", now: now + 1500, pushType: .background)
            #expect(try await claim(now + 1500) == [ann1, ann2, anonymous].sorted())
            try await self.send(store, "three", now: now + 2000, deferring: true)
            #expect(try await claim(now + 2000) == [anonymous], "ann's wait until her first two leave the window")
            let three = try await self.states(store, "three")
            #expect(three[ann1]?.state == .pending && three[ann1]?.reason == FrequencyCap.reason && three[ann1]?.attempts == 0)
            #expect(try await claim(now + 86_400_000 - 1) == [])
            #expect(try await claim(now + 86_400_000) == [ann1, ann2].sorted(), "room for two")
        }
    }

    @Test(
        "a batch whose every delivery is over the cap is followed by the next: a claim comes back empty only when nothing is due",
        arguments: Driver.enabled)
    func setAsideBatch(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            try await self.capped(store, limit: 2)
            // Ann's three devices come first in the audience, then one without a user.
            for n in 1...3 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n), userID: "ann"), now: 1) }
            let other = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(4)), now: 1)
            let now: Int64 = 1_000_000
            try await self.send(store, "one", now: now)
            let first = try await store.claimDeliveries(limit: 10, now: now, leaseMilliseconds: 864_000_000)
            #expect(first.count == 3, "two of Ann's devices and the other: \(first.map(\.token))")
            try await self.send(store, "two", now: now + 1000)
            // A batch of three holds Ann's devices only, all over her cap of 2; the other device,
            // with one alert, is due behind them.
            let second = try await store.claimDeliveries(limit: 3, now: now + 1000, leaseMilliseconds: 864_000_000)
            #expect(second.map(\.deviceID) == [other.id], "\(second.map(\.token))")
            #expect(try await store.claimDeliveries(limit: 3, now: now + 1000, leaseMilliseconds: 864_000_000).isEmpty)
            let two = try await self.states(store, "two")
            #expect(two.values.filter { $0.state == .failed && $0.reason == FrequencyCap.reason }.count == 3, "\(two)")
        }
    }

    /// Claims with `claimers` concurrent tasks on each of `stores` until nothing is left; the
    /// deliveries each user got.
    func claimAll(_ stores: [any HeraldStore], claimers: Int, now: Int64, users: [Int64: String]) async throws -> [String: Int] {
        let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for store in stores {
                for _ in 0..<claimers {
                    group.addTask {
                        var mine: [Int64] = []
                        var empty = 0
                        // Empty twice: another claim may have been expanding the last notification.
                        while empty < 2 {
                            let batch = try await store.claimDeliveries(limit: 7, now: now, leaseMilliseconds: 600_000)
                            empty = batch.isEmpty ? empty + 1 : 0
                            mine += batch.map(\.deviceID)
                        }
                        return mine
                    }
                }
            }
            var all: [Int64] = []
            for try await mine in group { all += mine }
            return all
        }
        // Whatever the concurrent claims left (none expected), claimed one at a time.
        var rest = claimed
        while case let batch = try await stores[0].claimDeliveries(limit: 7, now: now, leaseMilliseconds: 600_000), !batch.isEmpty {
            rest += batch.map(\.deviceID)
        }
        var perUser: [String: Int] = [:]
        for device in rest { perUser[users[device] ?? "?", default: 0] += 1 }
        return perUser
    }

    /// `users` users with `devicesEach` devices each, then `anonymous` devices without a user
    /// (consecutive ids: they share rows of the counts); each device's person.
    func audience(_ store: any HeraldStore, users: Int, devicesEach: Int, anonymous: Int = 0) async throws -> [Int64: String] {
        var byDevice: [Int64: String] = [:]
        for user in 0..<users {
            for device in 0..<devicesEach {
                let registered = try await store.register(
                    appID: "demo", DeviceRegistration(token: try self.token(user * 100 + device + 1), userID: "user\(user)"), now: 1)
                byDevice[registered.id] = "user\(user)"
            }
        }
        for n in 0..<anonymous {
            let registered = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(50_000 + n)), now: 1)
            byDevice[registered.id] = "device\(registered.id)"
        }
        return byDevice
    }

    @Test("8 concurrent claimers never exceed a frequency cap, and fill it", arguments: Driver.enabled)
    func capUnderConcurrency(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            try await self.capped(store, limit: 3)
            // Devices without a user too: 70 of them share two or three rows, which claims of 7
            // deliveries write side by side.
            let users = try await self.audience(store, users: 20, devicesEach: 3, anonymous: 70)
            let now: Int64 = 1_000_000
            for n in 0..<5 { try await self.send(store, "n\(n)", now: now) }
            let perUser = try await self.claimAll([store], claimers: 8, now: now, users: users)
            #expect(perUser.count == 90 && perUser.values.allSatisfy { $0 == 3 }, "\(perUser)")
        }
    }

    @Test(
        "PostgreSQL: three stores (three connection pools, as three processes have) claiming the same users at once never exceed a frequency cap",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage))
    )
    func capAcrossPools() async throws {
        try await PostgresTestDatabase.with { database in
            try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { first in
                try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { second in
                    try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { third in
                        try await first.createApp(App(id: "demo", bundleID: "com.example.app", createdAt: 1))
                        try await self.capped(first, limit: 3)
                        let users = try await self.audience(first, users: 20, devicesEach: 3, anonymous: 70)
                        let now: Int64 = 1_000_000
                        for n in 0..<5 { try await self.send(first, "n\(n)", now: now) }
                        let perUser = try await self.claimAll([first, second, third], claimers: 3, now: now, users: users)
                        // Never over the cap, and filled. (Filled failed in loaded runs while a
                        // claim whose batch was all over the cap came back empty, most likely
                        // because the claimers then stopped with the tails of notifications, the
                        // devices without a user, unclaimed: see `setAsideBatch`.)
                        #expect(perUser.count == 90 && perUser.values.allSatisfy { $0 == 3 }, "\(perUser)")
                    }
                }
            }
        }
    }
}

extension DeliveryPolicyContractTests {
    /// Claims with `claimers` concurrent tasks per store at each of `steps`, until nothing is due
    /// at that step; the time each delivery was claimed at.
    func claimTimes(_ stores: [any HeraldStore], claimers: Int, steps: [Int64]) async throws -> [Int64: Int64] {
        var times: [Int64: Int64] = [:]
        for now in steps {
            let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for store in stores {
                    for _ in 0..<claimers {
                        group.addTask {
                            var mine: [Int64] = []
                            while case let batch = try await store.claimDeliveries(limit: 20, now: now, leaseMilliseconds: 864_000_000),
                                !batch.isEmpty
                            {
                                mine += batch.map(\.id)
                            }
                            return mine
                        }
                    }
                }
                var all: [Int64] = []
                for try await mine in group { all += mine }
                return all
            }
            for id in claimed {
                #expect(times[id] == nil, "delivery \(id) claimed twice")
                times[id] = now
            }
        }
        return times
    }

    /// The most deliveries any 60-second window (`[t, t + 60 s)`) of `times` holds.
    func busiestMinute(_ times: [Int64]) -> Int {
        let sorted = times.sorted()
        var most = 0
        var start = 0
        for end in sorted.indices {
            while sorted[end] - sorted[start] >= 60_000 { start += 1 }
            most = max(most, end - start + 1)
        }
        return most
    }

    /// A send at `perMinute` to `devices` devices, due at `now`; with `rowsFirst`, a local-time
    /// send due a second later: its deliveries are created pending at `now`, without slots, and
    /// the claims running at once a second later take their slots side by side, with no
    /// notification locked for an expansion (the case that needs the slot row locked).
    func throttled(_ store: any HeraldStore, perMinute: Int, devices: Int, now: Int64 = 1_000_000, rowsFirst: Bool = false) async throws {
        for n in 1...devices { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
        var spec = NotificationSpec(audience: .all, payload: Array(#"{"aps":{"alert":"sale"}}"#.utf8), scheduledAt: now)
        // A second later in UTC (devices without a zone): expanded into rows at `now`, due after.
        if rowsFirst { spec.localTime = LocalTime("1970-01-01T00:16:41") }
        spec.throttleRequested = perMinute
        spec.adoptPolicies(AppSecurity())
        _ = try await store.createNotification(appID: "demo", id: "sale", bundleID: "com.example.app", spec, now: now)
    }

    @Test("a throttled send is spread so that no minute carries more than N, each delivery claimed once, under 8 claimers", arguments: Driver.enabled)
    func throttle(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let now: Int64 = 1_000_000
            try await self.throttled(store, perMinute: 30, devices: 100)
            let steps = (0...240).map { now + Int64($0) * 1000 }
            let times = try await self.claimTimes([store], claimers: 8, steps: steps)
            #expect(times.count == 100, "every delivery, once")
            #expect(self.busiestMinute(Array(times.values)) == 30)
            #expect(times.values.max() == now + 99 * 2000, "slots 2 s apart: the last at 198 s")
            let sale = try await self.states(store, "sale")
            #expect(sale.count == 99 && sale.values.allSatisfy { $0.reason == Throttle.reason }, "all but the first waited for their slot")
        }
    }

    @Test(
        "PostgreSQL: three stores (three connection pools, as three processes have) claiming one throttled send at once stay within N per minute combined",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage))
    )
    func throttleAcrossPools() async throws {
        try await PostgresTestDatabase.with { database in
            try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { first in
                try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { second in
                    try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { third in
                        try await first.createApp(App(id: "demo", bundleID: "com.example.app", createdAt: 1))
                        let now: Int64 = 1_000_000
                        try await self.throttled(first, perMinute: 120, devices: 400, rowsFirst: true)
                        let times = try await self.claimTimes([first, second, third], claimers: 3, steps: (0...240).map { now + Int64($0) * 1000 })
                        #expect(times.count == 400)
                        #expect(self.busiestMinute(Array(times.values)) == 120)
                    }
                }
            }
        }
    }
}

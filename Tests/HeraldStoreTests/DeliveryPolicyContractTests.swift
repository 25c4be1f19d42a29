// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Delivery policies in the store, on every driver: quiet hours hold alerts in the claim.
@Suite struct DeliveryPolicyContractTests {
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

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Testing

/// Quiet hours on plain values: the window, when it ends in a time zone, which sends and pushes
/// it holds, and what a claim holds.
@Suite struct QuietHoursTests {
    /// 2030-01-15T14:00:00Z: 23:00 in Tokyo, 09:00 in New York.
    static let tokyoEleven: Int64 = 1_894_716_000_000

    @Test("HH:MM windows parse, over midnight or not; anything else is refused")
    func parsing() throws {
        let night = try #require(QuietHours(start: "22:00", end: "08:00"))
        #expect(night.description == "22:00-08:00")
        #expect(QuietHours(night.description) == night)
        #expect(night.contains(minuteOfDay: 22 * 60) && night.contains(minuteOfDay: 3 * 60) && !night.contains(minuteOfDay: 8 * 60))
        let lunch = try #require(QuietHours(start: "12:30", end: "13:45"))
        #expect(lunch.contains(minuteOfDay: 12 * 60 + 30) && !lunch.contains(minuteOfDay: 13 * 60 + 45) && !lunch.contains(minuteOfDay: 0))
        for (start, end) in [("24:00", "08:00"), ("22:00", "8:00"), ("22:60", "08:00"), ("22:00", "22:00"), ("", "08:00"), ("+1:00", "08:00")] {
            #expect(QuietHours(start: start, end: end) == nil, "\(start)-\(end)")
        }
    }

    @Test("a device inside the window is held until it ends in its own time zone, UTC without one")
    func heldUntil() throws {
        let night = try #require(QuietHours(start: "22:00", end: "08:00"))
        // 23:00 in Tokyo: held until 08:00 the next morning there (23:00Z).
        #expect(night.heldUntil(now: Self.tokyoEleven, timeZone: "Asia/Tokyo") == Self.tokyoEleven + 9 * 3_600_000)
        #expect(night.heldUntil(now: Self.tokyoEleven, timeZone: "America/New_York") == nil, "09:00 in New York")
        // After midnight the end is the same day's 08:00.
        #expect(night.heldUntil(now: Self.tokyoEleven + 3 * 3_600_000, timeZone: "Asia/Tokyo") == Self.tokyoEleven + 9 * 3_600_000)
        #expect(night.heldUntil(now: Self.tokyoEleven + 9 * 3_600_000, timeZone: "Asia/Tokyo") == nil, "08:00 is outside")
        // 14:00 UTC: outside for a device without a zone (or an unknown one); inside for 13:00-15:00.
        #expect(night.heldUntil(now: Self.tokyoEleven, timeZone: nil) == nil)
        let afternoon = try #require(QuietHours(start: "13:00", end: "15:00"))
        #expect(afternoon.heldUntil(now: Self.tokyoEleven, timeZone: nil) == Self.tokyoEleven + 3_600_000)
        #expect(afternoon.heldUntil(now: Self.tokyoEleven, timeZone: "Not/AZone") == Self.tokyoEleven + 3_600_000)
    }

    @Test("only alerts wait, and not time-sensitive or critical ones, nor a send that opts out")
    func which() {
        #expect(QuietHours.applies(interruptionLevel: nil, ignoreQuietHours: false))
        #expect(QuietHours.applies(interruptionLevel: "active", ignoreQuietHours: false))
        #expect(QuietHours.applies(interruptionLevel: "passive", ignoreQuietHours: false))
        #expect(!QuietHours.applies(interruptionLevel: "time-sensitive", ignoreQuietHours: false))
        #expect(!QuietHours.applies(interruptionLevel: "critical", ignoreQuietHours: false))
        #expect(!QuietHours.applies(interruptionLevel: nil, ignoreQuietHours: true))
        for pushType in [PushType.background, .voip, .liveactivity, .location, .complication, .fileprovider, .mdm] {
            #expect(!QuietHours.holds(pushType), "\(pushType)")
        }
        #expect(QuietHours.holds(.alert))
        var spec = NotificationSpec(audience: .all, payload: [])
        spec.adoptQuietHours(QuietHours(start: 0, end: 60))
        #expect(spec.quietHours != nil)
        spec.ignoresQuietHours = true
        spec.adoptQuietHours(QuietHours(start: 0, end: 60))
        #expect(spec.quietHours == nil)
        #expect(QuietHours.apiState(.pending, reason: QuietHours.reason) == "held")
        #expect(QuietHours.apiState(.pending, reason: "TooManyRequests") == "pending")
        #expect(QuietHours.apiState(.failed, reason: QuietHours.reason) == "failed")
    }

    @Test("a claim holds the alerts of devices inside their window and reads no time zone when no policy is active")
    func claim() throws {
        func delivery(_ device: Int64, _ pushType: PushType, quiet: QuietHours?) -> ClaimedDelivery {
            var claimed = ClaimedDelivery(
                id: device, notificationID: "n", appID: "demo", deviceID: device, token: "t", route: .production, pushType: pushType,
                topic: "x", priority: nil, expiration: nil, collapseID: nil, payload: [], attempts: 1)
            claimed.quietHours = quiet
            return claimed
        }
        let night = QuietHours(start: "22:00", end: "08:00")
        #expect(QuietHours.devices([delivery(1, .alert, quiet: nil), delivery(2, .alert, quiet: nil)]).isEmpty)
        let batch = [
            delivery(1, .alert, quiet: night), delivery(2, .alert, quiet: night), delivery(3, .voip, quiet: night),
            delivery(4, .background, quiet: night), delivery(5, .alert, quiet: nil),
        ]
        #expect(QuietHours.devices(batch) == [1, 2])
        let held = QuietHours.held(
            batch, timeZones: [1: "Asia/Tokyo", 2: "America/New_York", 3: "Asia/Tokyo", 5: "Asia/Tokyo"], now: Self.tokyoEleven)
        #expect(held == [0: Self.tokyoEleven + 9 * 3_600_000])
    }
}

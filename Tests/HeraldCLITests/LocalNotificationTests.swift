// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

@testable import HeraldCLI

/// The virtual device's local notifications: the triggers UserNotifications offers, computed on
/// given dates (no waiting).
@Suite struct LocalNotificationTests {
    static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
    /// Tuesday 2026-11-24 12:00:00 UTC.
    static let noon = Date(timeIntervalSince1970: 1_795_521_600)

    @Test("a time-interval trigger fires once after its interval; a repeating one every interval")
    func timeInterval() throws {
        let once = try LocalNotification(spec: "after=5;title=Stand up")
        #expect(once.trigger == .timeInterval(5, repeats: false))
        let first = try #require(once.nextFire(scheduled: Self.noon, last: nil, calendar: Self.calendar))
        #expect(first == Self.noon.addingTimeInterval(5))
        #expect(once.nextFire(scheduled: Self.noon, last: first, calendar: Self.calendar) == nil)

        let hourly = try LocalNotification(spec: "after=3600;repeat;body=Drink water")
        let next = try #require(hourly.nextFire(scheduled: Self.noon, last: Self.noon.addingTimeInterval(3600), calendar: Self.calendar))
        #expect(next == Self.noon.addingTimeInterval(7200))
    }

    @Test("a calendar trigger fires at the next matching time; a repeating one again the next day (or week)")
    func calendarTrigger() throws {
        let daily = try LocalNotification(spec: "at=09:30;repeat;title=Standup")
        let first = try #require(daily.nextFire(scheduled: Self.noon, last: nil, calendar: Self.calendar))
        #expect(first == Self.noon.addingTimeInterval(21 * 3600 + 30 * 60), "tomorrow 09:30")
        #expect(daily.nextFire(scheduled: Self.noon, last: first, calendar: Self.calendar) == first.addingTimeInterval(24 * 3600))

        let once = try LocalNotification(spec: "at=12:00:30;title=Lunch")
        let lunch = try #require(once.nextFire(scheduled: Self.noon, last: nil, calendar: Self.calendar))
        #expect(lunch == Self.noon.addingTimeInterval(30))
        #expect(once.nextFire(scheduled: Self.noon, last: lunch, calendar: Self.calendar) == nil)

        let weekly = try LocalNotification(spec: "at=08:00;weekday=2;repeat;title=Week starts")  // Mondays
        let monday = try #require(weekly.nextFire(scheduled: Self.noon, last: nil, calendar: Self.calendar))
        #expect(monday == Self.noon.addingTimeInterval(6 * 24 * 3600 - 4 * 3600))
        #expect(weekly.nextFire(scheduled: Self.noon, last: monday, calendar: Self.calendar) == monday.addingTimeInterval(7 * 24 * 3600))
    }

    @Test(
        "specs UserNotifications would refuse are refused",
        arguments: [
            "after=30;repeat;title=x", "after=0;title=x", "at=25:00;title=x", "after=5", "title=x", "at=09:30;weekday=8;title=x",
            "after=5;badge=x;title=x",
        ])
    func invalid(spec: String) {
        #expect(throws: LocalNotification.Invalid.self) { try LocalNotification(spec: spec) }
    }
}

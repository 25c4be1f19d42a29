// SPDX-License-Identifier: Apache-2.0
package import APNSModels
import Foundation

/// An app's quiet hours: a daily window of wall-clock time (`22:00`–`08:00`), in each device's
/// own time zone (UTC for a device without one, or with one Herald does not know), during which
/// its alerts wait. Only alert pushes are held, and only those of notifications that took the
/// app's quiet hours when accepted (not `time-sensitive` or `critical`, not
/// `ignoreQuietHours`); background, VoIP, Live Activity, location and every other push type go
/// at once. Plain values in, decisions out: the drivers hold the SQL.
package struct QuietHours: Sendable, Hashable, CustomStringConvertible {
    /// Minutes after midnight, 0..<1440; `start != end`. A window with `start > end` goes over
    /// midnight.
    package var start: Int
    package var end: Int

    /// The reason a held delivery carries.
    package static let reason = "QuietHours"

    package init?(start: Int, end: Int) {
        guard (0..<1440).contains(start), (0..<1440).contains(end), start != end else { return nil }
        self.start = start
        self.end = end
    }

    /// Parses `HH:MM` times.
    package init?(start: String, end: String) {
        guard let start = Self.minutes(start), let end = Self.minutes(end) else { return nil }
        self.init(start: start, end: end)
    }

    /// The stored form, `HH:MM-HH:MM`.
    package init?(_ stored: String) {
        let parts = stored.split(separator: "-")
        guard parts.count == 2 else { return nil }
        self.init(start: String(parts[0]), end: String(parts[1]))
    }

    package var description: String { Self.text(self.start) + "-" + Self.text(self.end) }
    package var startText: String { Self.text(self.start) }
    package var endText: String { Self.text(self.end) }

    private static func text(_ minutes: Int) -> String {
        let (hour, minute) = (minutes / 60, minutes % 60)
        return (hour < 10 ? "0" : "") + String(hour) + ":" + (minute < 10 ? "0" : "") + String(minute)
    }

    /// `HH:MM`, 00:00 to 23:59.
    static func minutes(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }), let hour = Int(parts[0]),
            let minute = Int(parts[1]),
            (0...23).contains(hour), (0...59).contains(minute)
        else { return nil }
        return hour * 60 + minute
    }

    /// Whether a minute of the day lies in the window (its start included, its end not).
    package func contains(minuteOfDay minute: Int) -> Bool {
        self.start < self.end ? (self.start <= minute && minute < self.end) : (minute >= self.start || minute < self.end)
    }

    /// When the window that holds `now` (ms) ends in `timeZone` (an IANA name; UTC when nil or
    /// unknown), or nil when `now` is outside it there.
    package func heldUntil(now: Int64, timeZone: String?) -> Int64? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: "UTC")!
        let date = Date(timeIntervalSince1970: Double(now) / 1000)
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        guard self.contains(minuteOfDay: minute) else { return nil }
        // The end is later today, or (in the part of an overnight window before midnight) tomorrow.
        var day = calendar.startOfDay(for: date)
        if minute >= self.end, let next = calendar.date(byAdding: .day, value: 1, to: day) { day = next }
        guard let end = calendar.date(bySettingHour: self.end / 60, minute: self.end % 60, second: 0, of: day) else { return nil }
        return max(now + 1, Int64((end.timeIntervalSince1970 * 1000).rounded()))
    }

    // MARK: Which sends and pushes

    /// Whether a send with this interruption level (`aps.interruption-level`) waits for quiet
    /// hours: not `time-sensitive` or `critical`, and not `ignoreQuietHours`.
    package static func applies(interruptionLevel: String?, ignoreQuietHours: Bool) -> Bool {
        !ignoreQuietHours && interruptionLevel != "time-sensitive" && interruptionLevel != "critical"
    }

    /// Whether a push of `pushType` can be held: alerts only.
    package static func holds(_ pushType: PushType) -> Bool {
        pushType == .alert
    }

    /// The state a delivery shows in the API: `held` for one pending for quiet hours, a deferring
    /// frequency cap or its throttle slot.
    package static func apiState(_ state: DeliveryState, reason: String?) -> String {
        state == .pending && (reason == Self.reason || reason == FrequencyCap.reason || reason == Throttle.reason) ? "held" : state.rawValue
    }

    // MARK: A claim

    /// The devices of `claimed` whose time zone the claim needs: those of alerts whose
    /// notification has quiet hours. Empty (and nothing read) when no policy is active.
    package static func devices(_ claimed: [ClaimedDelivery]) -> [Int64] {
        // By index: a loop over the elements copies each delivery, for two fields.
        var devices: [Int64] = []
        for index in claimed.indices where claimed[index].quietHours != nil && Self.holds(claimed[index].pushType) {
            devices.append(claimed[index].deviceID)
        }
        return devices
    }

    /// Of `claimed`, those to hold at `now` (by index) and until when, given the time zones of
    /// ``devices(_:)`` (a device missing from `timeZones` has none: UTC).
    package static func held(_ claimed: [ClaimedDelivery], timeZones: [Int64: String], now: Int64) -> [Int: Int64] {
        var held: [Int: Int64] = [:]
        var known: [String: Int64?] = [:]
        for (index, delivery) in claimed.enumerated() {
            guard let quiet = delivery.quietHours, Self.holds(delivery.pushType) else { continue }
            let zone = timeZones[delivery.deviceID]
            let key = quiet.description + "|" + (zone ?? "")
            let until: Int64?
            if let cached = known[key] {
                until = cached
            } else {
                until = quiet.heldUntil(now: now, timeZone: zone)
                known[key] = until
            }
            if let until { held[index] = until }
        }
        return held
    }
}

extension NotificationSpec {
    /// Takes the app's quiet hours, unless the send is exempt (``ignoresQuietHours``).
    package mutating func adoptQuietHours(_ quietHours: QuietHours?) {
        self.quietHours = self.ignoresQuietHours ? nil : quietHours
    }
}

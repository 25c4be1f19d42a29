// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// The `Date` header of an answer (RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`),
/// written once a second.
final class HTTPDateCache: Sendable {
    private let cached = Mutex<(second: Int64, text: String)>((.min, ""))

    var now: String {
        let second = Int64(Date().timeIntervalSince1970.rounded(.down))
        return self.cached.withLock { cached in
            if cached.second != second { cached = (second, Self.text(second: second)) }
            return cached.text
        }
    }

    private static let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The date of `second` (since 1970, UTC), by the proleptic Gregorian calendar.
    static func text(second: Int64) -> String {
        let (days, time) = (floorDiv(second, 86_400), second - floorDiv(second, 86_400) * 86_400)
        // Days to a civil date (Howard Hinnant's algorithm): March-based years of 400-year eras.
        let shifted = days + 719_468
        let era = floorDiv(shifted, 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let weekday = Self.days[Int(days - floorDiv(days, 7) * 7)]
        return "\(weekday), \(two(day)) \(Self.months[Int(month) - 1]) \(year) \(two(time / 3600)):\(two(time % 3600 / 60)):\(two(time % 60)) GMT"
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }
}

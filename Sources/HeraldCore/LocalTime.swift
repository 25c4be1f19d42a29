// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A wall-clock time without a zone ("9:00 on 23 November"), delivered at that time in each
/// device's own time zone.
package struct LocalTime: Sendable, Hashable, CustomStringConvertible {
    package var year: Int
    package var month: Int
    package var day: Int
    package var hour: Int
    package var minute: Int
    package var second: Int

    /// Parses `YYYY-MM-DDTHH:MM[:SS]` (no zone).
    package init?(_ text: String) {
        let parts = text.split(separator: "T")
        guard parts.count == 2 else { return nil }
        let date = parts[0].split(separator: "-").compactMap { Int($0) }
        let time = parts[1].split(separator: ":").compactMap { Int($0) }
        guard date.count == 3, (2...3).contains(time.count), parts[0].split(separator: "-").count == 3,
            (1...12).contains(date[1]), (1...31).contains(date[2]), (0...23).contains(time[0]), (0...59).contains(time[1]),
            (0...59).contains(time.count == 3 ? time[2] : 0), (1970...9999).contains(date[0])
        else { return nil }
        (self.year, self.month, self.day) = (date[0], date[1], date[2])
        (self.hour, self.minute, self.second) = (time[0], time[1], time.count == 3 ? time[2] : 0)
    }

    package var description: String {
        String(format: "%04d-%02d-%02dT%02d:%02d:%02d", self.year, self.month, self.day, self.hour, self.minute, self.second)
    }

    /// The instant (ms since 1970) this wall time has in `timeZone` (an IANA name); UTC when the
    /// name is missing or unknown.
    package func instant(timeZone name: String?) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = name.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: "UTC")!
        let components = DateComponents(year: self.year, month: self.month, day: self.day, hour: self.hour, minute: self.minute, second: self.second)
        guard let date = calendar.date(from: components) else { return 0 }
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}

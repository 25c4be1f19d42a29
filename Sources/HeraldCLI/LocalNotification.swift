// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A local notification the app scheduled on the virtual device, as `UNNotificationRequest`
/// with a `UNTimeIntervalNotificationTrigger` or a `UNCalendarNotificationTrigger` would be:
/// shown beside remote notifications, under the same authorization rules.
///
/// `herald device --local SPEC`, SPEC being `;`-separated:
/// - `after=SECONDS` (a time-interval trigger) or `at=HH:MM[:SS]` (a calendar trigger on those
///   date components; `weekday=1…7` narrows it, 1 being Sunday);
/// - `repeat` to fire again (a repeating time interval is at least 60 s, as on iOS);
/// - `title=…`, `body=…`, `badge=N`, `sound=NAME`, `id=…`.
struct LocalNotification: Sendable, Equatable {
    enum Trigger: Sendable, Equatable {
        case timeInterval(TimeInterval, repeats: Bool)
        case calendar(DateComponents, repeats: Bool)
    }

    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    var identifier: String
    var trigger: Trigger
    var title = ""
    var body = ""
    var badge: Int?
    var sound: String?

    init(identifier: String, trigger: Trigger, title: String = "", body: String = "", badge: Int? = nil, sound: String? = nil) {
        self.identifier = identifier
        self.trigger = trigger
        self.title = title
        self.body = body
        self.badge = badge
        self.sound = sound
    }

    init(spec: String) throws {
        var fields: [String: String] = [:]
        var repeats = false
        for part in spec.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 1, pair[0] == "repeat" {
                repeats = true
            } else if pair.count == 2 {
                fields[pair[0]] = pair[1]
            } else {
                throw Invalid(description: "--local: \(part) is not KEY=VALUE or repeat")
            }
        }
        let trigger: Trigger
        if let after = fields["after"] {
            guard let seconds = TimeInterval(after), seconds > 0 else { throw Invalid(description: "--local: after= takes seconds > 0") }
            // UNTimeIntervalNotificationTrigger refuses a repeating interval under 60 seconds.
            guard !repeats || seconds >= 60 else { throw Invalid(description: "--local: a repeating time interval is at least 60 seconds") }
            trigger = .timeInterval(seconds, repeats: repeats)
        } else if let at = fields["at"] {
            let parts = at.split(separator: ":").map { Int($0) }
            guard (2...3).contains(parts.count), let hour = parts[0], let minute = parts[1], (0..<24).contains(hour), (0..<60).contains(minute)
            else { throw Invalid(description: "--local: at= takes HH:MM or HH:MM:SS") }
            var components = DateComponents(hour: hour, minute: minute, second: parts.count == 3 ? parts[2] ?? 0 : 0)
            if let weekday = fields["weekday"] {
                guard let day = Int(weekday), (1...7).contains(day) else { throw Invalid(description: "--local: weekday= takes 1…7") }
                components.weekday = day
            }
            trigger = .calendar(components, repeats: repeats)
        } else {
            throw Invalid(description: "--local: give after=SECONDS or at=HH:MM")
        }
        var badge: Int?
        if let text = fields["badge"] {
            guard let value = Int(text) else { throw Invalid(description: "--local: badge= takes a number") }
            badge = value
        }
        self.init(
            identifier: fields["id"] ?? "local-" + UUID().uuidString.prefix(8).lowercased(), trigger: trigger, title: fields["title"] ?? "",
            body: fields["body"] ?? "", badge: badge, sound: fields["sound"])
        guard !self.title.isEmpty || !self.body.isEmpty else { throw Invalid(description: "--local: give a title= or a body=") }
    }

    /// When it fires next, after it fired at `last` (nil: not yet, scheduled at `scheduled`);
    /// nil when it will not fire again.
    func nextFire(scheduled: Date, last: Date?, calendar: Calendar) -> Date? {
        switch self.trigger {
        case .timeInterval(let seconds, let repeats):
            guard let last else { return scheduled.addingTimeInterval(seconds) }
            return repeats ? last.addingTimeInterval(seconds) : nil
        case .calendar(let components, let repeats):
            if last != nil, !repeats { return nil }
            return calendar.nextDate(after: last ?? scheduled, matching: components, matchingPolicy: .nextTime)
        }
    }

    /// The payload the device shows, as if it had come from the app's own scheduling.
    var payload: Data {
        var aps: [String: Any] = ["alert": ["title": self.title, "body": self.body]]
        if let badge = self.badge { aps["badge"] = badge }
        if let sound = self.sound { aps["sound"] = sound }
        return (try? JSONSerialization.data(withJSONObject: ["aps": aps])) ?? Data()
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// An app's frequency cap: at most `limit` alerts to one person within any `windowSeconds`
/// (rolling), counted per app, or per app and notification category. A person is a user id; a
/// device without one is a person of its own. Only alert pushes count and are capped.
///
/// A delivery over the cap is not sent: it fails with reason ``reason``, or, if its send asked to
/// defer, waits (pending, the same reason) until the oldest alert in the window leaves it. The
/// drivers apply it in the claim's own transaction (PostgreSQL: under an advisory lock per
/// stored row, taken in key order), so it is exact however many claims run at once, in however many
/// processes. Plain values in, decisions out.
package struct FrequencyCap: Sendable, Hashable, CustomStringConvertible {
    package var limit: Int
    package var windowSeconds: Int64
    package var perCategory: Bool

    /// Alerts per window: 1 to 1000; the window: 60 s to 30 days.
    package static let limits = 1...1000
    package static let windows: ClosedRange<Int64> = 60...2_592_000
    /// The reason a capped (failed or deferred) delivery carries.
    package static let reason = "FrequencyCapped"

    package init?(limit: Int, windowSeconds: Int64, perCategory: Bool = false) {
        guard Self.limits.contains(limit), Self.windows.contains(windowSeconds) else { return nil }
        self.limit = limit
        self.windowSeconds = windowSeconds
        self.perCategory = perCategory
    }

    /// The stored form: `LIMIT/SECONDS`, `/category` when per category.
    package init?(_ stored: String) {
        let parts = stored.split(separator: "/")
        guard (2...3).contains(parts.count), let limit = Int(parts[0]), let window = Int64(parts[1]),
            parts.count == 2 || parts[2] == "category"
        else { return nil }
        self.init(limit: limit, windowSeconds: window, perCategory: parts.count == 3)
    }

    package var description: String { "\(self.limit)/\(self.windowSeconds)" + (self.perCategory ? "/category" : "") }

    var windowMilliseconds: Int64 { self.windowSeconds * 1000 }
}

/// The cap a notification took when accepted: the app's, what to do over it, and the
/// notification's category (when the cap counts per category).
package struct NotificationCap: Sendable, Hashable, CustomStringConvertible {
    package var cap: FrequencyCap
    /// Over the cap: wait for room (true) or fail (false, the default).
    package var deferring: Bool
    /// `aps.category`, counted apart when the cap is per category ("" for none).
    package var category: String

    package init(cap: FrequencyCap, deferring: Bool, category: String?) {
        self.cap = cap
        self.deferring = deferring
        self.category = cap.perCategory ? (category ?? "") : ""
    }

    /// The stored form: `LIMIT/SECONDS/fail|defer`, then `/CATEGORY` when per category.
    package init?(_ stored: String) {
        let parts = stored.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        guard (3...4).contains(parts.count), let limit = Int(parts[0]), let window = Int64(parts[1]),
            let cap = FrequencyCap(limit: limit, windowSeconds: window, perCategory: parts.count == 4),
            parts[2] == "fail" || parts[2] == "defer"
        else { return nil }
        self.init(cap: cap, deferring: parts[2] == "defer", category: parts.count == 4 ? String(parts[3]) : nil)
    }

    package var description: String {
        "\(self.cap.limit)/\(self.cap.windowSeconds)/\(self.deferring ? "defer" : "fail")" + (self.cap.perCategory ? "/" + self.category : "")
    }
}

extension FrequencyCap {
    /// Whom a cap counts: one person of one app (in one category).
    package struct Key: Sendable, Hashable, Comparable {
        package var appID: String
        /// `u:<user id>`, or `d:<device id>` for a device without a user.
        package var subject: String
        package var category: String

        package init(appID: String, subject: String, category: String) {
            self.appID = appID
            self.subject = subject
            self.category = category
        }

        package static func < (lhs: Key, rhs: Key) -> Bool {
            (lhs.appID, lhs.subject, lhs.category) < (rhs.appID, rhs.subject, rhs.category)
        }

        /// The device of a person who is a device without a user (`d:<id>`).
        package var device: Int64? {
            self.subject.hasPrefix("d:") ? Int64(self.subject.dropFirst(2)) : nil
        }

        /// A 64-bit lock key (FNV-1a of the three parts, each followed by a zero byte but the
        /// last), for PostgreSQL's advisory locks.
        package var lockKey: Int64 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            func add(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            for byte in self.appID.utf8 { add(byte) }
            add(0)
            for byte in self.subject.utf8 { add(byte) }
            add(0)
            for byte in self.category.utf8 { add(byte) }
            return Int64(bitPattern: hash)
        }
    }

    /// What becomes of a capped delivery.
    package enum Outcome: Sendable, Hashable {
        /// Over the cap: failed, never sent.
        case capped
        /// Over the cap: pending until then (ms).
        case deferred(until: Int64)
    }

    /// What a claim decided: each capped delivery's fate (by index), and the history each person
    /// it admitted alerts to has now (the times of their alerts still in the window), in the
    /// order of the claim's deliveries: a broadcast's chunk is in device order, so its people's
    /// rows are written next to each other in the key's index instead of all over it.
    package struct Decision: Sendable, Hashable {
        package var outcomes: [Int: Outcome] = [:]
        package var history: [Counted] = []
    }

    /// A person's history as a claim leaves it.
    package struct Counted: Sendable, Hashable {
        package var key: Key
        package var times: [Int64]

        package init(key: Key, times: [Int64]) {
            self.key = key
            self.times = times
        }
    }

    /// The devices of `claimed` whose user the claim needs: those of alerts whose notification
    /// has a cap. Empty (and nothing read) when no cap is active.
    package static func devices(_ claimed: [ClaimedDelivery]) -> [Int64] {
        // By index, here and below: a loop over the elements copies each delivery (a retain per
        // string and array of it), for a field or two.
        var devices: [Int64] = []
        for index in claimed.indices where claimed[index].pushType == .alert && claimed[index].frequencyCap != nil {
            devices.append(claimed[index].deviceID)
        }
        return devices
    }

    /// A capped delivery (by its index in the claim) and the person it counts against.
    package struct Capped: Sendable, Hashable {
        package var index: Int
        package var key: Key

        package init(index: Int, key: Key) {
            self.index = index
            self.key = key
        }
    }

    /// The person each capped delivery of `claimed` counts against, in the claim's order, from
    /// its device's user (`users`; a device missing from it has none).
    package static func keys(_ claimed: [ClaimedDelivery], users: [Int64: String]) -> [Capped] {
        var keys: [Capped] = []
        for index in claimed.indices where claimed[index].pushType == .alert {
            guard let category = claimed[index].frequencyCap?.category else { continue }
            let device = claimed[index].deviceID
            let subject = users[device].map { "u:" + $0 } ?? "d:\(device)"
            keys.append(Capped(index: index, key: Key(appID: claimed[index].appID, subject: subject, category: category)))
        }
        return keys
    }

    /// The people of `keys`, each once, in the order of their first delivery: a broadcast's
    /// chunk is in device order, so their rows are looked up and written in the key's order too
    /// (next to each other in its index instead of all over it).
    package static func inClaimOrder(_ keys: [Capped]) -> [Key] {
        var seen = Set<Key>(minimumCapacity: keys.count)
        var people: [Key] = []
        people.reserveCapacity(keys.count)
        for capped in keys where seen.insert(capped.key).inserted { people.append(capped.key) }
        return people
    }

    /// Admits the capped deliveries of `claimed` in order, at `now`, against each person's
    /// `history` (the times of their alerts, as stored; older than a window is ignored): one
    /// with room is admitted and counted, one without is capped or deferred.
    package static func decide(_ claimed: [ClaimedDelivery], keys: [Capped], history stored: [Key: [Int64]], now: Int64) -> Decision {
        var decision = Decision()
        // Each person's times so far in this claim, and as they were at the last alert admitted:
        // each person once, in the order of their first delivery; `slots` finds them.
        var slots: [Key: Int] = [:]
        slots.reserveCapacity(keys.count)
        var people: [(key: Key, person: Person)] = []
        people.reserveCapacity(keys.count)
        for capped in keys {
            guard let cap = claimed[capped.index].frequencyCap else { continue }
            let slot: Int
            if let known = slots[capped.key] {
                slot = known
            } else {
                slot = people.count
                slots[capped.key] = slot
                people.append((capped.key, Person(times: stored[capped.key] ?? [])))
            }
            if let outcome = people[slot].person.admit(cap, now: now) { decision.outcomes[capped.index] = outcome }
        }
        decision.history.reserveCapacity(people.count)
        for (key, person) in people {
            if let admitted = person.admitted { decision.history.append(Counted(key: key, times: admitted)) }
        }
        return decision
    }

    /// One person's alerts in a claim being decided.
    private struct Person {
        /// The times of their alerts so far (stored, then admitted by this claim).
        var times: [Int64]
        /// The times as they were when the claim last admitted an alert to them; nil if it has not.
        var admitted: [Int64]?

        init(times: [Int64]) {
            self.times = times
        }

        /// Admits one alert under `cap` at `now` (nil), or says what becomes of it.
        mutating func admit(_ cap: NotificationCap, now: Int64) -> Outcome? {
            let window = cap.cap.windowMilliseconds
            if self.times.contains(where: { $0 <= now - window }) { self.times.removeAll { $0 <= now - window } }
            if !self.times.isSorted { self.times.sort() }
            if self.times.count < cap.cap.limit {
                self.times.append(now)
                self.admitted = self.times
                return nil
            }
            // Room comes when the oldest alerts leave the window: the count drops below the limit.
            return cap.deferring ? .deferred(until: self.times[self.times.count - cap.cap.limit] + window) : .capped
        }
    }

    /// How many consecutive device ids share a row: devices without a user are stored by the
    /// row-full (``row(of:)``). A broadcast's chunk is in device order, so a chunk of 1,000
    /// devices reads, locks and writes about 16 rows instead of 1,000 (on PostgreSQL each row
    /// written is a tuple, an index entry and their WAL).
    package static let devicesPerRow: Int64 = 64

    /// The row `person`'s history is stored in: a user's own (`u:<user id>`), or for a device
    /// without one its row-full's (`b:<device id / 64>`), which holds each of those devices'
    /// times as `id:t,t;id:t`. Rows, not people, are what the drivers lock, read and write.
    package static func row(of person: Key) -> Key {
        guard let device = person.device else { return person }
        return Key(appID: person.appID, subject: "b:\(device / Self.devicesPerRow)", category: person.category)
    }

    /// The rows of `people`, each once, in the order of their first person.
    package static func rows(of people: [Key]) -> [Key] {
        var seen = Set<Key>(minimumCapacity: people.count)
        return people.map(Self.row(of:)).filter { seen.insert($0).inserted }
    }

    /// The people's histories in `stored` (rows' texts by row): a user's row is their own; a
    /// row-full's holds its devices'.
    package static func history(stored: [Key: String]) -> [Key: [Int64]] {
        var history: [Key: [Int64]] = [:]
        for (row, text) in stored {
            guard row.subject.hasPrefix("b:") else {
                history[row] = Self.decode(text)
                continue
            }
            for (device, times) in Self.devices(text) {
                history[Key(appID: row.appID, subject: "d:\(device)", category: row.category)] = times
            }
        }
        return history
    }

    /// A row as a claim leaves it.
    package struct Written: Sendable, Hashable {
        package var key: Key
        package var text: String

        package init(key: Key, text: String) {
            self.key = key
            self.text = text
        }
    }

    /// The rows `counted` (a decision's people) are in, as the claim leaves them, in the order
    /// of their first person: a user's row is their history; a row-full keeps its other
    /// devices as `stored`, but those with no alert within the longest window (30 days), and
    /// takes the counted devices' new histories.
    package static func written(_ counted: [Counted], stored: [Key: String], now: Int64) -> [Written] {
        // A user's row, in place; each row-full's counted devices, in the order counted (a
        // broadcast's: ascending), its text made once all are known. (A decision counts each
        // person once.)
        var rows: [Written] = []
        var buckets: [Key: [(device: Int64, times: [Int64])]] = [:]
        for person in counted {
            guard let device = person.key.device else {
                rows.append(Written(key: person.key, text: Self.encode(person.times)))
                continue
            }
            let row = Self.row(of: person.key)
            if buckets[row] == nil { rows.append(Written(key: row, text: "")) }
            buckets[row, default: []].append((device, person.times))
        }
        let oldest = now - Self.windows.upperBound * 1000
        for position in rows.indices {
            guard var devices = buckets[rows[position].key] else { continue }
            if let text = stored[rows[position].key] {
                // The row's other devices, as stored, but those with no alert in the longest window.
                let fresh = Set(devices.map(\.device))
                devices += Self.devices(text).filter { !fresh.contains($0.device) && $0.times.contains { $0 > oldest } }
            }
            if !devices.isSorted(by: \.device) { devices.sort { $0.device < $1.device } }
            var text = ""
            text.reserveCapacity(devices.count * 24)
            for entry in devices {
                if !text.isEmpty { text += ";" }
                text += String(entry.device) + ":" + Self.encode(entry.times)
            }
            rows[position].text = text
        }
        return rows
    }

    /// A row-full's devices and their times, as stored (`id:t,t;id:t`).
    static func devices(_ text: String) -> [(device: Int64, times: [Int64])] {
        text.split(separator: ";").compactMap { entry in
            guard let colon = entry.firstIndex(of: ":"), let device = Int64(entry[..<colon]) else { return nil }
            return (device, Self.decode(entry[entry.index(after: colon)...]))
        }
    }

    /// The stored form of a person's history: the times, comma-separated.
    package static func encode(_ times: [Int64]) -> String {
        times.count == 1 ? String(times[0]) : times.map(String.init).joined(separator: ",")
    }

    package static func decode(_ text: (some StringProtocol)?) -> [Int64] {
        text?.split(separator: ",").compactMap { Int64($0) } ?? []
    }
}

extension Array where Element == Int64 {
    fileprivate var isSorted: Bool { self.isSorted(by: \.self) }
}

extension Array {
    /// Whether the elements are in ascending order of `key` (none out of place).
    fileprivate func isSorted(by key: (Element) -> Int64) -> Bool {
        guard self.count > 1 else { return true }
        for index in 1..<self.count where key(self[index - 1]) > key(self[index]) { return false }
        return true
    }
}

extension NotificationSpec {
    /// Takes the app's frequency cap, with what the send wants done over it
    /// (``deferOverCap``) and its category.
    package mutating func adoptFrequencyCap(_ cap: FrequencyCap?) {
        self.frequencyCap = cap.map { NotificationCap(cap: $0, deferring: self.deferOverCap, category: self.category) }
    }

    /// Takes the app's delivery policies (quiet hours, frequency cap) as the send asks.
    package mutating func adoptPolicies(_ app: AppSecurity) {
        self.adoptQuietHours(app.quietHours)
        self.adoptFrequencyCap(app.frequencyCap)
        self.adoptThrottle(app.throttlePerMinute)
    }
}

/// What the claim's delivery policies (quiet hours, then frequency caps) make of a delivery it
/// takes out of the batch: its state, when it is due (or failed), and why.
package struct SetAside: Sendable, Hashable {
    package var state: DeliveryState
    package var nextAttemptAt: Int64
    package var reason: String

    package init(state: DeliveryState, nextAttemptAt: Int64, reason: String) {
        self.state = state
        self.nextAttemptAt = nextAttemptAt
        self.reason = reason
    }

    /// The deliveries a claim sets aside (by index): those `held` for quiet hours (until when),
    /// those `throttled` until their slot, and those over a cap (`capped`); the rest of the batch
    /// is sent.
    package static func merge(
        held: [Int: Int64], throttled: [Int: Int64] = [:], capped: [Int: FrequencyCap.Outcome], now: Int64
    ) -> [Int: SetAside] {
        var result: [Int: SetAside] = [:]
        for (index, until) in held { result[index] = SetAside(state: .pending, nextAttemptAt: until, reason: QuietHours.reason) }
        for (index, slot) in throttled { result[index] = SetAside(state: .pending, nextAttemptAt: slot, reason: Throttle.reason) }
        for (index, outcome) in capped {
            switch outcome {
            case .capped: result[index] = SetAside(state: .failed, nextAttemptAt: now, reason: FrequencyCap.reason)
            case .deferred(let until): result[index] = SetAside(state: .pending, nextAttemptAt: until, reason: FrequencyCap.reason)
            }
        }
        return result
    }
}

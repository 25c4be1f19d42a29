// SPDX-License-Identifier: Apache-2.0

/// A notification's throttle: at most `throttlePerMinute` of its deliveries in any minute, so a
/// campaign cannot melt the app's backend when people tap. Each delivery takes a slot, the slots
/// `interval(perMinute:)` apart (the next free one kept per notification, in the database), and
/// is sent when its slot comes: at once if it has come, else set aside (pending, reason
/// ``reason``) until then, keeping its slot. Plain values in, decisions out.
package enum Throttle {
    /// The reason a delivery waiting for its slot carries.
    package static let reason = "Throttled"
    /// Deliveries per minute a notification or an app may ask for.
    package static let limits = 1...100_000

    /// Milliseconds between two slots: 60,000 / N, rounded up, so that no 60-second window holds
    /// more than N slots.
    package static func interval(perMinute: Int) -> Int64 {
        (60_000 + Int64(perMinute) - 1) / Int64(perMinute)
    }

    /// The throttled notifications among `claimed` whose deliveries (those not `skipping`) need
    /// slots, in id order (the order PostgreSQL locks their rows in).
    package static func notifications(_ claimed: [ClaimedDelivery], skipping: Set<Int> = []) -> [String] {
        var ids: Set<String> = []
        // By index: a loop over the elements copies each delivery, for two fields.
        for index in claimed.indices where claimed[index].throttlePerMinute != nil && !claimed[index].throttleSlotted {
            if !skipping.contains(index) { ids.insert(claimed[index].notificationID) }
        }
        return ids.sorted()
    }

    /// Gives each throttled delivery of `claimed` that has no slot yet (and is not `skipping`) the
    /// next slot of its notification, from `next` (the next free slot per notification; none:
    /// now): those whose slot is later than `now` are set aside until it (by index). Returns the
    /// next free slot of each notification after them.
    package static func decide(
        _ claimed: [ClaimedDelivery], skipping: Set<Int>, next stored: [String: Int64], now: Int64
    ) -> (aside: [Int: Int64], next: [String: Int64]) {
        var aside: [Int: Int64] = [:]
        var next: [String: Int64] = [:]
        for (index, delivery) in claimed.enumerated() {
            guard let perMinute = delivery.throttlePerMinute, !delivery.throttleSlotted, !skipping.contains(index) else { continue }
            let slot = max(next[delivery.notificationID] ?? stored[delivery.notificationID] ?? now, now)
            next[delivery.notificationID] = slot + Self.interval(perMinute: perMinute)
            if slot > now { aside[index] = slot }
        }
        return (aside, next)
    }
}

extension NotificationSpec {
    /// Takes the send's throttle (0: none), or the app's default when the send names none.
    package mutating func adoptThrottle(_ appDefault: Int?) {
        let asked = self.throttleRequested ?? appDefault ?? 0
        self.throttlePerMinute = asked > 0 ? asked : nil
    }
}

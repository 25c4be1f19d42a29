// SPDX-License-Identifier: Apache-2.0

/// A token bucket on plain values: `capacity` tokens at most (the burst), refilled at
/// `perSecond`; each admitted request takes one. Time is the caller's, in milliseconds, so the
/// same logic runs on any clock (the tests pass plain numbers).
package struct TokenBucket: Sendable, Equatable {
    /// How large a burst, and how fast it comes back.
    package struct Limit: Sendable, Hashable, CustomStringConvertible {
        /// Tokens when full: the requests admitted at once after a quiet spell. At least 1.
        package var capacity: Double
        /// Tokens added per second, up to `capacity`. More than 0.
        package var perSecond: Double

        package init(capacity: Double, perSecond: Double) {
            self.capacity = max(1, capacity)
            self.perSecond = max(0.000_001, perSecond)
        }

        /// `BURST/RATE`, such as `60/1` (a burst of 60, one more per second) or `10/0.5`.
        package init?(parsing text: String) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, let capacity = Double(parts[0]), let rate = Double(parts[1]), capacity >= 1, capacity <= 1e9, rate > 0,
                rate <= 1e9
            else { return nil }
            self.init(capacity: capacity, perSecond: rate)
        }

        package var description: String { "\(Self.text(self.capacity))/\(Self.text(self.perSecond))" }

        private static func text(_ value: Double) -> String {
            value == value.rounded() ? String(Int64(value)) : String(value)
        }

        /// Milliseconds from empty to full.
        package var fillMilliseconds: Double { self.capacity / self.perSecond * 1000 }
    }

    /// What a request gets.
    package enum Decision: Sendable, Equatable {
        case admitted
        /// Refused: a token comes back in this many whole seconds (at least 1), for `Retry-After`.
        case refused(retryAfterSeconds: Int)
    }

    package private(set) var tokens: Double
    /// When `tokens` was last brought up to date.
    package private(set) var updatedAt: Int64

    /// A full bucket: a caller never seen before gets the whole burst.
    package init(limit: Limit, now: Int64) {
        self.tokens = limit.capacity
        self.updatedAt = now
    }

    package init(tokens: Double, updatedAt: Int64) {
        self.tokens = tokens
        self.updatedAt = updatedAt
    }

    /// Adds what has come back since `updatedAt`. A clock that goes back adds nothing (and the
    /// bucket keeps its later time, so the same tokens are not added twice).
    package mutating func refill(limit: Limit, now: Int64) {
        guard now > self.updatedAt else { return }
        self.tokens = min(limit.capacity, self.tokens + Double(now - self.updatedAt) * limit.perSecond / 1000)
        self.updatedAt = now
    }

    /// Takes one token if there is one.
    package mutating func take(limit: Limit, now: Int64) -> Decision {
        self.refill(limit: limit, now: now)
        guard self.tokens >= 1 else { return .refused(retryAfterSeconds: Self.retryAfter(tokens: self.tokens, limit: limit)) }
        self.tokens -= 1
        return .admitted
    }

    /// Gives back a token taken (never above the capacity).
    package mutating func giveBack(limit: Limit, now: Int64) {
        self.refill(limit: limit, now: now)
        self.tokens = min(limit.capacity, self.tokens + 1)
    }

    /// Whole seconds until a bucket holding `tokens` has one again: at least 1.
    package static func retryAfter(tokens: Double, limit: Limit) -> Int {
        let seconds = (1 - min(tokens, 1)) / limit.perSecond
        return max(1, Int(min(seconds.rounded(.up), 86_400)))
    }

    /// Full again at `now`: it holds nothing a fresh bucket would not, so it can be forgotten.
    package func isIdle(limit: Limit, now: Int64) -> Bool {
        var copy = self
        copy.refill(limit: limit, now: now)
        return copy.tokens >= limit.capacity
    }
}

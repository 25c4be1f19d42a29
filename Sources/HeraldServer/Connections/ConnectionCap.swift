// SPDX-License-Identifier: Apache-2.0

/// How many API connections are open, against a cap: plain values, counted under a lock by
/// ``LimitedHTTP1Channel``.
struct ConnectionCap: Sendable, Equatable {
    enum Decision: Sendable, Equatable {
        case accept
        /// Over the cap: closed at once, not counted. `firstSinceAccepting` is true for the
        /// first refusal after a connection was last accepted (logged; the rest are not).
        case refuse(firstSinceAccepting: Bool)
    }

    let limit: Int
    private(set) var open = 0
    private var refusing = false

    init(limit: Int) {
        self.limit = limit
    }

    /// A connection was accepted by the kernel.
    mutating func opened() -> Decision {
        guard self.open < self.limit else {
            defer { self.refusing = true }
            return .refuse(firstSinceAccepting: !self.refusing)
        }
        self.open += 1
        self.refusing = false
        return .accept
    }

    /// An accepted connection closed.
    mutating func closed() {
        self.open = max(0, self.open - 1)
    }
}

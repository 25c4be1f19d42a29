// SPDX-License-Identifier: Apache-2.0
public import APNSModels

/// Something the emulator does instead of (or on top of) answering normally.
public enum FaultAction: Sendable, Hashable {
    /// Answer with this status and reason (e.g. 429 `TooManyRequests`, 500, 503).
    case status(Int, APNSReason)
    /// Answer normally, this many milliseconds late.
    case latency(milliseconds: Int64)
    /// Send GOAWAY (NO_ERROR, `{"reason": …}`) without answering the request, then close.
    case goAway(APNSReason)
    /// Close the TCP connection at once, answering nothing.
    case dropConnection
    /// Reset the request's stream with REFUSED_STREAM (the client should send it again).
    case refuseStream
    /// Lower (or raise) `MAX_CONCURRENT_STREAMS` on the connection, refusing streams beyond it.
    case streamLimit(Int)
}

/// Which requests a fault applies to.
public enum FaultScope: String, Sendable, Hashable, CaseIterable {
    case all
    case device
    case broadcast
    case channels
}

/// A fault armed through the control API or in code.
public struct FaultRule: Sendable, Hashable {
    public var id: Int
    public var action: FaultAction
    public var scope: FaultScope
    /// How many more requests it applies to; `nil` for every matching request.
    public var remaining: Int?
    /// The chance that a matching request is hit (1 = always).
    public var probability: Double

    public init(action: FaultAction, scope: FaultScope = .all, count: Int? = 1, probability: Double = 1) {
        self.id = 0
        self.action = action
        self.scope = scope
        self.remaining = count
        self.probability = probability
    }
}

/// A small, fast, seedable generator (xoshiro256**) for per-connection ids and fault dice.
struct Xoshiro256: RandomNumberGenerator, Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    init(seed: UInt64) {
        var splitMix = seed
        func next() -> UInt64 {
            splitMix &+= 0x9E37_79B9_7F4A_7C15
            var z = splitMix
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        self.state = (next(), next(), next(), next())
    }

    init() {
        var system = SystemRandomNumberGenerator()
        self.init(seed: system.next())
    }

    mutating func next() -> UInt64 {
        let result = ((self.state.1 &* 5) << 7 | (self.state.1 &* 5) >> 57) &* 9
        let t = self.state.1 << 17
        self.state.2 ^= self.state.0
        self.state.3 ^= self.state.1
        self.state.1 ^= self.state.2
        self.state.0 ^= self.state.3
        self.state.2 ^= t
        self.state.3 = self.state.3 << 45 | self.state.3 >> 19
        return result
    }
}

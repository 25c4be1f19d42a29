// SPDX-License-Identifier: Apache-2.0
public import APNSModels
import Synchronization

/// The emulator's wall clock: the system time plus an offset that tests (or the control API)
/// can move, so one-hour token expiry, the 20-minute token-update rule, storage expiry and 410
/// timestamps can be exercised without waiting.
public final class EmulatorClock: EpochClock {
    private let offsetMilliseconds: Mutex<Int64>
    /// Where a standing clock stands (before any offset); `nil` follows the system clock.
    private let fixedMilliseconds: Int64?

    /// The system clock, optionally shifted.
    public init(offsetSeconds: Int64 = 0) {
        self.offsetMilliseconds = Mutex(offsetSeconds * 1000)
        self.fixedMilliseconds = nil
    }

    /// A clock that stands still at `epochSeconds` until advanced.
    public init(fixedAt epochSeconds: Int64) {
        self.offsetMilliseconds = Mutex(0)
        self.fixedMilliseconds = epochSeconds * 1000
    }

    /// Milliseconds since 1970.
    public var nowMilliseconds: Int64 {
        (self.fixedMilliseconds ?? SystemEpochClock().nowMilliseconds) + self.offsetMilliseconds.withLock { $0 }
    }

    /// Moves the clock forward (or back, with a negative value).
    public func advance(seconds: Int64) {
        let (milliseconds, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        self.advance(milliseconds: overflow ? (seconds > 0 ? Int64.max / 2 : Int64.min / 2) : milliseconds)
    }

    public func advance(milliseconds: Int64) {
        self.offsetMilliseconds.withLock { offset in
            let (sum, overflow) = offset.addingReportingOverflow(milliseconds)
            offset = overflow ? (milliseconds > 0 ? Int64.max / 2 : Int64.min / 2) : sum
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Synchronization

/// The FCM emulator's wall clock: the system time (or a standing time) plus an offset that tests
/// can move, so access-token expiry and JWT time windows can be exercised without waiting.
public final class FCMEmulatorClock: Sendable {
    private let offsetMilliseconds: Mutex<Int64>
    /// Where a standing clock stands (before any offset); `nil` follows the system clock.
    private let fixedMilliseconds: Int64?

    /// A fresh clock that follows the system time.
    public static var system: FCMEmulatorClock { FCMEmulatorClock() }

    /// A clock that stands still at `milliseconds` since 1970 until advanced.
    public static func manual(startingAt milliseconds: Int64) -> FCMEmulatorClock {
        FCMEmulatorClock(fixedMilliseconds: milliseconds)
    }

    /// The system clock, shifted by `offsetSeconds`.
    public init(offsetSeconds: Int64 = 0) {
        self.offsetMilliseconds = Mutex(offsetSeconds &* 1000)
        self.fixedMilliseconds = nil
    }

    private init(fixedMilliseconds: Int64) {
        self.offsetMilliseconds = Mutex(0)
        self.fixedMilliseconds = fixedMilliseconds
    }

    /// Milliseconds since 1970.
    public var nowMilliseconds: Int64 {
        (self.fixedMilliseconds ?? SystemEpochClock().nowMilliseconds) &+ self.offsetMilliseconds.withLock { $0 }
    }

    /// Whole seconds since 1970.
    public var nowSeconds: Int64 {
        let milliseconds = self.nowMilliseconds
        return milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
    }

    /// Moves the clock forward (or back, with a negative value).
    public func advance(seconds: Int64) {
        let (milliseconds, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        self.advance(milliseconds: overflow ? (seconds > 0 ? Int64.max / 4 : Int64.min / 4) : milliseconds)
    }

    public func advance(milliseconds: Int64) {
        self.offsetMilliseconds.withLock { offset in
            let (sum, overflow) = offset.addingReportingOverflow(milliseconds)
            offset = overflow ? (milliseconds > 0 ? Int64.max / 4 : Int64.min / 4) : sum
        }
    }
}

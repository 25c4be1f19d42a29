// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Synchronization

/// The Web Push emulator's wall clock: the system time (or a standing time) plus an offset that
/// tests can move, so VAPID `exp` windows and message TTLs can be exercised without waiting.
package final class WebPushEmulatorClock: Sendable {
    private let offsetMilliseconds: Mutex<Int64>
    /// Where a standing clock stands (before any offset); `nil` follows the system clock.
    private let fixedMilliseconds: Int64?

    /// A fresh clock that follows the system time.
    package static var system: WebPushEmulatorClock { WebPushEmulatorClock() }

    /// A clock that stands still at `milliseconds` since 1970 until advanced.
    package static func manual(startingAt milliseconds: Int64) -> WebPushEmulatorClock {
        WebPushEmulatorClock(fixedMilliseconds: milliseconds)
    }

    /// The system clock, shifted by `offsetSeconds`.
    package init(offsetSeconds: Int64 = 0) {
        self.offsetMilliseconds = Mutex(offsetSeconds &* 1000)
        self.fixedMilliseconds = nil
    }

    private init(fixedMilliseconds: Int64) {
        self.offsetMilliseconds = Mutex(0)
        self.fixedMilliseconds = fixedMilliseconds
    }

    /// Milliseconds since 1970.
    package var nowMilliseconds: Int64 {
        (self.fixedMilliseconds ?? SystemEpochClock().nowMilliseconds) &+ self.offsetMilliseconds.withLock { $0 }
    }

    /// Whole seconds since 1970.
    package var nowSeconds: Int64 {
        let milliseconds = self.nowMilliseconds
        return milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
    }

    /// Moves the clock forward (or back, with a negative value).
    package func advance(seconds: Int64) {
        let (milliseconds, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        self.advance(milliseconds: overflow ? (seconds > 0 ? Int64.max / 4 : Int64.min / 4) : milliseconds)
    }

    package func advance(milliseconds: Int64) {
        self.offsetMilliseconds.withLock { offset in
            let (sum, overflow) = offset.addingReportingOverflow(milliseconds)
            offset = overflow ? (milliseconds > 0 ? Int64.max / 4 : Int64.min / 4) : sum
        }
    }
}

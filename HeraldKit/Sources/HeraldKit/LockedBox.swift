// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A value behind an `NSLock`: what `Synchronization.Mutex` does, on every OS HeraldKit supports
/// (Mutex needs iOS 18 / macOS 15). Hold the lock only for the closure; no I/O, no `await` in it.
final class LockedBox<Value>: @unchecked Sendable {
    // Safe: `value` is only read or written with `lock` held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.value)
    }
}

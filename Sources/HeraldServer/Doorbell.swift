// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Wakes idle workers when work is committed.
///
/// Each worker notes the count of rings when it starts to look for work: a ring during that
/// look sends it looking again at once, and every waiter ends at its own timeout, whoever else
/// waits or rings. (A shared "rung" flag, cleared by whichever worker looked first, once let one
/// worker's timeout be consumed by another, so that it waited for a ring that never came.)
final class Doorbell: Sendable {
    private struct State {
        var rings: UInt64 = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Waits whose timeout or cancellation came before they started waiting.
        var ended: Set<Int> = []
        var nextID = 0
    }

    private let state = Mutex(State())

    /// Rings so far: a worker reads it as it starts to look, and waits `after` it.
    var rings: UInt64 { self.state.withLock { $0.rings } }

    /// Waits in progress (tests watch it to ring only once everyone waits).
    var waiting: Int { self.state.withLock { $0.waiters.count } }

    /// Wakes every waiter, and any wait that starts from an earlier count.
    func ring() {
        let waiters = self.state.withLock { state in
            state.rings &+= 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until a ring after `seen` (at once if there was one), `timeout`, or cancellation.
    func wait(after seen: UInt64, timeout: Duration) async {
        let id = self.state.withLock { state in
            state.nextID &+= 1
            return state.nextID
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Cancelled when the ring comes first; ends the wait itself otherwise.
                try? await Task.sleep(for: timeout)
                self.end(id)
            }
            group.addTask {
                await withCheckedContinuation { continuation in
                    let now = self.state.withLock { state in
                        if state.rings != seen || state.ended.remove(id) != nil { return true }
                        state.waiters[id] = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            }
            await group.next()
            group.cancelAll()
        }
        // Both children are done: a late `end` left a mark that nothing will read.
        _ = self.state.withLock { $0.ended.remove(id) }
    }

    private func end(_ id: Int) {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
            state.ended.insert(id)
            return nil
        }
        waiter?.resume()
    }
}

// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Wakes idle workers when work is committed.
///
/// Each worker notes the count of rings when it starts to look for work: a ring during that
/// look sends it looking again at once, and every waiter ends at its own timeout, whoever else
/// waits or rings. (A shared "rung" flag, cleared by whichever worker looked first, once let one
/// worker's timeout be consumed by another, so that it waited for a ring that never came.)
final class Doorbell: Sendable {
    private let state = Mutex(DoorbellState<CheckedContinuation<Void, Never>>())

    /// Rings so far: a worker reads it as it starts to look, and waits `after` it.
    var rings: UInt64 { self.state.withLock { $0.rings } }

    /// Waits in progress (tests watch it to ring only once everyone waits).
    var waiting: Int { self.state.withLock { $0.waiters.count } }

    /// Wakes every waiter, and any wait that starts from an earlier count.
    func ring() {
        for waiter in self.state.withLock({ $0.ring() }) { waiter.resume() }
    }

    /// Waits until a ring after `seen` (at once if there was one), `timeout`, or cancellation.
    func wait(after seen: UInt64, timeout: Duration) async {
        let id = self.state.withLock { $0.newWait() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Cancelled when the ring comes first; ends the wait itself otherwise.
                try? await Task.sleep(for: timeout)
                self.state.withLock { $0.end(id) }?.resume()
            }
            group.addTask {
                await withCheckedContinuation { continuation in
                    if self.state.withLock({ $0.start(id, after: seen, waiter: continuation) }) { continuation.resume() }
                }
            }
            await group.next()
            group.cancelAll()
        }
        self.state.withLock { $0.finish(id) }
    }
}

/// The doorbell's bookkeeping on plain values: which waits are waiting, and which ended (by
/// their timeout or cancellation) before they started to wait. `Waiter` is what a wait resumes.
struct DoorbellState<Waiter> {
    private(set) var rings: UInt64 = 0
    private(set) var waiters: [Int: Waiter] = [:]
    /// Waits whose timeout or cancellation came before they started waiting.
    private(set) var ended: Set<Int> = []
    private var nextID = 0

    /// A new wait's id.
    mutating func newWait() -> Int {
        self.nextID &+= 1
        return self.nextID
    }

    /// Wait `id` starts waiting: true when it must end at once instead (a ring after `seen`, or
    /// its own timeout came first); otherwise `waiter` is kept until a ring or `end(id)`.
    mutating func start(_ id: Int, after seen: UInt64, waiter: Waiter) -> Bool {
        if self.rings != seen || self.ended.remove(id) != nil { return true }
        self.waiters[id] = waiter
        return false
    }

    /// Wait `id`'s timeout or cancellation: its waiter to resume if it is waiting, or a mark
    /// that ends it when it starts.
    mutating func end(_ id: Int) -> Waiter? {
        if let waiter = self.waiters.removeValue(forKey: id) { return waiter }
        self.ended.insert(id)
        return nil
    }

    /// A ring: every waiter, to resume.
    mutating func ring() -> [Waiter] {
        self.rings &+= 1
        defer { self.waiters.removeAll() }
        return Array(self.waiters.values)
    }

    /// Wait `id` is over: a late `end` left a mark that nothing will read.
    mutating func finish(_ id: Int) {
        self.ended.remove(id)
    }
}

// SPDX-License-Identifier: Apache-2.0
import DequeModule
import NIOCore
import Synchronization

/// The bounded queue between callers (any thread) and the pool (its event loop).
///
/// Callers reserve a place first — suspending while the queue is full, which is the client's
/// back-pressure — then enqueue. The pool takes requests only as streams free up, so a full wire
/// fills this queue and a full queue holds callers back: memory stays bounded.
///
/// Waking the event loop costs a task hop, so it happens only when the pool said it is waiting
/// for work (`wakeNeeded`); otherwise the pool pulls by itself when a stream frees up.
final class Intake: Sendable {
    private struct State: ~Copyable {
        var queue = Deque<Pending>()
        var reserved = 0
        var wakeNeeded = true
        var closed = false
        var waiters = Deque<UnsafeContinuation<Void, Never>>()
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Waits for room; `false` once the client is shut down.
    func reserve() async -> Bool {
        while true {
            let admitted: Bool? = self.state.withLock { state in
                if state.closed { return false }
                if state.queue.count + state.reserved < self.capacity {
                    state.reserved += 1
                    return true
                }
                return nil
            }
            if let admitted { return admitted }
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                let waitNow = self.state.withLock { state in
                    guard !state.closed, state.queue.count + state.reserved >= self.capacity else { return false }
                    state.waiters.append(continuation)
                    return true
                }
                if !waitNow { continuation.resume() }
            }
        }
    }

    enum Enqueued {
        case queued(wake: Bool)
        case closed
    }

    /// Adds a request whose place was reserved.
    func enqueue(_ pending: Pending) -> Enqueued {
        self.state.withLock { state in
            state.reserved -= 1
            if state.closed { return .closed }
            state.queue.append(pending)
            if state.wakeNeeded {
                state.wakeNeeded = false
                return .queued(wake: true)
            }
            return .queued(wake: false)
        }
    }

    /// Takes up to `limit` requests, oldest first. When that empties the queue, the pool is
    /// marked as waiting, so the next `enqueue` wakes it.
    func take(upTo limit: Int) -> [Pending] {
        guard limit > 0 else { return [] }
        let (taken, waiters) = self.state.withLock { state -> ([Pending], [UnsafeContinuation<Void, Never>]) in
            let count = min(limit, state.queue.count)
            var taken: [Pending] = []
            taken.reserveCapacity(count)
            for _ in 0..<count { taken.append(state.queue.removeFirst()) }
            // Empty now: the next request wakes the pool. Not empty: the pool pulls by itself
            // when a stream frees up (an answer, or the sweep after a deadline).
            state.wakeNeeded = state.queue.isEmpty
            let released = min(count, state.waiters.count)
            var waiters: [UnsafeContinuation<Void, Never>] = []
            for _ in 0..<released { waiters.append(state.waiters.removeFirst()) }
            return (taken, waiters)
        }
        for waiter in waiters { waiter.resume() }
        return taken
    }

    /// Removes the requests whose deadline has passed.
    func removeExpired(now: NIODeadline) -> [Pending] {
        let (expired, waiters) = self.state.withLock { state -> ([Pending], [UnsafeContinuation<Void, Never>]) in
            guard state.queue.contains(where: { $0.deadline <= now }) else { return ([], []) }
            var expired: [Pending] = []
            var kept = Deque<Pending>()
            for pending in state.queue {
                if pending.deadline <= now { expired.append(pending) } else { kept.append(pending) }
            }
            state.queue = kept
            let released = min(expired.count, state.waiters.count)
            var waiters: [UnsafeContinuation<Void, Never>] = []
            for _ in 0..<released { waiters.append(state.waiters.removeFirst()) }
            return (expired, waiters)
        }
        for waiter in waiters { waiter.resume() }
        return expired
    }

    var isEmpty: Bool { self.state.withLock { $0.queue.isEmpty && $0.reserved == 0 } }

    /// Refuses new requests from now on; callers waiting for room are let go. Queued requests stay.
    func close() {
        let waiters = self.state.withLock { state -> Deque<UnsafeContinuation<Void, Never>> in
            state.closed = true
            let waiters = state.waiters
            state.waiters.removeAll()
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// A clock that moves only when told to, for deadlines in tests.
final class TestClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: self.offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - self.offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var id: Int
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private let state = Mutex<(now: Instant, nextID: Int, sleepers: [Sleeper])>((Instant(offset: .zero), 0, []))

    var now: Instant { self.state.withLock { $0.now } }
    var minimumResolution: Duration { .nanoseconds(1) }

    /// How many are asleep on it.
    var sleepers: Int { self.state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = self.state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Cancelled before it got here: the cancellation handler found nothing to wake.
                let (due, cancelled) = self.state.withLock { state -> (Bool, Bool) in
                    if Task.isCancelled { return (false, true) }
                    if deadline <= state.now { return (true, false) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return (false, false)
                }
                if cancelled {
                    continuation.resume(throwing: CancellationError())
                } else if due {
                    continuation.resume()
                }
            }
        } onCancel: {
            let sleeper = self.state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come.
    func advance(by duration: Duration) {
        let due = self.state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let due = state.sleepers.filter { $0.deadline <= state.now }
            state.sleepers.removeAll { $0.deadline <= state.now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}

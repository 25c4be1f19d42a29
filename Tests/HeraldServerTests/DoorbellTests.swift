import Testing

// SPDX-License-Identifier: Apache-2.0
@testable import HeraldServer

/// The engine's doorbell: idle workers wake at a ring, at their own timeout, or when cancelled,
/// whoever else waits or rings. A wait that never ends fails the suite's time limit.
@Suite(.timeLimit(.minutes(60))) struct DoorbellTests {
    static let never: Duration = .seconds(86_400)

    @Test("a ring before the wait ends it at once, and the next wait starts from it")
    func ringBefore() async {
        let bell = Doorbell()
        let seen = bell.rings
        bell.ring()
        await bell.wait(after: seen, timeout: Self.never)
        #expect(bell.rings == seen + 1)
        // Nothing new: this one ends at its timeout.
        await bell.wait(after: bell.rings, timeout: .milliseconds(1))
        #expect(bell.waiting == 0)
    }

    @Test("one ring wakes every waiter")
    func ringWakesAll() async {
        let bell = Doorbell()
        let seen = bell.rings
        let woken = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    await bell.wait(after: seen, timeout: Self.never)
                    return 1
                }
            }
            // Bounded: six waiters register within moments; the ring then finds them waiting.
            for _ in 0..<2000 where bell.waiting < 6 { try? await Task.sleep(for: .milliseconds(5)) }
            #expect(bell.waiting == 6)
            bell.ring()
            return await group.reduce(0, +)
        }
        #expect(woken == 6)
        #expect(bell.waiting == 0)
    }

    @Test("cancellation ends a wait")
    func cancellation() async {
        let bell = Doorbell()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await bell.wait(after: bell.rings, timeout: Self.never) }
            for _ in 0..<10_000 where bell.waiting < 1 { await Task.yield() }
            group.cancelAll()
        }
        #expect(bell.waiting == 0)
    }

    @Test("a timeout that comes before its wait starts is kept for that wait, whoever else looks or waits")
    func timeoutBeforeWaitIsNotLost() {
        // The interleaving that lost a wake-up with a shared flag: wait A's timeout fires before A
        // starts waiting; B starts waiting in between. A must end at once, B must wait on.
        var state = DoorbellState<String>()
        let seen = state.rings
        let a = state.newWait()
        let b = state.newWait()
        #expect(state.end(a) == nil, "A is not waiting yet: its timeout is marked")
        #expect(state.start(b, after: seen, waiter: "B") == false, "B waits: nothing rang, its timeout has not come")
        #expect(state.start(a, after: seen, waiter: "A") == true, "A ends at once: its own timeout came first")
        #expect(Array(state.waiters.keys) == [b])
        #expect(state.end(b) == "B", "B ends at its own timeout")
        state.finish(a)
        state.finish(b)
        #expect(state.waiters.isEmpty && state.ended.isEmpty)
    }

    @Test("a ring wakes those waiting and ends the waits that start from an earlier count; a later wait waits")
    func ringCounts() {
        var state = DoorbellState<Int>()
        let before = state.rings
        let (a, b, c) = (state.newWait(), state.newWait(), state.newWait())
        #expect(state.start(a, after: before, waiter: 1) == false)
        #expect(state.start(b, after: before, waiter: 2) == false)
        #expect(state.ring().sorted() == [1, 2])
        #expect(state.start(c, after: before, waiter: 3) == true, "C looked before the ring: it looks again at once")
        let d = state.newWait()
        #expect(state.start(d, after: state.rings, waiter: 4) == false, "D looked after it: it waits")
        #expect(state.end(a) == nil && state.end(d) == 4)
        for id in [a, b, c, d] { state.finish(id) }
        #expect(state.ended.isEmpty)
    }
}

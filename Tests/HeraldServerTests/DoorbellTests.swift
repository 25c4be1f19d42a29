// SPDX-License-Identifier: Apache-2.0
@testable import HeraldServer
import Testing

/// The engine's doorbell: idle workers wake at a ring, at their own timeout, or when cancelled,
/// whoever else waits or rings. A wait that never ends fails the suite's time limit.
@Suite(.timeLimit(.minutes(10))) struct DoorbellTests {
    static let never: Duration = .seconds(3600)

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

    @Test("every waiter ends at its own timeout, however the others wait and ring", arguments: 0..<8)
    func timeoutsAreNotShared(run: Int) async {
        // Workers in a loop of waits that time out at once, while rings come and go: every wait
        // ends, whichever of its timeout, a ring or another worker's look comes first. (The old
        // shared flag's lost wake-up was too narrow for this loop to catch; the tests above are the
        // ones that fail against it.)
        let bell = Doorbell()
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    for round in 0..<(200 + worker * 20) {
                        await bell.wait(after: bell.rings, timeout: .microseconds((worker + round) % 3 * 50))
                        if round % 11 == worker { bell.ring() }
                    }
                }
            }
        }
        #expect(bell.waiting == 0)
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore
import NIOPosix
import Testing

@testable import APNSClient

/// How the bulk send hands outcomes from the connections' event loop to the task taking them.
@Suite struct OutcomeCollectorTests {
    let outcome: APNSOutcome

    init() throws {
        self.outcome = APNSOutcome(
            request: try alert(String(repeating: "ab", count: 32)),
            result: .failure(APNSClientError(code: .deadlineExceeded, message: "not sent"))
        )
    }

    /// A consumer waiting in `next()`, once it is there (an event, not a time).
    func waitingConsumer(_ collector: OutcomeCollector) async -> Task<[APNSOutcome]?, Never> {
        let consumer = Task { await collector.next() }
        while !collector.consumerWaits { await Task.yield() }
        return consumer
    }

    @Test("outcomes appended in one turn of the event loop reach a waiting consumer as one batch, not one wake-up each")
    func oneBatchPerTurn() async throws {
        let collector = OutcomeCollector(window: 100)
        let consumer = await self.waitingConsumer(collector)
        let outcome = self.outcome
        try await MultiThreadedEventLoopGroup.singleton.next().submit {
            for _ in 0..<50 { collector.append(outcome) }
        }.get()
        #expect(await consumer.value?.count == 50)
        #expect(!collector.consumerWaits)
    }

    @Test("an outcome appended off any event loop wakes a waiting consumer at once; one appended while nobody waits is taken next")
    func offTheLoop() async throws {
        let collector = OutcomeCollector(window: 100)
        let consumer = await self.waitingConsumer(collector)
        collector.append(self.outcome)
        #expect(await consumer.value?.count == 1)
        collector.append(self.outcome)
        collector.append(self.outcome)
        #expect(await collector.next()?.count == 2)
    }
}

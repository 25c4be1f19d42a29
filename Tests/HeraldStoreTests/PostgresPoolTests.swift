// SPDX-License-Identifier: Apache-2.0
import HeraldTesting
import PostgresNIO
import Testing

@testable import HeraldPostgres

/// Herald's PostgreSQL pool settings against a real server.
@Suite(.heavy) struct PostgresPoolTests {
    @Test(
        "a pool whose connections keep closing when idle still stops when asked (no keep-alive lost on a closed connection)",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)), .timeLimit(.minutes(60))
    )
    func stopsAfterIdleCloses() async throws {
        let server = try #require(PostgresTestDatabase.serverURL, "HERALD_REQUIRE_POSTGRES=1 but HERALD_TEST_POSTGRES_URL is not set")
        var configuration = try PostgresLocation(url: server).clientConfiguration
        // Keep-alive off: with it (every 10 ms, idle timeout 20 ms) a longer churn of this kind
        // (four pools, 600 bursts each) left 8 of 20 pools hanging in five runs; without it, none.
        #expect(configuration.options.keepAliveBehavior == nil)
        // Herald's settings, but idle connections close within milliseconds instead of a minute,
        // so that connections open and close hundreds of times before each pool is stopped.
        configuration.options.connectionIdleTimeout = .milliseconds(20)
        let client = PostgresClient(configuration: configuration)
        let (cancelled, cancel) = AsyncStream.makeStream(of: Void.self)
        let answered = await withTaskGroup(of: Int?.self) { race in
            race.addTask {
                var answered = 0
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await client.run() }
                    for _ in 0..<100 {
                        answered += await withTaskGroup(of: Int.self) { burst in
                            for _ in 0..<Int.random(in: 1...5) {
                                burst.addTask { (try? await client.withConnection { try await $0.query("SELECT 1").get() }) == nil ? 0 : 1 }
                            }
                            return await burst.reduce(0, +)
                        }
                        try? await Task.sleep(for: .milliseconds(Int.random(in: 5...40)))
                    }
                    // The pool's `run()` must return once cancelled: this group waits for it.
                    cancel.yield()
                    group.cancelAll()
                }
                return answered
            }
            // The hang guard: from the cancellation on, the pool has a minute to stop.
            race.addTask {
                for await _ in cancelled { break }
                try? await Task.sleep(for: .seconds(60))
                if !Task.isCancelled { Issue.record("the pool did not stop within 60 s of its cancellation") }
                return nil
            }
            let first = await race.next() ?? nil
            race.cancelAll()
            return first
        }
        let count = try #require(answered, "the pool stopped")
        #expect(count >= 100, "every burst was answered (\(count) queries)")
    }
}

// SPDX-License-Identifier: Apache-2.0
@testable import HeraldPostgres
import HeraldTesting
import PostgresNIO
import Testing

/// Herald's PostgreSQL pool settings against a real server.
@Suite struct PostgresPoolTests {
    @Test(
        "a pool whose connections keep closing when idle still stops when asked (no keep-alive lost on a closed connection)",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)), .timeLimit(.minutes(10))
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
        let settings = configuration
        let stopped = await withTaskGroup(of: Int.self) { pools in
            for _ in 0..<1 {
                pools.addTask {
                    let client = PostgresClient(configuration: settings)
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
                        group.cancelAll()
                    }
                    return answered
                }
            }
            return await pools.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(stopped.count == 1)
        #expect(stopped.allSatisfy { $0 >= 100 })
    }
}

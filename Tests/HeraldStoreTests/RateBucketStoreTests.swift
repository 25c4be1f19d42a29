// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import HeraldPostgres
import HeraldTesting
import Logging
import Testing

/// The shared rate-limit buckets on PostgreSQL: one statement per lease, exact under concurrency.
@Suite(.heavy) struct RateBucketStoreTests {
    @Test(
        "a lease takes whole tokens up to what is left; concurrent leases together take exactly the bucket",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)))
    func leases() async throws {
        try await PostgresTestDatabase.with { database in
            try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { store in
                // One token per 1000 s: nothing comes back during the test.
                let limit = TokenBucket.Limit(capacity: 10, perSecond: 0.001)
                #expect(try await store.leaseRateTokens(bucket: "one", limit: limit, count: 4).granted == 4)
                #expect(try await store.leaseRateTokens(bucket: "one", limit: limit, count: 4).granted == 4)
                let partial = try await store.leaseRateTokens(bucket: "one", limit: limit, count: 4)
                #expect(partial.granted == 2 && partial.tokensLeft < 1, "\(partial)")
                let none = try await store.leaseRateTokens(bucket: "one", limit: limit, count: 4)
                #expect(none.granted == 0 && none.tokensLeft >= 0 && none.tokensLeft < 1, "\(none)")
                #expect(try await store.leaseRateTokens(bucket: "other", limit: limit, count: 1).granted == 1, "buckets are separate")

                let granted = try await withThrowingTaskGroup(of: Int.self) { group in
                    // 8 at once (a few pool connections: the suites share the server's), 16 wanted.
                    for _ in 0..<8 { group.addTask { try await store.leaseRateTokens(bucket: "shared", limit: limit, count: 2).granted } }
                    var total = 0
                    for try await granted in group { total += granted }
                    return total
                }
                #expect(granted == 10)
                // None is full again yet; a fast bucket is, and is forgotten.
                _ = try await store.leaseRateTokens(bucket: "fast", limit: TokenBucket.Limit(capacity: 1, perSecond: 1_000_000), count: 1)
                #expect(try await database.psql("SELECT count(*) FROM rate_buckets") == "4")
                var pruned = 0
                for _ in 0..<100 where pruned == 0 { pruned = try await store.pruneRateBuckets() }
                #expect(pruned == 1)
                #expect(try await database.psql("SELECT string_agg(bucket, ',' ORDER BY bucket) FROM rate_buckets") == "one,other,shared")
            }
        }
    }
}

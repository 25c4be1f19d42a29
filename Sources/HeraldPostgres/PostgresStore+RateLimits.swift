// SPDX-License-Identifier: Apache-2.0
package import HeraldCore

/// Rate-limit buckets shared by every process on the database (see ``LeasedRateLimiter``).
extension PostgresStore: RateBucketStore {
    /// One statement, atomic under the row's lock: the bucket (created full) is refilled by the
    /// time elapsed on the database's clock, so the processes' clocks do not matter, and up to
    /// `count` whole tokens are taken. It runs outside a transaction (one round trip).
    package func leaseRateTokens(bucket: String, limit: TokenBucket.Limit, count: Int) async throws -> RateLease {
        try await self.read { db in
            let row = try await db.query(
                Statements.LeaseRateTokens.self, [.text(bucket), .double(limit.capacity), .double(limit.perSecond), .double(Double(count))]
            )
            .first
            return RateLease(granted: Int(row?.double(0) ?? 0), tokensLeft: row?.double(1) ?? 0)
        }
    }

    package func pruneRateBuckets() async throws -> Int {
        try await self.read { db in
            try await db.query(
                "WITH gone AS (DELETE FROM rate_buckets WHERE full_at < (extract(epoch FROM clock_timestamp()) * 1000)::bigint RETURNING 1) SELECT count(*) FROM gone"
            ).first?.int(0).map(Int.init) ?? 0
        }
    }
}

extension Statements {
    /// One bucket's lease, at every rate-limited request: $1 bucket, $2 capacity, $3 tokens per
    /// second, $4 tokens wanted. In `DO UPDATE`, `b.` is the row as it was and
    /// `excluded.updated_at` the database's time now. Prepared once per connection, so each
    /// parameter's type is written out.
    enum LeaseRateTokens: FixedStatement {
        static let sql: String = {
            let (bucket, capacity, perSecond, wanted) = ("$1::text", "$2::float8", "$3::float8", "$4::float8")
            let refilled = "least(\(capacity), b.tokens + greatest(0, excluded.updated_at - b.updated_at) * \(perSecond) / 1000.0)"
            let grant = "least(\(wanted), floor(\(refilled)))"
            let left = "(\(refilled) - \(grant))"
            let first = "least(\(wanted), floor(\(capacity)))"
            return """
                INSERT INTO rate_buckets AS b (bucket, tokens, granted, updated_at, full_at)
                SELECT \(bucket), \(capacity) - \(first), \(first), now.ms, now.ms + (\(first) / \(perSecond) * 1000)::bigint
                FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms) AS now
                ON CONFLICT (bucket) DO UPDATE SET
                    granted = \(grant),
                    tokens = \(left),
                    updated_at = greatest(b.updated_at, excluded.updated_at),
                    full_at = greatest(b.updated_at, excluded.updated_at) + ((\(capacity) - \(left)) / \(perSecond) * 1000)::bigint
                RETURNING granted, tokens
                """
        }()
    }
}

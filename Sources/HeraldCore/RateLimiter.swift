// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Takes a token from a bucket, or says when one comes back.
package protocol RateLimiter: Sendable {
    func take(_ bucket: RateLimits.Bucket, now: Int64) async throws -> TokenBucket.Decision
}

/// The buckets of one process, in memory: exact for one process (SQLite). At most `maxBuckets`
/// are kept, so that a client cycling through addresses cannot grow memory without bound: a new
/// bucket past that forgets an idle one among the next few in order (a full bucket is what a new
/// one would be), or if none of those is, the first of them that is not a key's, which starts
/// full again when next seen (``BoundedTable``: a few buckets looked at per new one, never a
/// sweep of all of them). A key's bucket (for a register key, the whole app's rate) is
/// forgotten only when idle: there is one per key, so a flood of addresses cannot reset it.
package final class LocalRateLimiter: RateLimiter {
    private struct Entry {
        var bucket: TokenBucket
        var limit: TokenBucket.Limit
        var isKey: Bool
    }

    private let buckets: Mutex<BoundedTable<Entry>>
    package let maxBuckets: Int

    package init(maxBuckets: Int) {
        self.maxBuckets = max(4, maxBuckets)
        self.buckets = Mutex(BoundedTable(capacity: self.maxBuckets))
    }

    package func take(_ bucket: RateLimits.Bucket, now: Int64) -> TokenBucket.Decision {
        self.buckets.withLock { buckets in
            buckets.update(
                bucket.id, make: { Entry(bucket: TokenBucket(limit: bucket.limit, now: now), limit: bucket.limit, isKey: bucket.kind == .key) },
                forgettable: { $0.bucket.isIdle(limit: $0.limit, now: now) }, pinned: \.isKey
            ) { entry in
                entry.limit = bucket.limit
                return entry.bucket.take(limit: bucket.limit, now: now)
            }
        }
    }

    /// Buckets held now.
    package var count: Int { self.buckets.withLock { $0.count } }
}

/// Where buckets shared by several processes live (PostgreSQL): each lease is one atomic
/// statement that refills the bucket by the time elapsed on the database's clock and takes up to
/// `count` tokens.
package protocol RateBucketStore: Sendable {
    /// Takes up to `count` whole tokens (fewer when fewer are left; none when empty).
    func leaseRateTokens(bucket: String, limit: TokenBucket.Limit, count: Int) async throws -> RateLease
    /// Forgets the buckets that are full again (nothing in them a new one would not have): how many.
    func pruneRateBuckets() async throws -> Int
}

/// What one lease took from a shared bucket.
package struct RateLease: Sendable, Equatable {
    package var granted: Int
    /// Left in the shared bucket after the lease (how long until the next token, when none was granted).
    package var tokensLeft: Double

    package init(granted: Int, tokensLeft: Double) {
        self.granted = granted
        self.tokensLeft = tokensLeft
    }
}

/// Buckets shared by the processes on one database, spent locally from leases: a process takes
/// a batch of tokens (``RateLimits/leaseSize(_:)``) from the shared bucket in one statement and
/// admits from it without a round trip; requests arriving while a batch is being leased wait for
/// it instead of leasing their own; a refusal is remembered until the bucket's next token is due,
/// so a client over its limit costs no round trip either. Every token admitted was taken from
/// the shared bucket, so over any long period the processes together admit no more than one
/// bucket would; in a short window they can admit up to `processes × (lease − 1)` more (tokens
/// leased before the window, spent in it), and tokens leased but not used within the lease
/// lifetime are dropped (admitting less, never more).
package final class LeasedRateLimiter: RateLimiter {
    private struct Entry {
        var tokens = 0
        var expiresAt: Int64 = 0
        var refusedUntil: Int64 = 0
        /// A lease is in flight: requests meanwhile wait for its tokens.
        var leasing = false
        /// Resumed when the lease ends: admitted, refused, or nil to try again (the batch ran out).
        var waiters: [CheckedContinuation<TokenBucket.Decision?, any Error>] = []
    }

    private let entries: Mutex<BoundedTable<Entry>>
    private let store: any RateBucketStore
    private let limits: RateLimits

    package init(store: any RateBucketStore, limits: RateLimits) {
        self.store = store
        self.limits = limits
        self.entries = Mutex(BoundedTable(capacity: limits.maxBuckets))
    }

    private enum Local {
        case decided(TokenBucket.Decision)
        case lease
        case wait
    }

    package func take(_ bucket: RateLimits.Bucket, now: Int64) async throws -> TokenBucket.Decision {
        while true {
            if let decision = try await self.attempt(bucket, now: now) { return decision }
        }
    }

    private func attempt(_ bucket: RateLimits.Bucket, now: Int64) async throws -> TokenBucket.Decision? {
        let local: Local = self.entries.withLock { entries in
            entries.update(bucket.id, make: { Entry() }, forgettable: { Self.holdsNothing($0, now: now) }, pinned: \.leasing) { entry in
                if entry.tokens > 0, entry.expiresAt > now {
                    entry.tokens -= 1
                    return .decided(.admitted)
                }
                if entry.refusedUntil > now {
                    return .decided(.refused(retryAfterSeconds: max(1, Int((entry.refusedUntil - now + 999) / 1000))))
                }
                entry.tokens = 0
                if entry.leasing { return .wait }
                entry.leasing = true
                return .lease
            }
        }
        switch local {
        case .decided(let decision):
            return decision
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                let queued = self.entries.withLock { entries in
                    entries.modify(bucket.id) { entry in
                        guard entry.leasing else { return false }
                        entry.waiters.append(continuation)
                        return true
                    } ?? false
                }
                // The lease ended in between: try again.
                if !queued { continuation.resume(returning: nil) }
            }
        case .lease:
            return try await self.lease(bucket, now: now)
        }
    }

    private func lease(_ bucket: RateLimits.Bucket, now: Int64) async throws -> TokenBucket.Decision {
        let lease: RateLease
        do {
            lease = try await self.store.leaseRateTokens(bucket: bucket.id, limit: bucket.limit, count: self.limits.leaseSize(bucket.limit))
        } catch {
            let waiters = self.entries.withLock { entries -> [CheckedContinuation<TokenBucket.Decision?, any Error>] in
                entries.modify(bucket.id) { entry in
                    defer {
                        entry.leasing = false
                        entry.waiters = []
                    }
                    return entry.waiters
                } ?? []
            }
            for waiter in waiters { waiter.resume(throwing: error) }
            throw error
        }
        // The entry is there (one with a lease in flight is pinned); `update` makes it otherwise.
        let (decision, resumes) = self.entries.withLock { entries in
            entries.update(bucket.id, make: { Entry() }, forgettable: { Self.holdsNothing($0, now: now) }, pinned: \.leasing) { entry in
                Self.spend(lease, in: &entry, bucket: bucket, now: now, lifetime: self.limits.leaseLifetimeMilliseconds)
            }
        }
        for (waiter, decision) in resumes { waiter.resume(returning: decision) }
        return decision
    }

    /// Whether `entry` holds nothing a new one would not, and no lease is in flight: it may be forgotten.
    private static func holdsNothing(_ entry: Entry, now: Int64) -> Bool {
        !entry.leasing && !(entry.tokens > 0 && entry.expiresAt > now) && entry.refusedUntil <= now
    }

    /// A lease's tokens spent in `entry`: the leader's decision, and each waiter's (nil: try again).
    private static func spend(
        _ lease: RateLease, in entry: inout Entry, bucket: RateLimits.Bucket, now: Int64, lifetime: Int64
    ) -> (TokenBucket.Decision, [(CheckedContinuation<TokenBucket.Decision?, any Error>, TokenBucket.Decision?)]) {
        entry.leasing = false
        let waiters = entry.waiters
        entry.waiters = []
        guard lease.granted > 0 else {
            let decision = TokenBucket.Decision.refused(retryAfterSeconds: TokenBucket.retryAfter(tokens: lease.tokensLeft, limit: bucket.limit))
            // Exact to the millisecond for the local wait; whole seconds for Retry-After.
            let due = Int64((1 - min(lease.tokensLeft, 1)) / bucket.limit.perSecond * 1000)
            entry.refusedUntil = max(entry.refusedUntil, now + max(1, due))
            return (decision, waiters.map { ($0, Optional(decision)) })
        }
        entry.tokens += lease.granted - 1
        entry.expiresAt = now + lifetime
        let resumes = waiters.map { waiter -> (CheckedContinuation<TokenBucket.Decision?, any Error>, TokenBucket.Decision?) in
            guard entry.tokens > 0 else { return (waiter, nil) }
            entry.tokens -= 1
            return (waiter, .admitted)
        }
        return (TokenBucket.Decision.admitted, resumes)
    }

    /// Entries held now.
    package var count: Int { self.entries.withLock { $0.count } }

    /// Requests waiting for a lease in flight (for tests).
    package var waiting: Int { self.entries.withLock { $0.values.reduce(0) { $0 + $1.waiters.count } } }
}

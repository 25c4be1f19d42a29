// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Synchronization
import Testing

/// The rate limits' token bucket, buckets and limiters on plain values: the time is a number the
/// test passes, so nothing sleeps.
@Suite struct RateLimitTests {
    let limit = TokenBucket.Limit(capacity: 3, perSecond: 0.5)

    @Test("a full bucket admits its burst, then refuses with the whole seconds until its next token, and admits again once refilled")
    func burstRefuseRefill() {
        var bucket = TokenBucket(limit: self.limit, now: 10_000)
        #expect((0..<3).map { _ in bucket.take(limit: self.limit, now: 10_000) } == [.admitted, .admitted, .admitted])
        #expect(bucket.take(limit: self.limit, now: 10_000) == .refused(retryAfterSeconds: 2))
        // 1.5 s later: three quarters of a token; half a second to go is still Retry-After: 1.
        #expect(bucket.take(limit: self.limit, now: 11_500) == .refused(retryAfterSeconds: 1))
        #expect(bucket.take(limit: self.limit, now: 12_000) == .admitted)
        #expect(bucket.take(limit: self.limit, now: 12_000) == .refused(retryAfterSeconds: 2))
        // A long quiet spell refills to the capacity, not beyond.
        #expect(
            (0..<4).map { _ in bucket.take(limit: self.limit, now: 1_000_000) } == [.admitted, .admitted, .admitted, .refused(retryAfterSeconds: 2)])
    }

    @Test("a clock that goes back adds nothing, and later time is not counted twice")
    func clockBack() {
        var bucket = TokenBucket(tokens: 0, updatedAt: 10_000)
        bucket.refill(limit: self.limit, now: 5_000)
        #expect(bucket == TokenBucket(tokens: 0, updatedAt: 10_000))
        bucket.refill(limit: self.limit, now: 11_000)
        #expect(bucket.tokens == 0.5)
        #expect(bucket.isIdle(limit: self.limit, now: 11_000) == false)
        #expect(bucket.isIdle(limit: self.limit, now: 16_000))
    }

    @Test("Retry-After is whole seconds, at least 1", arguments: [(0.0, 0.25, 4), (0.9, 1000, 1), (0.0, 3, 1), (0.5, 0.1, 5)])
    func retryAfter(tokens: Double, perSecond: Double, seconds: Int) {
        #expect(TokenBucket.retryAfter(tokens: tokens, limit: TokenBucket.Limit(capacity: 10, perSecond: perSecond)) == seconds)
    }

    @Test("limits are written BURST/PER_SECOND")
    func parsing() {
        #expect(TokenBucket.Limit(parsing: "60/1") == TokenBucket.Limit(capacity: 60, perSecond: 1))
        #expect(TokenBucket.Limit(parsing: "10/0.5")?.description == "10/0.5")
        for bad in ["60", "0/1", "60/0", "60/-1", "a/b", "60/1/2", ""] { #expect(TokenBucket.Limit(parsing: bad) == nil, "\(bad)") }
    }

    @Test("a request takes from its address's bucket first, then its key's; addresses are hashed, IPv6 counts by /64")
    func buckets() {
        var limits = RateLimits()
        limits.perAddress = [.register: self.limit]
        let buckets = limits.buckets(scope: .register, keyID: "k1", address: "203.0.113.9")
        #expect(buckets.map(\.kind) == [.address, .key])
        #expect(buckets[1].id == "k:k1" && !buckets[0].id.contains("203"))
        #expect(limits.buckets(scope: .send, keyID: "k1", address: "203.0.113.9").map(\.kind) == [.key], "no per-address limit for send keys")
        #expect(RateLimits.off.buckets(scope: .register, keyID: "k1", address: "203.0.113.9").isEmpty)
        #expect(RateLimits.prefix("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64")
        #expect(RateLimits.prefix("2001:DB8::1") == "2001:db8:0:0::/64")
        #expect(RateLimits.prefix("::ffff:198.51.100.3") == "198.51.100.3")
        #expect(RateLimits.prefix("198.51.100.3") == "198.51.100.3")
    }

    @Test("an IPv6 client takes from its /64's bucket and its /48's (a wider one); receipts have buckets of their own")
    func ipv6SitesAndReceipts() {
        var limits = RateLimits()
        limits.perAddress = [.register: self.limit]
        let v6 = limits.buckets(scope: .register, keyID: "k1", address: RateLimits.prefix("2001:db8:1:2:3:4:5:6"))
        #expect(v6.map(\.kind) == [.address, .address, .key])
        #expect(v6[1].limit.capacity == self.limit.capacity * limits.ipv6SiteMultiple)
        // Every /64 of one /48 shares the /48's bucket; another /48 does not.
        let sibling = limits.buckets(scope: .register, keyID: "k1", address: RateLimits.prefix("2001:db8:1:ffff::9"))
        let elsewhere = limits.buckets(scope: .register, keyID: "k1", address: RateLimits.prefix("2001:db8:2:2::1"))
        #expect(sibling[0].id != v6[0].id && sibling[1].id == v6[1].id && elsewhere[1].id != v6[1].id)
        #expect(RateLimits.site("2001:db8:1:2::/64") == "2001:db8:1::/48" && RateLimits.site("198.51.100.3") == nil)
        let receipts = limits.buckets(.receipt, scope: .register, keyID: "k1", address: "203.0.113.9")
        let registrations = limits.buckets(.register, scope: .register, keyID: "k1", address: "203.0.113.9")
        #expect(receipts.map(\.kind) == registrations.map(\.kind))
        #expect(Set(receipts.map(\.id)).isDisjoint(with: registrations.map(\.id)), "receipts spend neither the address's nor the app's registrations")
    }

    @Test("trusted proxies are CIDR ranges of either family; an IPv4-mapped IPv6 peer is its IPv4 address")
    func proxyRanges() throws {
        #expect(IPRange("10.0.0.0/33") == nil && IPRange("10.0.0.0/") == nil && IPRange("nonsense") == nil && IPRange("fd00::/129") == nil)
        var limits = RateLimits()
        limits.trustedProxies = try ["10.0.0.0/8", "fd00::/8", "192.0.2.7"].map { try #require(IPRange($0)) }
        for proxy in ["10.0.0.2", "10.255.1.1", "::ffff:10.0.0.2", "fd12:3456::1", "192.0.2.7", "::ffff:192.0.2.7"] {
            #expect(limits.clientAddress(peer: proxy, forwardedFor: ["203.0.113.9"]) == "203.0.113.9", "\(proxy) is trusted")
        }
        for stranger in ["11.0.0.1", "192.0.2.8", "fe80::1", "2001:db8::1"] {
            #expect(limits.clientAddress(peer: stranger, forwardedFor: ["203.0.113.9"]) != "203.0.113.9", "\(stranger) is not")
        }
        // A chain of proxies inside the range is walked through.
        #expect(limits.clientAddress(peer: "10.0.0.2", forwardedFor: ["203.0.113.9, 10.1.1.1"]) == "203.0.113.9")
        // A hop's port is not a client of its own; a hop that is no address counts as the proxy.
        #expect(limits.clientAddress(peer: "10.0.0.2", forwardedFor: ["203.0.113.9:443"]) == "203.0.113.9")
        #expect(limits.clientAddress(peer: "10.0.0.2", forwardedFor: ["[2001:db8:1:2::7]:443"]) == "2001:db8:1:2::/64")
        #expect(limits.clientAddress(peer: "10.0.0.2", forwardedFor: ["unknown"]) == "10.0.0.2")
        // A mapped range must stay within the mapped addresses.
        #expect(IPRange("::ffff:10.0.0.0/8") == nil && IPRange("::ffff:10.0.0.0/104") != nil)
    }

    @Test("X-Forwarded-For counts only from a trusted proxy, and then its rightmost untrusted entry")
    func forwardedFor() {
        var limits = RateLimits()
        #expect(limits.clientAddress(peer: "127.0.0.1", forwardedFor: ["203.0.113.9"]) == "127.0.0.1", "no trusted proxy: ignored")
        limits.trustedProxies = ["10.0.0.2", "10.0.0.3"].compactMap(IPRange.init)
        #expect(limits.clientAddress(peer: "198.51.100.1", forwardedFor: ["203.0.113.9"]) == "198.51.100.1", "not from a proxy: ignored")
        // What the client wrote itself comes first; the proxies append what they saw.
        #expect(limits.clientAddress(peer: "10.0.0.2", forwardedFor: ["1.2.3.4, 203.0.113.9", "10.0.0.3"]) == "203.0.113.9")
        #expect(limits.clientAddress(peer: "10.0.0.2", forwardedFor: []) == "10.0.0.2")
        #expect(limits.clientAddress(peer: nil, forwardedFor: []) == nil)
    }

    /// A bucket in use, drained (refilled in 1,000 s), through a flood of 10,000 new address
    /// buckets: idle a millisecond later (an attacker cycling addresses), or in use themselves.
    @Test(
        "the in-memory limiter keeps at most maxBuckets, forgetting idle buckets before ones in use, and a key's only when idle",
        arguments: [(RateLimits.Kind.address, true), (.key, true), (.key, false)])
    func bounded(kind: RateLimits.Kind, floodIdle: Bool) {
        let limiter = LocalRateLimiter(maxBuckets: 100)
        let slow = TokenBucket.Limit(capacity: 2, perSecond: 0.001)
        let fast = TokenBucket.Limit(capacity: 1, perSecond: 1000)
        let hot = RateLimits.Bucket(id: "hot", limit: slow, kind: kind)
        #expect(limiter.take(hot, now: 0) == .admitted)
        #expect(limiter.take(hot, now: 0) == .admitted)
        #expect(limiter.take(hot, now: 0) != .admitted)
        for n in 0..<10_000 {
            _ = limiter.take(RateLimits.Bucket(id: "a\(n)", limit: floodIdle ? fast : slow, kind: .address), now: Int64(n) * 2 + 10)
            #expect(limiter.count <= 100)
        }
        #expect(limiter.take(hot, now: 30_000) != .admitted, "the bucket in use was kept")
    }

    @Test(
        "a bounded table past its capacity forgets a forgettable entry among the next few in order, else the first unpinned; pinned ones only ever push it over, and it comes back"
    )
    func boundedTable() {
        // An entry: whether it may go without loss, and whether it must stay.
        struct Entry {
            var forgettable: Bool
            var pinned = false
        }
        var table = BoundedTable<Entry>(capacity: 10)
        var names: [String] = []
        func insert(_ name: String, _ entry: Entry) {
            names.append(name)
            table.update(name, make: { entry }, forgettable: \.forgettable, pinned: \.pinned) { _ in }
        }
        func setAll(_ change: (inout Entry) -> Void) {
            for name in names { table.modify(name, change) }
        }
        insert("hot", Entry(forgettable: false))
        insert("held", Entry(forgettable: false, pinned: true))
        for n in 0..<8 { insert("idle\(n)", Entry(forgettable: true)) }
        #expect(table.count == 10)
        // Each new one forgets the oldest idle one; the two in use get second turns.
        for n in 0..<1000 {
            insert("new\(n)", Entry(forgettable: true))
            #expect(table.count == 10)
        }
        #expect(table["hot"] != nil && table["held"] != nil)
        #expect(table["idle0"] == nil && table["new991"] == nil && table["new992"] != nil)
        // None forgettable: one not pinned goes, never a pinned one.
        setAll { $0.forgettable = false }
        table.modify("hot") { $0.pinned = true }
        for n in 0..<100 {
            insert("busy\(n)", Entry(forgettable: false))
            #expect(table.count == 10)
        }
        #expect(table["hot"] != nil && table["held"] != nil && table["new999"] == nil)
        // All pinned: past the capacity rather than a pinned one forgotten.
        setAll { $0.pinned = true }
        for n in 0..<5 { insert("over\(n)", Entry(forgettable: false, pinned: true)) }
        #expect(table.count == 15 && table["hot"] != nil && table["held"] != nil)
        // Unpinned again: each insertion forgets two until the table is back at its capacity.
        setAll { $0.pinned = false }
        for n in 0..<5 { insert("back\(n)", Entry(forgettable: false)) }
        #expect(table.count == 10)
        for n in 0..<100 { insert("after\(n)", Entry(forgettable: false)) }
        #expect(table.count == 10)
    }

    /// One shared bucket, as the database keeps it, on a clock the test sets.
    final class SharedBuckets: RateBucketStore {
        let state = Mutex<(buckets: [String: TokenBucket], now: Int64, leases: Int)>(([:], 0, 0))

        func leaseRateTokens(bucket: String, limit: TokenBucket.Limit, count: Int) async throws -> RateLease {
            self.state.withLock { state in
                state.leases += 1
                var shared = state.buckets[bucket] ?? TokenBucket(limit: limit, now: state.now)
                shared.refill(limit: limit, now: state.now)
                let granted = min(count, Int(shared.tokens.rounded(.down)))
                shared = TokenBucket(tokens: shared.tokens - Double(granted), updatedAt: shared.updatedAt)
                state.buckets[bucket] = shared
                return RateLease(granted: granted, tokensLeft: shared.tokens)
            }
        }

        func pruneRateBuckets() async throws -> Int { 0 }
    }

    @Test("limiters leasing from one shared bucket admit no more together than the bucket holds, with a round trip per lease, not per request")
    func leased() async throws {
        let store = SharedBuckets()
        var limits = RateLimits()
        limits.leaseLifetimeMilliseconds = 60_000
        let bucket = RateLimits.Bucket(id: "k:key", limit: TokenBucket.Limit(capacity: 100, perSecond: 1), kind: .key)
        #expect(limits.leaseSize(bucket.limit) == 10)
        let processes = [LeasedRateLimiter(store: store, limits: limits), LeasedRateLimiter(store: store, limits: limits)]
        var admitted = 0
        var refusals: [Int] = []
        for n in 0..<300 {
            switch try await processes[n % 2].take(bucket, now: 0) {
            case .admitted: admitted += 1
            case .refused(let seconds): refusals.append(seconds)
            }
        }
        #expect(admitted == 100)
        #expect(refusals.count == 200 && refusals.allSatisfy { $0 == 1 })
        // 10 leases of 10, and one refused lease per process: refusals are then answered locally.
        #expect(store.state.withLock { $0.leases } == 12)
        // A second later the shared bucket has one token again.
        store.state.withLock { $0.now = 1000 }
        #expect(try await processes[0].take(bucket, now: 1000) == .admitted)
        #expect(try await processes[1].take(bucket, now: 1000) == .refused(retryAfterSeconds: 1))
    }

    @Test("the leasing limiter keeps at most maxBuckets entries, keeping a refusal still due through a flood of new buckets")
    func leasedBounded() async throws {
        let store = SharedBuckets()
        var limits = RateLimits()
        limits.maxBuckets = 50
        limits.leaseLifetimeMilliseconds = 1
        let limiter = LeasedRateLimiter(store: store, limits: limits)
        let hot = RateLimits.Bucket(id: "hot", limit: TokenBucket.Limit(capacity: 1, perSecond: 0.001), kind: .address)
        #expect(try await limiter.take(hot, now: 0) == .admitted)
        #expect(try await limiter.take(hot, now: 0) != .admitted)
        let leases = store.state.withLock { $0.leases }
        // An attacker cycling addresses: each new bucket leases 10 tokens, spends one, and the
        // other 9 expire a millisecond later, before the next new bucket comes.
        let fast = TokenBucket.Limit(capacity: 100, perSecond: 1000)
        #expect(limits.leaseSize(fast) == 10)
        for n in 0..<5_000 {
            _ = try await limiter.take(RateLimits.Bucket(id: "a\(n)", limit: fast, kind: .address), now: Int64(n) * 2 + 10)
            #expect(limiter.count <= 50)
        }
        // The refusal was kept: answered without a lease.
        #expect(try await limiter.take(hot, now: 20_000) != .admitted)
        #expect(store.state.withLock { $0.leases } == leases + 5_000)
    }

    @Test("an entry with a lease in flight is never forgotten: through a flood past maxBuckets, a request for it still waits for that lease")
    func leasingPinned() async throws {
        let store = GatedBuckets(holding: "hot")
        var limits = RateLimits()
        limits.maxBuckets = 20
        limits.leaseLifetimeMilliseconds = 60_000
        let limiter = LeasedRateLimiter(store: store, limits: limits)
        let hot = RateLimits.Bucket(id: "hot", limit: TokenBucket.Limit(capacity: 100, perSecond: 1), kind: .address)
        let decisions = try await withThrowingTaskGroup(of: TokenBucket.Decision.self) { group in
            // However this ends, the held leases go through (a failing test ends instead of hanging).
            defer { store.release(open: true) }
            group.addTask { try await limiter.take(hot, now: 0) }
            try await self.until("the lease starts", store) { store.gate.withLock { $0.started } == 1 }
            // New buckets whose leased tokens stay live: none is forgettable.
            let busy = TokenBucket.Limit(capacity: 100, perSecond: 1)
            for n in 0..<200 {
                #expect(try await limiter.take(RateLimits.Bucket(id: "a\(n)", limit: busy, kind: .address), now: 0) == .admitted)
                #expect(limiter.count <= 20)
            }
            // Kept, the entry makes the next request wait for its lease; forgotten, it would lease again.
            group.addTask { try await limiter.take(hot, now: 0) }
            try await self.until("the request waits, or leases again", store) { limiter.waiting == 1 || store.gate.withLock { $0.started } == 2 }
            #expect(limiter.waiting == 1)
            #expect(store.gate.withLock { $0.started } == 1)
            store.release(open: true)
            var decisions: [TokenBucket.Decision] = []
            for try await decision in group { decisions.append(decision) }
            return decisions
        }
        #expect(decisions == [.admitted, .admitted])
    }

    /// The shared bucket, with each lease (of every bucket, or of `holding` alone) held until the
    /// test lets it through (or opens the gate for good, so that a failing test ends instead of hanging).
    final class GatedBuckets: RateBucketStore {
        let shared = SharedBuckets()
        let holding: String?
        let gate = Mutex<(started: Int, held: [CheckedContinuation<Void, Never>], open: Bool)>((0, [], false))

        init(holding: String? = nil) {
            self.holding = holding
        }

        func leaseRateTokens(bucket: String, limit: TokenBucket.Limit, count: Int) async throws -> RateLease {
            if self.holding == nil || self.holding == bucket {
                await withCheckedContinuation { continuation in
                    let open = self.gate.withLock { gate in
                        gate.started += 1
                        if !gate.open { gate.held.append(continuation) }
                        return gate.open
                    }
                    if open { continuation.resume() }
                }
            }
            return try await self.shared.leaseRateTokens(bucket: bucket, limit: limit, count: count)
        }

        func pruneRateBuckets() async throws -> Int { 0 }

        /// Lets the leases held now through; `open`: and every later one.
        func release(open: Bool = false) {
            let held = self.gate.withLock { gate in
                defer { gate.held = [] }
                gate.open = gate.open || open
                return gate.held
            }
            for continuation in held { continuation.resume() }
        }
    }

    /// Waits (bounded by a hang guard) until `condition` holds; else opens the gate and fails.
    func until(_ what: String, _ store: GatedBuckets, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(300)
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        if !condition() { store.release(open: true) }
        try #require(condition(), "never: \(what)")
    }

    @Test("requests arriving while a lease is in flight wait for its batch instead of leasing their own")
    func waitersShareTheLease() async throws {
        let store = GatedBuckets()
        var limits = RateLimits()
        limits.leaseLifetimeMilliseconds = 60_000
        let limiter = LeasedRateLimiter(store: store, limits: limits)
        let bucket = RateLimits.Bucket(id: "k:key", limit: TokenBucket.Limit(capacity: 100, perSecond: 1), kind: .key)
        let decisions = try await withThrowingTaskGroup(of: TokenBucket.Decision.self) { group in
            group.addTask { try await limiter.take(bucket, now: 0) }
            try await self.until("the first lease starts", store) { store.gate.withLock { $0.started } == 1 }
            for _ in 0..<14 { group.addTask { try await limiter.take(bucket, now: 0) } }
            try await self.until("14 wait", store) { limiter.waiting == 14 }
            // A batch of 10: the leader and 9 waiters; the other 5 try again, one leasing, 4 waiting.
            store.release()
            try await self.until("the second lease starts", store) { store.gate.withLock { $0.started } == 2 }
            try await self.until("4 wait", store) { limiter.waiting == 4 }
            store.release()
            var decisions: [TokenBucket.Decision] = []
            for try await decision in group { decisions.append(decision) }
            return decisions
        }
        #expect(decisions.count == 15 && decisions.allSatisfy { $0 == .admitted })
        #expect(store.gate.withLock { $0.started } == 2)
        #expect(store.shared.state.withLock { $0.leases } == 2)
    }
}

// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import HeraldSQLite
import HeraldTesting
import Logging
import Synchronization
import Testing

@testable import HeraldPostgres

/// The apps and keys every request reads: kept, cleared by writes, bounded in staleness.
@Suite(.heavy) struct LookupCacheTests {
    static let key = StoredAPIKey(id: "k1", hash: [1], scope: .register, appID: "demo", name: nil, createdAt: 1)

    @Test("a fresh entry is served without asking again; a clear makes the next read ask")
    func keeps() async throws {
        let cache = LookupCache(lifetime: .seconds(3600))
        let fetches = Atomic(0)
        let fetch: () async throws -> StoredAPIKey? = {
            fetches.add(1, ordering: .relaxed)
            return Self.key
        }
        #expect(try await cache.apiKey(id: "k1", fetch: fetch)?.id == "k1")
        #expect(try await cache.apiKey(id: "k1", fetch: fetch)?.id == "k1")
        #expect(fetches.load(ordering: .relaxed) == 1)
        cache.clear()
        _ = try await cache.apiKey(id: "k1", fetch: fetch)
        #expect(fetches.load(ordering: .relaxed) == 2)
    }

    @Test("what does not exist is asked for every time, so unknown ids cannot fill the cache")
    func noNegatives() async throws {
        let cache = LookupCache(lifetime: .seconds(3600))
        let fetches = Atomic(0)
        for _ in 0..<3 {
            #expect(
                try await cache.app(id: "nope") {
                    fetches.add(1, ordering: .relaxed)
                    return nil
                } == nil)
        }
        #expect(fetches.load(ordering: .relaxed) == 3)
    }

    @Test("an entry is served for its whole lifetime and asked for again from its end (a moved clock)")
    func lifetimeBound() async throws {
        let start = ContinuousClock.now
        let elapsed = Mutex(Duration.zero)
        let cache = LookupCache(lifetime: LookupCache.defaultLifetime, now: { start + elapsed.withLock { $0 } })
        let fetches = Atomic(0)
        func read() async throws {
            _ = try await cache.apiKey(id: "k1") {
                fetches.add(1, ordering: .relaxed)
                return Self.key
            }
        }
        try await read()
        elapsed.withLock { $0 = LookupCache.defaultLifetime - .milliseconds(1) }
        try await read()
        #expect(fetches.load(ordering: .relaxed) == 1, "fresh until its lifetime ends")
        elapsed.withLock { $0 = LookupCache.defaultLifetime }
        try await read()
        #expect(fetches.load(ordering: .relaxed) == 2, "another process's revocation is seen at most the lifetime late")
        #expect(LookupCache.defaultLifetime == .seconds(2), "the bound docs/server.md gives")
    }

    @Test("an entry past its lifetime is asked for again")
    func expires() async throws {
        let cache = LookupCache(lifetime: .zero)
        let fetches = Atomic(0)
        for _ in 0..<2 {
            _ = try await cache.apiKey(id: "k1") {
                fetches.add(1, ordering: .relaxed)
                return Self.key
            }
        }
        #expect(fetches.load(ordering: .relaxed) == 2)
    }

    @Test("a read that started before a write does not keep what it read")
    func raceWithWrite() async throws {
        let cache = LookupCache(lifetime: .seconds(3600))
        // The read fetches the old key; the write (revoke + clear) lands while it is in flight.
        _ = try await cache.apiKey(id: "k1") {
            cache.clear()
            return Self.key
        }
        let fetches = Atomic(0)
        #expect(
            try await cache.apiKey(id: "k1") {
                fetches.add(1, ordering: .relaxed)
                return nil
            } == nil)
        #expect(fetches.load(ordering: .relaxed) == 1, "the stale read was not kept")
    }

    @Test("a store sees its own key and app changes at once", arguments: Driver.enabled)
    func ownWrites(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            try await store.createAPIKey(id: "a1", hash: [1], scope: .admin, appID: nil, name: nil, expiresAt: nil, now: 1)
            try await store.createAPIKey(id: "r1", hash: [2], scope: .register, appID: "demo", name: nil, expiresAt: nil, now: 1)
            #expect(try await store.apiKey(id: "r1") != nil)
            #expect(try await store.app("demo")?.security.userVerification == true)
            _ = try #require(try await store.rotateAPIKey(replacing: "r1", id: "r2", hash: [3], expiresAt: nil, overlapUntil: 50, now: 2))
            #expect(try await store.apiKey(id: "r1")?.expiresAt == 50, "the rotated key's overlap is seen at once")
            #expect(try await store.revokeAPIKey(id: "r1", now: 3))
            #expect(try await store.apiKey(id: "r1") == nil)
            var security = try #require(try await store.app("demo")).security
            security.userVerification = false
            #expect(try await store.setAppSecurity(appID: "demo", security))
            #expect(try await store.app("demo")?.security.userVerification == false)
        }
    }

    /// The bound itself (the lifetime) is `lifetimeBound`'s, on a moved clock: this shows the
    /// revocation reaching another store through the database once its entry ends.
    @Test("a key revoked by another process is refused once the first one's cached entry ends", arguments: Driver.enabled)
    func otherProcess(driver: Driver) async throws {
        try await driver.withTwoStores { first, second async throws in
            try await first.createAPIKey(id: "r1", hash: [2], scope: .register, appID: "demo", name: nil, expiresAt: nil, now: 1)
            #expect(try await first.apiKey(id: "r1") != nil)
            #expect(try await second.revokeAPIKey(id: "r1", now: 2))
            // Polled until the first store asks the database again; the deadline is a hang guard only.
            let deadline = ContinuousClock.now + .seconds(300)
            while try await first.apiKey(id: "r1") != nil {
                try #require(ContinuousClock.now < deadline, "still accepted long after the lifetime")
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}

extension StoreDriver {
    /// Two stores on one database, as two processes would have: a SQLite file opened twice, or
    /// two clients of one PostgreSQL database.
    func withTwoStores(_ body: (any HeraldStore, any HeraldStore) async throws -> Void) async throws {
        switch self {
        case .sqlite:
            let directory = try TemporaryDirectory(prefix: "herald-lookups")
            defer { directory.remove() }
            let first = try await SQLiteStore(path: directory.path + "/herald.sqlite")
            try await first.createApp(App(id: "demo", bundleID: "com.example.app", createdAt: 1))
            let second = try await SQLiteStore(path: directory.path + "/herald.sqlite")
            try await body(first, second)
        case .postgres:
            try await PostgresTestDatabase.with { database in
                try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { first in
                    try await first.createApp(App(id: "demo", bundleID: "com.example.app", createdAt: 1))
                    try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { second in
                        try await body(first, second)
                    }
                }
            }
        }
    }
}

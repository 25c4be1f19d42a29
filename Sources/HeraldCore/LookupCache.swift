// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// The apps and active API keys that every API request reads (the key to authenticate it, the
/// app to check it against), kept for a short ``lifetime`` so that a request does not ask the
/// database for them again. Both drivers read through it and clear it on every write to an app
/// or a key, so a process sees its own changes at once; another process sharing a PostgreSQL
/// database sees a revoked key or a changed app within ``lifetime``.
///
/// Only what exists is kept (an unknown key id costs a read each time, and cannot fill the
/// cache); at most ``capacity`` entries of each kind, and a full cache starts over.
package final class LookupCache: Sendable {
    /// How long another process may go on using a key after it was revoked.
    package static let defaultLifetime: Duration = .seconds(2)
    package static let capacity = 4096

    private struct Entry<Value: Sendable>: Sendable {
        var value: Value
        var fetchedAt: ContinuousClock.Instant
    }

    private struct State: Sendable {
        var keys: [String: Entry<StoredAPIKey>] = [:]
        var apps: [String: Entry<App>] = [:]
        /// Bumped by every clear: a read that started before a write does not store what it read.
        var generation: UInt64 = 0
    }

    package let lifetime: Duration
    private let state = Mutex(State())
    /// The time an entry is fetched and read at: the continuous clock, or a test's.
    private let now: @Sendable () -> ContinuousClock.Instant

    package init(lifetime: Duration = LookupCache.defaultLifetime, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.lifetime = lifetime
        self.now = now
    }

    /// The active key `id`, from the cache while fresh, otherwise from `fetch`.
    package func apiKey(id: String, fetch: () async throws -> StoredAPIKey?) async throws -> StoredAPIKey? {
        try await self.value(id, at: \.keys, fetch: fetch)
    }

    /// The app `id`, from the cache while fresh, otherwise from `fetch`.
    package func app(id: String, fetch: () async throws -> App?) async throws -> App? {
        try await self.value(id, at: \.apps, fetch: fetch)
    }

    /// Forgets every app and key: called after any write to either (they are rare).
    package func clear() {
        self.state.withLock { state in
            state.keys.removeAll()
            state.apps.removeAll()
            state.generation &+= 1
        }
    }

    private func value<Value: Sendable>(
        _ id: String, at table: any WritableKeyPath<State, [String: Entry<Value>]> & Sendable, fetch: () async throws -> Value?
    ) async throws -> Value? {
        let now = self.now()
        let lifetime = self.lifetime
        let (cached, generation) = self.state.withLock { state -> (Value?, UInt64) in
            guard let entry = state[keyPath: table][id], now - entry.fetchedAt < lifetime else { return (nil, state.generation) }
            return (entry.value, state.generation)
        }
        if let cached { return cached }
        let fetched = try await fetch()
        self.state.withLock { state in
            guard state.generation == generation else { return }
            guard let fetched else {
                state[keyPath: table][id] = nil
                return
            }
            if state[keyPath: table].count >= Self.capacity { state[keyPath: table].removeAll() }
            state[keyPath: table][id] = Entry(value: fetched, fetchedAt: now)
        }
        return fetched
    }
}

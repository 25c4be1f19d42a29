// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// The one rule for what an API key may do, asked at every door: the API's routes and the
/// registration lane (``RequireScope``), the event stream when it opens and while it runs, the
/// dashboard's sign-in and every request of its sessions. A key is usable while it is neither
/// revoked nor past its `expiresAt`; it then acts within its scope (``APIScope/allows(_:)``) on
/// its one app, or on every app when it is bound to none.
package enum KeyAccess {
    /// Where a key is presented: the API acts on one app or on the server (nil app); the dashboard
    /// governs every app, so only an admin key bound to no app opens it.
    package enum Door: Sendable, Hashable {
        case api(scope: APIScope, appID: String?)
        case dashboard
    }

    /// 401 `unauthorized` for a revoked key, 401 `key_expired` for one past its expiry, 403
    /// `forbidden` for one whose scope or app the door does not take.
    package static func authorize(_ key: StoredAPIKey, at door: Door, now: Int64) throws(HeraldError) {
        try self.requireUsable(key, now: now)
        switch door {
        case .api(let scope, let appID):
            guard key.scope.allows(scope) else { throw HeraldError.forbidden("this key's scope (\(key.scope.rawValue)) does not allow this") }
            if let bound = key.appID, bound != appID { throw HeraldError.forbidden("this key belongs to another app") }
        case .dashboard:
            guard key.scope == .admin else { throw HeraldError.forbidden("the dashboard needs an admin key") }
            if let bound = key.appID {
                throw HeraldError(
                    code: "key_confined",
                    "this admin key is confined to the app '\(bound)'; the dashboard governs every app and needs an admin key bound to none")
            }
        }
    }

    /// 401 `unauthorized` for a revoked key, 401 `key_expired` for one past its expiry.
    package static func requireUsable(_ key: StoredAPIKey, now: Int64) throws(HeraldError) {
        guard key.revokedAt == nil else { throw HeraldError.unauthorized }
        if let expiry = key.expiresAt, expiry <= now { throw Self.expired }
    }

    package static let expired = HeraldError(code: "key_expired", "this API key has expired")

    /// Refuses (409 `last_admin_key`) to revoke `key` when no other key could govern the server
    /// afterwards: an admin key bound to no app, neither revoked nor expired. An expired or
    /// app-confined admin key does not count, so the only working one cannot be revoked. Both
    /// drivers ask it in the revocation's transaction, over the active admin keys they locked.
    package static func requireAnotherGoverningKey(revoking key: StoredAPIKey, admins: [StoredAPIKey], now: Int64) throws(HeraldError) {
        func governs(_ candidate: StoredAPIKey) -> Bool {
            guard candidate.scope == .admin, candidate.appID == nil, candidate.revokedAt == nil else { return false }
            return candidate.expiresAt.map { $0 > now } ?? true
        }
        guard governs(key), !admins.contains(where: { $0.id != key.id && governs($0) }) else { return }
        throw HeraldError.conflict(
            "this is the last usable admin key bound to no app: create another (or rotate this one) before revoking it", code: "last_admin_key")
    }

    /// How long something opened with `key` (a dashboard session, an event stream) may last
    /// from `now` at most, in milliseconds: `lifetime`, or less when the key expires first.
    package static func sessionEnd(_ key: StoredAPIKey, now: Int64, lifetime: Int64) -> Int64 {
        min(now + lifetime, key.expiresAt ?? .max)
    }
}

/// Failed authentication per client address. Every attempt with a key this process has not
/// verified lately takes a token from its address's bucket before the key is looked up (so that
/// requests fired at once cannot all pass while one token is left) and gives it back when the key
/// is good: what stays taken is the failures. An address whose bucket is empty is refused with
/// 429 before its key is read, so guessing costs the database nothing; a key verified lately
/// skips the gate, so one guesser behind a shared address (a NAT, a proxy) does not lock out the
/// others' working keys. An IPv6 client counts by its /64 and, with 16 times the limit, its /48.
/// Per process, in memory, bounded like the other buckets (``BoundedTable``).
package final class AuthenticationFailures: Sendable {
    package let limit: TokenBucket.Limit?
    private let buckets: Mutex<BoundedTable<TokenBucket>>

    /// - Parameter limit: the failures an address may make (a burst, then a rate); nil: none counted.
    package init(limit: TokenBucket.Limit?, maxBuckets: Int = 100_000) {
        self.limit = limit
        self.buckets = Mutex(BoundedTable(capacity: max(4, maxBuckets)))
    }

    /// The default: 30 failures at once, then one every 2 seconds.
    package static let defaultLimit = TokenBucket.Limit(capacity: 30, perSecond: 0.5)

    /// The buckets `address` takes from: its own, and for an IPv6 /64 its /48's (wider).
    private func buckets(_ address: String, _ limit: TokenBucket.Limit) -> [(name: String, limit: TokenBucket.Limit)] {
        var names = [(address, limit)]
        if let site = RateLimits.site(address) {
            names.append((site, TokenBucket.Limit(capacity: limit.capacity * 16, perSecond: limit.perSecond * 16)))
        }
        return names
    }

    /// Takes a token from `address`'s buckets for one attempt: nil when it may try (give it back
    /// with ``succeeded(address:now:)`` if the key is good); else the seconds until it may, for
    /// `Retry-After`, and nothing is taken.
    package func attempt(address: String?, now: Int64) -> Int? {
        guard let limit = self.limit, let address else { return nil }
        let buckets = self.buckets(address, limit)
        return self.buckets.withLock { table -> Int? in
            // Refused by any: nothing taken from the others.
            for (name, limit) in buckets {
                let wait = table.update(
                    name, make: { TokenBucket(limit: limit, now: now) }, forgettable: { $0.isIdle(limit: limit, now: now) }, pinned: { _ in false }
                ) { bucket -> Int? in
                    bucket.refill(limit: limit, now: now)
                    return bucket.tokens >= 1 ? nil : TokenBucket.retryAfter(tokens: bucket.tokens, limit: limit)
                }
                if let wait { return wait }
            }
            for (name, limit) in buckets { _ = table.modify(name) { $0.take(limit: limit, now: now) } }
            return nil
        }
    }

    /// The attempt's key was good: its token goes back.
    package func succeeded(address: String?, now: Int64) {
        guard let limit = self.limit, let address else { return }
        let buckets = self.buckets(address, limit)
        self.buckets.withLock { table in
            for (name, limit) in buckets { table.modify(name) { $0.giveBack(limit: limit, now: now) } }
        }
    }

    /// 429 `rate_limited` for an address over its failures.
    package static func error(retryAfter: Int) -> HeraldError {
        HeraldError(code: "rate_limited", "too many failed authentications from this client address; retry in \(retryAfter) s")
    }
}

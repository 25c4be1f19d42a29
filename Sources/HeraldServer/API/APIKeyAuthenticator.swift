// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird
import Synchronization

/// Reads `Authorization: Bearer hk_<id>_<secret>` once per request: a known key whose hash
/// matches (in constant time) and that ``KeyAccess`` finds usable is put in the context. A request
/// without the header passes on without a key (public routes need none; ``RequireScope`` refuses
/// it); a header with a key that is not valid is refused here with 401, and counted against the
/// client's address (``AuthenticationFailures``): an address over its failures is answered 429
/// before its key is looked up.
struct APIKeyAuthenticator: RouterMiddleware {
    typealias Context = APIRequestContext
    let store: any HeraldStore
    let clock: any EpochClock
    /// When this process last wrote each key's `lastUsedAt`: at most once a minute per key
    /// (one record for the router and the registration lane, which both authenticate).
    let usage: KeyUsage
    /// Failed authentication per client address, shared by every door that takes a key.
    let failures: AuthenticationFailures
    /// Names the client address (trusted proxies, IPv6 prefixes) as the rate limits do.
    let limits: RateLimits

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization] else { return try await next(request, context) }
        let address = self.limits.clientAddress(peer: context.remoteAddress?.ipAddress, forwardedFor: request.headers[values: .forwardedFor])
        var context = context
        context.clientAddress = address
        do {
            context.key = try await self.key(authorization: header, address: address)
        } catch let refusal as AuthenticationRefusal {
            var response = try refusal.error.response(from: request, context: context)
            response.headers[.retryAfter] = String(refusal.retryAfter)
            return response
        }
        return try await next(request, context)
    }

    /// The key an `Authorization` header presents, or 401 `unauthorized` / `key_expired`, or
    /// ``AuthenticationRefusal`` (429) for an address over its failures.
    func key(authorization header: String, address: String?) async throws -> StoredAPIKey {
        let now = self.clock.nowMilliseconds
        let token = APIKeySecret.bearerToken(header) ?? ""
        let key = try await self.gated(token: token, address: address, now: now)
        // Bookkeeping: a failure to note the use must not fail the request it authorized.
        if self.usage.due(key.id, now: now) { try? await self.store.touchAPIKey(id: key.id, now: now) }
        return key
    }

    /// `token`'s key once verified (``verified(token:now:)``), through the failed-authentication
    /// gate of `address` (``AuthenticationFailures``): a token this process verified lately
    /// passes it; any other takes a token first, given back when the key is good. 401 refusals
    /// keep theirs, and forget the token as verified.
    func gated(token: String, address: String?, now: Int64) async throws -> StoredAPIKey {
        let presented = APIKeySecret.hash(token)
        let known = self.usage.isVerified(presented)
        if !known, let wait = self.failures.attempt(address: address, now: now) { throw AuthenticationRefusal(retryAfter: wait) }
        do {
            let key = try await self.verified(token: token, presented: presented, now: now)
            if !known {
                self.failures.succeeded(address: address, now: now)
                self.usage.verified(presented)
            }
            return key
        } catch let error as HeraldError where error.status == .unauthorized {
            if known { self.usage.forget(presented) }
            throw error
        } catch {
            // Not the key's fault (the database did not answer): not a failure of the address.
            if !known { self.failures.succeeded(address: address, now: now) }
            throw error
        }
    }

    /// The stored key `token` is, once its secret matches (`presented`: its SHA-256) and it is
    /// usable now (not its scope: that is the door's question).
    func verified(token: String, presented: [UInt8], now: Int64) async throws -> StoredAPIKey {
        guard let id = APIKeySecret.id(of: token), let key = try await self.store.apiKey(id: id), APIKeySecret.matches(hash: presented, key.hash)
        else {
            throw HeraldError.unauthorized
        }
        try KeyAccess.requireUsable(key, now: now)
        return key
    }
}

/// An address over its failed authentications: 429 `rate_limited` with `Retry-After`.
struct AuthenticationRefusal: Error {
    let retryAfter: Int
    var error: HeraldError { AuthenticationFailures.error(retryAfter: self.retryAfter) }
}

/// Lets a request through only with a key that ``KeyAccess`` lets through this door: its scope
/// allows `scope`; on routes with an `:app` parameter, only for that app (a key bound to another
/// app is refused), and with the app loaded into the context (404 when there is none).
struct RequireScope: RouterMiddleware {
    typealias Context = APIRequestContext
    let scope: APIScope
    let store: any HeraldStore
    let clock: any EpochClock

    init(_ scope: APIScope, store: any HeraldStore, clock: any EpochClock) {
        self.scope = scope
        self.store = store
        self.clock = clock
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let appID = context.parameters.get("app")
        // While an app is being deleted: reading it, and deleting it again, only.
        let allowedWhileDeleting = request.method == .get || (request.method == .delete && request.uri.path == "/v1/apps/\(appID ?? "")")
        guard let app = try await self.app(key: try context.requireKey(), appID: appID, allowedWhileDeleting: allowedWhileDeleting) else {
            return try await next(request, context)
        }
        var context = context
        context.app = app
        return try await next(request, context)
    }

    /// The app named by the path, if any, once `key` may act on it with this scope: 403
    /// `forbidden` for a key whose scope or app does not allow it, 404 for an app that is not —
    /// or that is being deleted, unless `allowedWhileDeleting` (reading it, deleting it again).
    func app(key: StoredAPIKey, appID: String?, allowedWhileDeleting: Bool) async throws -> App? {
        try KeyAccess.authorize(key, at: .api(scope: self.scope, appID: appID), now: self.clock.nowMilliseconds)
        guard let appID else { return nil }
        guard let app = try await self.store.app(appID) else { throw HeraldError.notFound("app '\(appID)'") }
        if app.deletion != nil, !allowedWhileDeleting {
            throw HeraldError(code: "not_found", "app '\(appID)' is being deleted")
        }
        return app
    }
}

/// Which keys' use is worth writing down again: the first use, then once a minute; and the
/// tokens this process verified (their SHA-256, as stored: never the tokens themselves), which
/// pass the failed-authentication gate. At most one per key that exists, so bounded by the keys.
final class KeyUsage: Sendable {
    private let written = Mutex<[String: Int64]>([:])
    private let good = Mutex<Set<[UInt8]>>([])

    func isVerified(_ hash: [UInt8]) -> Bool { self.good.withLock { $0.contains(hash) } }
    func verified(_ hash: [UInt8]) { self.good.withLock { _ = $0.insert(hash) } }
    func forget(_ hash: [UInt8]) { self.good.withLock { _ = $0.remove(hash) } }

    func due(_ id: String, now: Int64) -> Bool {
        self.written.withLock { written in
            if let last = written[id], now - last < 60_000 { return false }
            written[id] = now
            return true
        }
    }
}

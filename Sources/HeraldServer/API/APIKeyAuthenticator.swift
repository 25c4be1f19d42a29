// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird
import Synchronization

/// Reads `Authorization: Bearer hk_<id>_<secret>` once per request: a known, unrevoked key whose
/// hash matches (in constant time) is put in the context. A request without the header passes
/// on without a key (public routes need none; ``RequireScope`` refuses it); a header with a key
/// that is not valid is refused here with 401.
struct APIKeyAuthenticator: RouterMiddleware {
    typealias Context = APIRequestContext
    let store: any HeraldStore
    let clock: any EpochClock
    /// When this process last wrote each key's `lastUsedAt`: at most once a minute per key
    /// (one record for the router and the registration lane, which both authenticate).
    let usage: KeyUsage

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization] else { return try await next(request, context) }
        var context = context
        context.key = try await self.key(authorization: header)
        return try await next(request, context)
    }

    /// The key an `Authorization` header presents, or 401 `unauthorized` / `key_expired`.
    func key(authorization header: String) async throws -> StoredAPIKey {
        guard let token = APIKeySecret.bearerToken(header) else { throw HeraldError.unauthorized }
        guard let id = APIKeySecret.id(of: token), let key = try await self.store.apiKey(id: id), APIKeySecret.matches(token, hash: key.hash) else {
            throw HeraldError.unauthorized
        }
        let now = self.clock.nowMilliseconds
        if let expiry = key.expiresAt, expiry <= now { throw HeraldError(code: "key_expired", "this API key has expired") }
        // Bookkeeping: a failure to note the use must not fail the request it authorized.
        if self.usage.due(key.id, now: now) { try? await self.store.touchAPIKey(id: key.id, now: now) }
        return key
    }
}

/// Lets a request through only with a key whose scope allows `scope`; on routes with an `:app`
/// parameter, only for that app (a key bound to another app is refused), and with the app loaded
/// into the context (404 when there is none).
struct RequireScope: RouterMiddleware {
    typealias Context = APIRequestContext
    let scope: APIScope
    let store: any HeraldStore

    init(_ scope: APIScope, store: any HeraldStore) {
        self.scope = scope
        self.store = store
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let app = try await self.app(key: try context.requireKey(), appID: context.parameters.get("app")) else {
            return try await next(request, context)
        }
        var context = context
        context.app = app
        return try await next(request, context)
    }

    /// The app named by the path, if any, once `key` may act on it with this scope: 403
    /// `forbidden` for a key whose scope or app does not allow it, 404 for an app that is not.
    func app(key: StoredAPIKey, appID: String?) async throws -> App? {
        guard key.scope.allows(self.scope) else { throw HeraldError.forbidden("this key's scope (\(key.scope.rawValue)) does not allow this") }
        if let bound = key.appID, bound != appID { throw HeraldError.forbidden("this key belongs to another app") }
        guard let appID else { return nil }
        guard let app = try await self.store.app(appID) else { throw HeraldError.notFound("app '\(appID)'") }
        return app
    }
}

/// Which keys' use is worth writing down again: the first use, then once a minute.
final class KeyUsage: Sendable {
    private let written = Mutex<[String: Int64]>([:])

    func due(_ id: String, now: Int64) -> Bool {
        self.written.withLock { written in
            if let last = written[id], now - last < 60_000 { return false }
            written[id] = now
            return true
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/keys`: API keys (admin keys). A key's secret is shown once, when it is made.
struct KeysController {
    let store: any HeraldStore
    let clock: any EpochClock

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let admin = v1.group("keys").add(middleware: RequireScope(.admin, store: self.store, clock: self.clock))
        admin.post(use: self.create)
        admin.get(use: self.list)
        admin.delete(":id", use: self.revoke)
        admin.post(":id/rotate", use: self.rotate)
    }

    /// A new key with the old one's scope, app and name; the old one works on through the overlap,
    /// so that every process holding it can move to the new one.
    @Sendable func rotate(_ request: Request, context: APIRequestContext) async throws -> Answer<RotatedKey> {
        let id = context.parameters.get("id") ?? ""
        let body = try await request.decode(as: RotateKeyRequest.self, context: context)
        let now = self.clock.nowMilliseconds
        let overlap = body.overlapSeconds ?? 86_400
        guard (0...30 * 86_400).contains(overlap) else { throw HeraldError.invalid("overlapSeconds is 0 to 2592000", code: "bad_overlapSeconds") }
        try Self.checkExpiry(body.expiresAt, now: now)
        let secret = APIKeySecret.generate()
        guard
            let old = try await self.store.rotateAPIKey(
                replacing: id, id: secret.id, hash: secret.hash, expiresAt: body.expiresAt, overlapUntil: now + overlap * 1000, now: now
            )
        else { throw HeraldError.notFound("API key '\(id)'") }
        return Answer(
            .created, RotatedKey(key: CreatedKey(id: secret.id, key: secret.token, scope: old.scope.rawValue), previous: APIKeyResponse(old)))
    }

    static func checkExpiry(_ expiresAt: Int64?, now: Int64) throws {
        if let expiresAt, expiresAt <= now {
            throw HeraldError.invalid("expiresAt is a time in the future, in milliseconds since 1970", code: "bad_expiresAt")
        }
    }

    @Sendable func create(_ request: Request, context: APIRequestContext) async throws -> Answer<CreatedKey> {
        let body = try await request.decode(as: CreateKeyRequest.self, context: context)
        guard let scope = body.scope.flatMap(APIScope.init(rawValue:)) else {
            throw HeraldError.invalid("scope must be register, send or admin", code: "bad_scope")
        }
        if let appID = body.appId {
            guard let app = try await self.store.app(appID) else { throw HeraldError.notFound("app '\(appID)'") }
            guard app.deletion == nil else { throw HeraldError(code: "not_found", "app '\(appID)' is being deleted") }
        }
        if scope == .register, body.appId == nil {
            throw HeraldError.invalid("a register key belongs to one app: give appId", code: "app_required")
        }
        try Self.checkExpiry(body.expiresAt, now: self.clock.nowMilliseconds)
        let secret = APIKeySecret.generate()
        try await self.store.createAPIKey(
            id: secret.id, hash: secret.hash, scope: scope, appID: body.appId, name: body.name, expiresAt: body.expiresAt,
            now: self.clock.nowMilliseconds
        )
        return Answer(.created, CreatedKey(id: secret.id, key: secret.token, scope: scope.rawValue))
    }

    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> KeyList {
        KeyList(keys: try await self.store.apiKeys().map(APIKeyResponse.init))
    }

    @Sendable func revoke(_ request: Request, context: APIRequestContext) async throws -> Response {
        let id = context.parameters.get("id") ?? ""
        guard try await self.store.revokeAPIKey(id: id, now: self.clock.nowMilliseconds) else { throw HeraldError.notFound("API key '\(id)'") }
        return Response(status: .noContent)
    }
}

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
        let admin = v1.group("keys").add(middleware: RequireScope(.admin, store: self.store))
        admin.post(use: self.create)
        admin.get(use: self.list)
        admin.delete(":id", use: self.revoke)
    }

    @Sendable func create(_ request: Request, context: APIRequestContext) async throws -> Answer<CreatedKey> {
        let body = try await request.decode(as: CreateKeyRequest.self, context: context)
        guard let scope = body.scope.flatMap(APIScope.init(rawValue:)) else {
            throw HeraldError.invalid("scope must be register, send or admin", code: "bad_scope")
        }
        if let appID = body.appId, try await self.store.app(appID) == nil { throw HeraldError.notFound("app '\(appID)'") }
        if scope == .register, body.appId == nil {
            throw HeraldError.invalid("a register key belongs to one app: give appId", code: "app_required")
        }
        let secret = APIKeySecret.generate()
        try await self.store.createAPIKey(id: secret.id, hash: secret.hash, scope: scope, appID: body.appId, name: body.name, now: self.clock.nowMilliseconds)
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

// SPDX-License-Identifier: Apache-2.0
import HeraldAPI
import Hummingbird

/// The API keys, as `GET /v1/keys` lists them: scope, app, expiry and last use; never a secret.
struct DashboardKeysController: Sendable {
    let dashboard: Dashboard

    struct KeysModel: Sendable {
        struct Row: Sendable {
            var id: String
            var name: String
            var scope: String
            var app: String
            var created: String
            /// "never", the time, or the time it expired.
            var expires: String
            var lastUsed: String
            var state: String
        }
        var keys: [Row]
        var hasKeys: Bool
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("keys") { request, _ in try await self.dashboard.page(request) { _ in try await self.keysPage() } }
    }

    func keysPage() async throws -> DashboardView {
        let now = self.dashboard.backend.nowMilliseconds
        let rows = try await self.dashboard.backend.keys().map { key in
            let expired = key.expiresAt.map { $0 <= now } ?? false
            return KeysModel.Row(
                id: key.id, name: key.name ?? "", scope: key.scope, app: key.appId ?? "every app", created: DashboardFormat.time(key.createdAt),
                expires: key.expiresAt.map(DashboardFormat.time) ?? "never", lastUsed: key.lastUsedAt.map(DashboardFormat.time) ?? "never",
                state: key.revokedAt != nil ? "revoked" : expired ? "expired" : "active"
            )
        }
        return DashboardView(template: .keys, title: "API keys", model: KeysModel(keys: rows, hasKeys: !rows.isEmpty), section: .keys)
    }
}

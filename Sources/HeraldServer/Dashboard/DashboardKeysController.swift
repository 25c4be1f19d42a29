// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldAPI
import HeraldCore
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
            var active: Bool
        }
        var keys: [Row]
        var hasKeys: Bool
        /// A key just made or rotated: its secret, shown this once.
        struct Secret: Sendable {
            var id: String
            var secret: String
            var rotated: Bool
        }
        var secret: Secret?
        var error: String?
        var apps: [DashboardOption]
        var scopes: [DashboardOption]
    }

    /// How long a key made here may live: a day to ten years.
    static let expiryDays: ClosedRange<Int64> = 1...3650

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("keys") { request, _ in try await self.dashboard.page(request) { _ in try await self.keysPage() } }
        group.post("keys") { request, _ in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let name = (form["name"] ?? "").trimmingCharacters(in: .whitespaces)
            let app = (form["app"] ?? "").isEmpty ? nil : form["app"]
            do {
                guard let scope = APIScope(rawValue: form["scope"] ?? "") else {
                    throw HeraldError.invalid("choose a scope: register, send or admin", code: "bad_scope")
                }
                let days = (form["expiresInDays"] ?? "").trimmingCharacters(in: .whitespaces)
                var expiresAt: Int64?
                if !days.isEmpty {
                    guard let count = Int64(days), Self.expiryDays.contains(count) else {
                        throw HeraldError.invalid("the expiry is a number of days, 1 to 3650 (empty: never)", code: "bad_expiresAt")
                    }
                    expiresAt = self.dashboard.backend.nowMilliseconds + count * 86_400_000
                }
                // An admin key is every app's.
                let created = try await self.dashboard.backend.createKey(
                    scope: scope, appID: scope == .admin ? nil : app, name: name.isEmpty ? nil : name, expiresAt: expiresAt)
                let view = try await self.keysPage(secret: KeysModel.Secret(id: created.id, secret: created.secret, rotated: false))
                return self.dashboard.views.response(view, session: session)
            } catch let error as HeraldError {
                let view = try await self.keysPage(error: DashboardFormat.sentence(error.message))
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
        group.post("keys/:id/rotate") { request, context in
            let session = try await self.dashboard.sessions.authorized(request, form: try await DashboardForm.read(request))
            let rotated = try await self.dashboard.backend.rotateKey(id: context.parameters.get("id") ?? "")
            let view = try await self.keysPage(secret: KeysModel.Secret(id: rotated.id, secret: rotated.secret, rotated: true))
            return self.dashboard.views.response(view, session: session)
        }
        group.post("keys/:id/revoke") { request, context in
            let session = try await self.dashboard.sessions.authorized(request, form: try await DashboardForm.read(request))
            do {
                try await self.dashboard.backend.revokeKey(id: context.parameters.get("id") ?? "")
            } catch let error as HeraldError where error.code == "last_admin_key" {
                let view = try await self.keysPage(error: DashboardFormat.sentence(error.message))
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
            return DashboardViews.redirect("/dashboard/keys")
        }
    }

    func keysPage(secret: KeysModel.Secret? = nil, error: String? = nil) async throws -> DashboardView {
        let now = self.dashboard.backend.nowMilliseconds
        let rows = try await self.dashboard.backend.keys().map { key in
            let expired = key.expiresAt.map { $0 <= now } ?? false
            return KeysModel.Row(
                id: key.id, name: key.name ?? "", scope: key.scope, app: key.appId ?? "every app", created: DashboardFormat.time(key.createdAt),
                expires: key.expiresAt.map(DashboardFormat.time) ?? "never", lastUsed: key.lastUsedAt.map(DashboardFormat.time) ?? "never",
                state: key.revokedAt != nil ? "revoked" : expired ? "expired" : "active", active: key.revokedAt == nil && !expired
            )
        }
        let apps = try await self.dashboard.store.apps().map { DashboardOption(value: $0.id, label: $0.id, selected: false) }
        let scopes = [("send", "send: send notifications"), ("register", "register: devices register (in the app)"), ("admin", "admin: everything")]
            .map { DashboardOption(value: $0.0, label: $0.1, selected: $0.0 == "send") }
        return DashboardView(
            template: .keys, title: "API keys",
            model: KeysModel(
                keys: rows, hasKeys: !rows.isEmpty, secret: secret, error: error,
                apps: [DashboardOption(value: "", label: "every app", selected: false)] + apps, scopes: scopes),
            section: .keys)
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import Hummingbird

/// The apps and their credentials; an app's page with its recent notifications and webhooks.
struct DashboardAppsController: Sendable {
    let dashboard: Dashboard

    struct AppsModel: Sendable {
        struct Row: Sendable {
            var id: String
            var path: String
            var bundleID: String
            var credentials: [Credential]
            var fcm: FCMCredential
        }
        var apps: [Row]
        var hasApps: Bool
        /// Apps being deleted in the background, with their progress.
        var deleting: [String] = []
        var error: String?
        var form = NewApp()
        /// What the create form held, shown again with its error.
        struct NewApp: Sendable {
            var id = ""
            var bundleID = ""
        }
    }

    /// The outcome of an environment's credential check.
    struct Check: Sendable {
        var environment: String
        var working: Bool
        var message: String
    }

    /// The app's FCM (Android) service account: one of these is set. The key is never shown.
    struct FCMCredential: Sendable {
        struct Account: Sendable {
            var projectID: String
            var clientEmail: String
            var keyID: String
        }
        var notConfigured = false
        var builtInEmulator = false
        var unreadable: String?
        var account: Account?
    }

    /// The FCM section's outcome on the app's page: a form's notice or error (with its code), or
    /// a check's result.
    /// (Names of their own: a missing one must not show the page's `notice` or `check`.)
    struct FCMOutcome: Sendable {
        var fcmNotice: String?
        var fcmError: String?
        var fcmCheck: DashboardFCMCheck.Outcome?
    }

    /// What credential an environment has, with warnings: one of these is set.
    struct Credential: Sendable {
        struct TokenKey: Sendable {
            var keyID: String
            var teamID: String
            var restricted: Bool
            var restriction: String
        }
        struct ExpiresSoon: Sendable {
            var days: Int
            var date: String
        }
        var notConfigured = false
        var builtInEmulator = false
        var unreadable = false
        var tokenKey: TokenKey?
        var certificateUnreadable = false
        var expiredOn: String?
        var expiresSoon: ExpiresSoon?
        var validUntil: String?
    }

    struct AppModel: Sendable {
        struct Notification: Sendable {
            var path: String
            var shortID: String
            var created: String
            var audience: Int
            var state: String
            var sent: Int
            var failed: Int
            var pending: Int
            var title: String
            var audienceText: String
        }
        struct Hook: Sendable {
            struct EventType: Sendable {
                var name: String
                var lineBreak: Bool
            }
            struct Message: Sendable {
                var state: String
                var events: Int
                var eventsPlural: Bool
                var attempts: Int
                var attemptsPlural: Bool
                var detail: String?
            }
            var id: String
            var path: String
            var url: String
            var types: [EventType]
            var messages: [Message]
            var hasMessages: Bool
        }
        struct Secret: Sendable {
            var id: String
            var secret: String
        }
        struct EventChoice: Sendable {
            var name: String
            var checked: Bool
            var space: Bool
        }
        var id: String
        var appPath: String
        var bundleID: String
        var development: Credential
        var production: Credential
        var fcm: FCMCredential
        var fcmOutcome: FCMOutcome
        /// Web Push: the VAPID public key, the app's browsers, a new key's outcome.
        var webPush: DashboardWebPushController.Section
        var notifications: [Notification]
        var hasNotifications: Bool
        var error: String?
        var secret: Secret?
        var hooks: [Hook]
        var hasHooks: Bool
        var eventChoices: [EventChoice]
        struct RateLimitField: Sendable {
            static let labels = [
                "register": "Registrations of the app, all keys and addresses",
                "registerPerAddress": "Registrations per client address (its register key; in place of the server's)",
                "receipt": "Receipts of the app", "send": "Sends of the app",
            ]
            var field: String
            var value: String
            var label: String
        }
        var userVerification: Bool
        /// Unbound user assertions (no `tkh`) still accepted: apps made before they were bound.
        var unboundAssertions: Bool
        /// The app's own rate limits, one field each (`BURST/PER_SECOND`, empty for none).
        var rateLimits: [RateLimitField]
        var protectedTags: String
        /// The quiet hours' start and end (`HH:MM`), empty for none.
        var quietStart: String
        var quietEnd: String
        /// The frequency cap's limit and window (seconds), empty for none.
        var capLimit: String
        var capWindow: String
        var capPerCategory: Bool
        /// The default throttle (deliveries a minute), empty for none.
        var throttlePerMinute: String
        /// A setup form's outcome: what was done, or what went wrong.
        var notice: String?
        var setupError: String?
        var check: Check?
        /// An environment has credentials of its own (else the upload form is open).
        var hasCredentials: Bool
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps") { request, _ in try await self.dashboard.page(request) { _ in try await self.appsPage() } }
        group.get("apps/:app") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.appPage(app: try await self.dashboard.app(context.parameters.get("app")), secret: nil)
            }
        }
        group.post("apps/:app/webhooks") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            let types = Set(DeliveryEventType.allCases.filter { form["event." + $0.rawValue] != nil })
            do {
                let created = try await self.dashboard.backend.createWebhook(
                    appID: app.id, url: form["url"], types: types.isEmpty ? [.failed, .invalidated] : types)
                var view = try await self.appPage(app: app, secret: AppModel.Secret(id: created.id, secret: created.secret))
                view.title = app.id
                return self.dashboard.views.response(view, session: session)
            } catch let error as HeraldError {
                var view = try await self.appPage(app: app, secret: nil, error: error.message)
                view.title = app.id
                return self.dashboard.views.response(view, session: session, status: .badRequest)
            }
        }
        group.post("apps/:app/webhooks/:id/delete") { request, context in
            _ = try await self.dashboard.sessions.authorized(request, form: try await DashboardForm.read(request))
            let app = try await self.dashboard.app(context.parameters.get("app"))
            try await self.dashboard.backend.deleteWebhook(appID: app.id, id: context.parameters.get("id") ?? "")
            return DashboardViews.redirect("/dashboard/apps/\(DashboardFormat.path(app.id))")
        }
    }

    func appsPage(error: String? = nil, form: AppsModel.NewApp = AppsModel.NewApp()) async throws -> DashboardView {
        var rows: [AppsModel.Row] = []
        var deleting: [String] = []
        for app in try await self.dashboard.store.apps() {
            if let deletion = app.deletion {
                deleting.append("\(app.id): \(deletion.deletedRows) rows deleted so far")
                continue
            }
            rows.append(
                AppsModel.Row(
                    id: app.id, path: DashboardFormat.path(app.id), bundleID: app.bundleID, credentials: try await self.credentials(app),
                    fcm: try await self.fcmCredential(app)))
        }
        return DashboardView(
            template: .apps, title: "Apps",
            model: AppsModel(apps: rows, hasApps: !rows.isEmpty, deleting: deleting, error: error, form: form), section: .apps)
    }

    /// One per environment (development, production): what credential it has, with warnings.
    func credentials(_ app: App) async throws -> [Credential] {
        let sealed = try await self.dashboard.store.credentials(appID: app.id)
        let now = Date(timeIntervalSince1970: Double(self.dashboard.backend.nowMilliseconds) / 1000)
        return [APNSEnvironment.development, .production].map { environment in
            guard let bytes = sealed[.apns(environment)] else {
                return self.dashboard.emulator == nil ? Credential(notConfigured: true) : Credential(builtInEmulator: true)
            }
            guard let material = self.dashboard.backend.openCredential(bytes) else { return Credential(unreadable: true) }
            switch material {
            case .token(let keyID, let teamID, _, let restriction):
                return Credential(
                    tokenKey: Credential.TokenKey(
                        keyID: keyID, teamID: teamID, restricted: restriction != nil,
                        restriction: restriction.map { DashboardFormat.environmentName($0.rawValue) } ?? ""
                    ))
            case .certificate(let pem, _):
                guard let certificate = CertificateSummary(pem: pem) else { return Credential(certificateUnreadable: true) }
                let expiry = certificate.notValidAfter
                let days = Int(expiry.timeIntervalSince(now) / 86_400)
                let date = String(expiry.formatted(.iso8601).prefix(10))
                if days < 0 { return Credential(expiredOn: date) }
                if days < 30 { return Credential(expiresSoon: Credential.ExpiresSoon(days: days, date: date)) }
                return Credential(validUntil: date)
            }
        }
    }

    /// The app's FCM service account, as the apps list and the app's page show it.
    func fcmCredential(_ app: App) async throws -> FCMCredential {
        let sealed = try await self.dashboard.store.credentials(appID: app.id)[.fcm]
        return DashboardFCMController(dashboard: self.dashboard).credential(app, sealed: sealed)
    }

    func appPage(
        app: App, secret: AppModel.Secret?, error: String? = nil, notice: String? = nil, setupError: String? = nil, check: Check? = nil,
        fcm: FCMOutcome = FCMOutcome(), webPush: DashboardWebPushController.Outcome = .init()
    ) async throws -> DashboardView {
        let credentials = try await self.credentials(app)
        var hooks: [AppModel.Hook] = []
        for hook in try await self.dashboard.store.webhooks(appID: app.id) {
            let messages = try await self.dashboard.store.webhookMessages(webhookID: hook.id, limit: 5).map { message in
                AppModel.Hook.Message(
                    state: message.state == .delivered ? "delivered" : message.state == .expired ? "expired" : "pending",
                    events: message.events, eventsPlural: message.events != 1, attempts: message.attempts, attemptsPlural: message.attempts != 1,
                    detail: message.lastError ?? message.lastStatus.map { "HTTP \($0)" }
                )
            }
            let types = DeliveryEventType.allCases.filter(hook.types.contains).enumerated().map {
                AppModel.Hook.EventType(name: $0.element.rawValue, lineBreak: $0.offset > 0)
            }
            hooks.append(
                AppModel.Hook(
                    id: hook.id, path: DashboardFormat.path(hook.id), url: hook.url, types: types, messages: messages, hasMessages: !messages.isEmpty
                ))
        }
        var notifications: [AppModel.Notification] = []
        let now = self.dashboard.backend.nowMilliseconds
        for n in try await self.dashboard.store.notifications(appID: app.id, limit: 20, before: nil) {
            let counts = try await self.dashboard.store.notification(appID: app.id, id: n.id, deliveryLimit: 0)?.counts ?? [:]
            let shown = DashboardNotificationsController.shown(n.content)
            notifications.append(
                AppModel.Notification(
                    path: DashboardFormat.path(n.id), shortID: String(n.id.prefix(8)), created: DashboardFormat.time(n.createdAt),
                    audience: n.audienceSize, state: DashboardNotificationsController.state(n, counts: counts, now: now),
                    sent: counts[.sent] ?? 0, failed: counts[.failed] ?? 0, pending: counts[.pending] ?? 0,
                    title: shown.title.isEmpty ? shown.body : shown.title,
                    audienceText: DashboardNotificationsController.audienceText(n.content?.targetingJSON)
                ))
        }
        let model = AppModel(
            id: app.id, appPath: DashboardFormat.path(app.id), bundleID: app.bundleID, development: credentials[0], production: credentials[1],
            fcm: try await self.fcmCredential(app), fcmOutcome: fcm,
            webPush: try await DashboardWebPushController(dashboard: self.dashboard).section(app, outcome: webPush),
            notifications: notifications, hasNotifications: !notifications.isEmpty, error: error, secret: secret, hooks: hooks,
            hasHooks: !hooks.isEmpty,
            eventChoices: DeliveryEventType.allCases.enumerated().map {
                AppModel.EventChoice(name: $0.element.rawValue, checked: $0.element != .sent, space: $0.offset > 0)
            },
            userVerification: app.security.userVerification, unboundAssertions: app.security.unboundAssertions,
            rateLimits: AppRateLimits.fields.map { field in
                AppModel.RateLimitField(
                    field: field, value: app.security.rateLimits[field]?.description ?? "", label: AppModel.RateLimitField.labels[field] ?? field)
            },
            protectedTags: app.security.protectedTags.joined(separator: ", "),
            quietStart: app.security.quietHours?.startText ?? "", quietEnd: app.security.quietHours?.endText ?? "",
            capLimit: app.security.frequencyCap.map { "\($0.limit)" } ?? "", capWindow: app.security.frequencyCap.map { "\($0.windowSeconds)" } ?? "",
            capPerCategory: app.security.frequencyCap?.perCategory ?? false,
            throttlePerMinute: app.security.throttlePerMinute.map { "\($0)" } ?? "",
            notice: notice, setupError: setupError, check: check,
            hasCredentials: credentials.contains { !$0.notConfigured && !$0.builtInEmulator }
        )
        return DashboardView(template: .app, title: app.id, model: model, section: .apps)
    }
}

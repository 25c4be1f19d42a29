// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Hummingbird

/// An app's Web Push in the browser: its VAPID public key, the `applicationServerKey` pages
/// subscribe with (made on the page's first view, as `GET /v1/apps/{app}/webpush/key` makes it),
/// and a new key (`POST …/webpush/key`'s rotation, audited `webpush.rotate`), both through
/// ``WebPushController``'s own functions. The private key is never shown. The form is an admin
/// session's, with its CSRF token.
struct DashboardWebPushController: Sendable {
    let dashboard: Dashboard

    /// The Web Push section of the app's page. (Names of their own: a missing one must not show
    /// the page's `notice` or `error`.)
    struct Section: Sendable {
        /// The public key (base64url), or why it could not be read or made.
        var webPushKey: String?
        var webPushKeyError: String?
        /// The app's active browsers: who must subscribe again after a new key.
        var webPushBrowsers: Int
        var webPushBrowsersPlural: Bool
        var webPushNotice: String?
        var webPushError: String?
    }

    /// A form's outcome in the section: what was done, or what went wrong (with its code).
    struct Outcome: Sendable {
        var notice: String?
        var error: String?
    }

    var apps: DashboardAppsController { DashboardAppsController(dashboard: self.dashboard) }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.post("apps/:app/webpush/key") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            do {
                _ = try await self.dashboard.backend.rotateWebPushKey(app, by: session.key.id)
                let notice =
                    "New VAPID key made. Browsers subscribed with the old one get no more pushes: "
                    + "each is marked inactive at its next push, and a page with Herald's SDK subscribes again with the new key."
                let view = try await self.apps.appPage(app: app, secret: nil, webPush: Outcome(notice: notice))
                return self.dashboard.views.response(view, session: session)
            } catch let error as HeraldError {
                let view = try await self.apps.appPage(
                    app: app, secret: nil, webPush: Outcome(error: "\(error.code): \(DashboardFormat.sentence(error.message))"))
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
    }

    /// The section for `app`: its public key, made now if it has none (a key that cannot be read
    /// or made is said, with its code, and the page still shows), and its active browsers.
    func section(_ app: App, outcome: Outcome) async throws -> Section {
        var key: String?
        var keyError: String?
        do {
            key = try await self.dashboard.backend.webPushPublicKey(app)
        } catch let error as HeraldError {
            keyError = "\(error.code): \(DashboardFormat.sentence(error.message))"
        }
        let browsers = try await self.dashboard.backend.activeDevices(app, transport: .webpush)
        return Section(
            webPushKey: key, webPushKeyError: keyError, webPushBrowsers: browsers, webPushBrowsersPlural: browsers != 1,
            webPushNotice: outcome.notice, webPushError: outcome.error)
    }
}

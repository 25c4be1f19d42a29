// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import FCMEmulator
import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird
import Logging

/// The dashboard at `/dashboard`: server-rendered HTML (readable without JavaScript) from the
/// templates in `Templates/`, a little plain JavaScript for the live parts (the send form's
/// preview, the emulated phone). One controller per area registers its routes; sessions and CSRF
/// are `DashboardSessions`; everything it needs from the API layer goes through `DashboardBackend`.
struct Dashboard: Sendable {
    let backend: DashboardBackend
    let clients: ClientProvider
    let emulator: APNSEmulator?
    /// The FCM clients (an app's own service account's, or the built-in FCM emulator's): the
    /// credential check's; nil when the server sends nothing to FCM.
    let fcmClients: FCMClientProvider?
    /// The built-in FCM emulator, where apps without a service account send.
    let fcmEmulator: FCMEmulator?
    let views: DashboardViews
    let sessions: DashboardSessions
    let staticFiles: DashboardStaticFiles

    var store: any HeraldStore { self.backend.store }

    /// Reads the templates and static files: a missing or malformed one fails here, at start.
    init(
        api: API, clients: ClientProvider, emulator: APNSEmulator?, fcmClients: FCMClientProvider? = nil, fcmEmulator: FCMEmulator? = nil
    ) throws {
        self.backend = DashboardBackend(api: api)
        self.clients = clients
        self.emulator = emulator
        self.fcmClients = fcmClients
        self.fcmEmulator = fcmEmulator
        self.views = try DashboardViews()
        self.sessions = DashboardSessions(backend: self.backend)
        self.staticFiles = try DashboardStaticFiles()
    }

    func register<Context: RequestContext>(on router: Router<Context>) {
        let group = router.group("dashboard").add(middleware: DashboardErrorMiddleware<Context>(dashboard: self))
        self.staticFiles.register(on: group)
        DashboardSignInController(dashboard: self).register(on: group)
        DashboardOverviewController(dashboard: self).register(on: group)
        DashboardAppsController(dashboard: self).register(on: group)
        DashboardSetupController(dashboard: self).register(on: group)
        DashboardFCMController(dashboard: self).register(on: group)
        DashboardWebPushController(dashboard: self).register(on: group)
        DashboardKeysController(dashboard: self).register(on: group)
        DashboardDevicesController(dashboard: self).register(on: group)
        DashboardTemplatesController(dashboard: self).register(on: group)
        DashboardChannelsController(dashboard: self).register(on: group)
        DashboardLiveActivitiesController(dashboard: self).register(on: group)
        DashboardSendController(dashboard: self).register(on: group)
        DashboardNotificationsController(dashboard: self).register(on: group)
        DashboardEmulatorController(dashboard: self).register(on: group)
    }

    /// A page for a signed-in admin; others are sent to sign in. What is not found is a page too.
    func page(_ request: Request, _ body: (DashboardSession) async throws -> DashboardView) async throws -> Response {
        guard let session = try await self.sessions.current(request) else { return DashboardViews.redirect("/dashboard/login") }
        do {
            return self.views.response(try await body(session), session: session)
        } catch let error as HeraldError where DashboardBackend.isNotFound(error) {
            let view = DashboardView(template: .notFound, title: "Not found", model: NotFoundModel(message: DashboardFormat.sentence(error.message)))
            return self.views.response(view, session: session, status: .notFound)
        }
    }

    struct NotFoundModel: Sendable {
        var message: String
    }

    struct ErrorModel: Sendable {
        var heading: String
        var message: String
        var back: String
        var backLabel: String
    }

    /// An error as a page of the dashboard: the layout and its navigation, a heading, the message
    /// in words (never an internal code), and a way on.
    func errorPage(_ request: Request, status: HTTPResponse.Status, message: String) async -> Response {
        let session = try? await self.sessions.current(request)
        if session == nil, status == .unauthorized || status == .forbidden {
            // Signed out (or the session ended) while a form was open: sign in again.
            return DashboardViews.redirect("/dashboard/login")
        }
        let heading: String
        switch status {
        case .notFound: heading = "Not found"
        case .forbidden: heading = "Refused"
        case .conflict: heading = "Conflict"
        case .contentTooLarge: heading = "Too large"
        case _ where status.code >= 500: heading = "Something went wrong"
        default: heading = "That did not work"
        }
        // Back to the page the form was on, when it was one of the dashboard's.
        let referer = request.headers[HTTPField.Name("Referer")!].flatMap { URL(string: $0)?.path }.flatMap { $0.hasPrefix("/dashboard") ? $0 : nil }
        let model = ErrorModel(
            heading: heading, message: message, back: referer ?? "/dashboard", backLabel: referer == nil ? "Back to the overview" : "Back"
        )
        return self.views.response(DashboardView(template: .error, title: heading, model: model), session: session, status: status)
    }

    /// The app `id`: 404 when there is none, or while it is being deleted (nothing more is done
    /// to it; the apps page shows its progress).
    func app(_ id: String?) async throws -> App {
        let id = id ?? ""
        guard let app = try await self.store.app(id) else { throw HeraldError.notFound("app '\(id)'") }
        guard app.deletion == nil else { throw HeraldError(code: "not_found", "app '\(id)' is being deleted") }
        return app
    }
}

/// Every error of a dashboard route as a dashboard page (``Dashboard/errorPage(_:status:message:)``),
/// not the API's JSON: a stale form, a missing app, a refused action.
struct DashboardErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let dashboard: Dashboard

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HeraldError {
            return await self.dashboard.errorPage(
                request, status: DashboardBackend.status(of: error), message: DashboardFormat.sentence(error.message))
        } catch let error as HTTPError {
            return await self.dashboard.errorPage(
                request, status: error.status, message: DashboardFormat.sentence(error.body ?? error.status.reasonPhrase))
        } catch {
            context.logger.error("dashboard request failed", metadata: ["error": "\(type(of: error))"])
            return await self.dashboard.errorPage(request, status: .internalServerError, message: "The server failed to handle this request.")
        }
    }
}

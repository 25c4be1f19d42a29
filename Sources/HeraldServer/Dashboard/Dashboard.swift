// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import HeraldCore
import Hummingbird

/// The dashboard at `/dashboard`: server-rendered HTML (readable without JavaScript) from the
/// templates in `Templates/`, a little plain JavaScript for the live parts (the send form's
/// preview, the emulated phone). One controller per area registers its routes; sessions and CSRF
/// are `DashboardSessions`; everything it needs from the API layer goes through `DashboardBackend`.
struct Dashboard: Sendable {
    let backend: DashboardBackend
    let clients: ClientProvider
    let emulator: APNSEmulator?
    let views: DashboardViews
    let sessions: DashboardSessions
    let staticFiles: DashboardStaticFiles

    var store: any HeraldStore { self.backend.store }

    /// Reads the templates and static files: a missing or malformed one fails here, at start.
    init(api: API, clients: ClientProvider, emulator: APNSEmulator?) throws {
        self.backend = DashboardBackend(api: api)
        self.clients = clients
        self.emulator = emulator
        self.views = try DashboardViews()
        self.sessions = DashboardSessions(backend: self.backend)
        self.staticFiles = try DashboardStaticFiles()
    }

    func register<Context: RequestContext>(on router: Router<Context>) {
        let group = router.group("dashboard")
        self.staticFiles.register(on: group)
        DashboardSignInController(dashboard: self).register(on: group)
        DashboardOverviewController(dashboard: self).register(on: group)
        DashboardAppsController(dashboard: self).register(on: group)
        DashboardKeysController(dashboard: self).register(on: group)
        DashboardDevicesController(dashboard: self).register(on: group)
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
            let view = DashboardView(template: .notFound, title: "Not found", model: NotFoundModel(message: error.message))
            return self.views.response(view, session: session, status: .notFound)
        }
    }

    struct NotFoundModel: Sendable {
        var message: String
    }

    func app(_ id: String?) async throws -> App {
        let id = id ?? ""
        guard let app = try await self.store.app(id) else { throw HeraldError.notFound("app '\(id)'") }
        return app
    }
}

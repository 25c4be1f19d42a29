// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldCore
import Hummingbird

/// The built-in emulator's virtual devices, and the emulated phone that shows what one receives.
struct DashboardEmulatorController: Sendable {
    let dashboard: Dashboard

    struct EmulatorModel: Sendable {
        struct Row: Sendable {
            var token: String
            var shortToken: String
            var bundleID: String
            var environment: String
            var kind: String
            var received: Int
        }
        var error: String?
        var apps: [String]
        var devices: [Row]
        var hasDevices: Bool
    }

    struct PhoneModel: Sendable {
        struct SendLink: Sendable {
            var appID: String
            var appPath: String
            var space: Bool
        }
        struct Item: Sendable {
            var pushType: String
            var time: String
            var title: String
            var subtitle: String
            var body: String
        }
        var token: String
        var bundleID: String
        var environment: String
        var online: Bool
        var uninstalled: Bool
        var notificationsEnabled: Bool
        var sendLinks: [SendLink]
        var inbox: [Item]
        var empty: Bool
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("emulator") { request, _ in try await self.dashboard.page(request) { _ in try await self.emulatorPage(error: nil) } }
        group.post("emulator/devices") { request, _ in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            guard let emulator = self.dashboard.emulator else {
                throw HeraldError.notFound("the built-in emulator (Apple credentials are configured)")
            }
            guard let app = try await self.dashboard.store.app(form["app"] ?? "") else {
                return self.dashboard.views.response(
                    try await self.emulatorPage(error: "Choose an app.", title: "Emulator"), session: session, status: .badRequest)
            }
            let environment = form["environment"] == "production" ? APNSEnvironment.production : .development
            let now = self.dashboard.backend.nowMilliseconds
            let device = emulator.state.createDevice(bundleID: app.bundleID, environment: environment, kind: .device, now: now)
            let user = (form["user"] ?? "").trimmingCharacters(in: .whitespaces)
            let tags = (form["tags"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            let locale = (form["locale"] ?? "").trimmingCharacters(in: .whitespaces)
            do {
                let body = JSONValue.object([
                    ("environment", .string(environment == .development ? "sandbox" : "production")),
                    ("userId", user.isEmpty ? .null : .string(user)), ("tags", .array(tags.map(JSONValue.string))), ("platform", "iOS"),
                    ("locale", locale.isEmpty ? .null : .string(locale)),
                ])
                try await self.dashboard.backend.register(appID: app.id, body: body, token: device.token, now: now)
            } catch let error as HeraldError {
                emulator.state.removeDevice(token: device.token)
                return self.dashboard.views.response(
                    try await self.emulatorPage(error: error.message, title: "Emulator"), session: session, status: .badRequest)
            }
            return DashboardViews.redirect("/dashboard/emulator/\(device.token)")
        }
        group.get("emulator/:token") { request, context in
            try await self.dashboard.page(request) { _ in try await self.phonePage(token: context.parameters.get("token") ?? "") }
        }
        // What a person does with the phone: go offline (APNs keeps the last push for later),
        // come back online (it arrives), turn notifications off or on, delete the app.
        group.post("emulator/:token/:action") { request, context in
            _ = try await self.dashboard.sessions.authorized(request, form: try await DashboardForm.read(request))
            let token = context.parameters.get("token") ?? ""
            guard let emulator = self.dashboard.emulator, emulator.state.device(token: token) != nil else {
                throw HeraldError.notFound("virtual device")
            }
            let now = self.dashboard.backend.nowMilliseconds
            switch context.parameters.get("action") ?? "" {
            case "offline": _ = emulator.state.updateDevice(token: token, online: false, notificationsEnabled: nil, now: now)
            case "online": _ = emulator.state.updateDevice(token: token, online: true, notificationsEnabled: nil, now: now)
            case "mute": _ = emulator.state.updateDevice(token: token, online: nil, notificationsEnabled: false, now: now)
            case "unmute": _ = emulator.state.updateDevice(token: token, online: nil, notificationsEnabled: true, now: now)
            case "uninstall": _ = emulator.state.uninstall(token: token, now: now)
            default: throw HeraldError.notFound("that action")
            }
            return DashboardViews.redirect("/dashboard/emulator/\(DashboardFormat.path(token))")
        }
        group.get("emulator/:token/stream") { request, context in
            guard try await self.dashboard.sessions.current(request) != nil, let cookie = request.cookies[DashboardSessions.cookie]?.value else {
                throw HeraldError.unauthorized
            }
            let sessions = self.dashboard.sessions
            // The session is asked again while the stream runs: signing out elsewhere does not end
            // it, but a key revoked or expired does.
            let watch = EventStream.Watch(clock: self.dashboard.backend.clock) {
                guard let session = try await sessions.session(cookie: cookie) else { return .ended("the session ended") }
                return .until(session.key.expiresAt)
            }
            return try self.phoneStream(token: context.parameters.get("token") ?? "", watch: watch)
        }
    }

    func emulatorPage(error: String?, title: String? = nil) async throws -> DashboardView {
        guard let emulator = self.dashboard.emulator else {
            return DashboardView(template: .emulatorOff, title: "Emulator", model: DashboardView.Empty(), section: .emulator)
        }
        let apps = try await self.dashboard.store.apps()
        let devices = emulator.state.devices.sorted { $0.createdAtMilliseconds > $1.createdAtMilliseconds }.prefix(100).map { d in
            EmulatorModel.Row(
                token: d.token, shortToken: String(d.token.prefix(16)), bundleID: d.bundleID,
                environment: DashboardFormat.environmentName(d.environment),
                kind: d.kind.rawValue, received: d.receivedCount
            )
        }
        let model = EmulatorModel(error: error, apps: apps.map(\.id), devices: devices, hasDevices: !devices.isEmpty)
        return DashboardView(template: .emulator, title: "Emulator", model: model, section: .emulator)
    }

    func phonePage(token: String) async throws -> DashboardView {
        guard let emulator = self.dashboard.emulator, let device = emulator.state.device(token: token) else {
            throw HeraldError.notFound("virtual device")
        }
        let inbox = (emulator.state.inbox(token: device.token) ?? []).reversed().map { notification in
            let item = Self.phoneJSON(notification)
            return PhoneModel.Item(
                pushType: item["pushType"]?.stringValue ?? "", time: DashboardFormat.clock(notification.deliveredAtMilliseconds),
                title: item["title"]?.stringValue ?? "",
                subtitle: item["subtitle"]?.stringValue ?? "", body: item["body"]?.stringValue ?? ""
            )
        }
        let apps = try await self.dashboard.store.apps().filter { $0.bundleID == device.bundleID }
        let model = PhoneModel(
            token: device.token, bundleID: device.bundleID, environment: DashboardFormat.environmentName(device.environment),
            online: device.online, uninstalled: device.uninstalledAtMilliseconds != nil, notificationsEnabled: device.notificationsEnabled,
            sendLinks: apps.enumerated().map {
                PhoneModel.SendLink(appID: $0.element.id, appPath: DashboardFormat.path($0.element.id), space: $0.offset > 0)
            },
            inbox: inbox, empty: inbox.isEmpty
        )
        return DashboardView(template: .phone, title: "Phone \(device.token.prefix(8))…", model: model, section: .emulator)
    }

    static func phoneJSON(_ notification: ReceivedNotification) -> JSONValue {
        let payload = (try? JSONValue.parse(notification.payload)) ?? .null
        let alert = payload["aps"]?["alert"]
        let title = alert?.stringValue ?? alert?["title"]?.stringValue ?? (notification.pushType == "background" ? "(background push)" : "")
        return .object([
            ("title", .string(title)), ("subtitle", .string(alert?["subtitle"]?.stringValue ?? "")),
            ("body", .string(alert?["body"]?.stringValue ?? "")), ("pushType", .string(notification.pushType)),
            ("at", .int(notification.deliveredAtMilliseconds)), ("time", .string(DashboardFormat.clock(notification.deliveredAtMilliseconds))),
            ("apnsId", .string(notification.apnsID)),
        ])
    }

    /// What the virtual device receives, as server-sent events.
    func phoneStream(token: String, watch: EventStream.Watch) throws -> Response {
        guard let emulator = self.dashboard.emulator, emulator.state.device(token: token) != nil else { throw HeraldError.notFound("virtual device") }
        let events = self.dashboard.backend.events
        return DashboardBackend.eventStreamResponse { writer in
            // Registered here, where the body is written: a client gone before this holds nothing.
            let (stream, feed) = AsyncStream<StreamItem>.makeStream(bufferingPolicy: .bufferingNewest(1000))
            let listener = emulator.state.addListener(
                token: token, onRemoved: { feed.finish() },
                { notification in
                    feed.yield(.event(DeliveryEvent(id: notification.apnsID, type: .sent, appID: "", json: Self.phoneJSON(notification))))
                }
            )
            if listener == nil { feed.finish() }
            // An app-less subscription, finished with every other stream at shutdown: then this one ends too.
            let subscription = events.subscribe(appID: "")
            defer {
                if let listener { emulator.state.removeListener(listener) }
                events.unsubscribe(subscription.id)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in subscription.items {}
                    feed.finish()
                }
                try await DashboardBackend.writeEvents(&writer, items: stream, feed: feed, watch: watch) { event in
                    "event: push\ndata: \(String(decoding: event.json.serialized(), as: UTF8.self))\n\n"
                }
                group.cancelAll()
            }
        }
    }
}

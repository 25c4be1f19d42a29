// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import Hummingbird

/// An app's devices: search by user, tag or token prefix; a device's page with its deliveries.
struct DashboardDevicesController: Sendable {
    let dashboard: Dashboard

    struct DevicesModel: Sendable {
        struct Row: Sendable {
            var token: String
            var shortToken: String
            var kind: String
            /// The push service: apns, fcm or Web (``DashboardFormat/platform(_:)``).
            var platform: String
            /// A browser's subscription endpoint, masked (``WebSubscription/maskedEndpoint``): never
            /// the whole endpoint (a capability) nor its keys.
            var endpoint: String?
            var environment: String
            var user: String
            var tags: String
            var active: Bool
        }
        var id: String
        var appPath: String
        var options: [DashboardOption]
        var text: String
        var searched: Bool
        var count: Int
        var plural: Bool
        var devices: [Row]
        var hasDevices: Bool
    }

    struct DeviceModel: Sendable {
        struct Pair: Sendable {
            var label: String
            var value: String
        }
        struct Delivery: Sendable {
            var notificationPath: String
            var updated: String
            var pushType: String
            var platform: String
            var state: String
            var status: String
            var reason: String
            var why: String?
            var attempts: Int
        }
        struct Invalidation: Sendable {
            var at: String
            var reason: String
            var applied: Bool
            var why: String
        }
        var token: String
        var appPath: String
        var details: [Pair]
        var active: Bool
        var invalidatedAt: String
        var invalidationReason: String
        var invalidations: [Invalidation]
        var hasInvalidations: Bool
        var deliveries: [Delivery]
        var hasDeliveries: Bool
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/devices") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.devicesPage(app: try await self.dashboard.app(context.parameters.get("app")), query: request.uri.queryParameters)
            }
        }
        group.get("apps/:app/devices/:token") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.devicePage(
                    app: try await self.dashboard.app(context.parameters.get("app")), token: context.parameters.get("token") ?? "")
            }
        }
    }

    func devicesPage(app: App, query: Parameters) async throws -> DashboardView {
        let by = query["by"].map(String.init) ?? "user"
        let text = (query["q"].map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
        var devices: [Device] = []
        if !text.isEmpty {
            var filter = DeviceQuery(limit: 200)
            switch by {
            case "tag": filter.tag = text
            // An APNs token is hex, any case; FCM's and the web's identifiers keep theirs.
            case "prefix":
                let prefixes = [FCMIdentifier.tokenPrefix, FCMIdentifier.installationPrefix, WebSubscription.addressPrefix]
                filter.tokenPrefix = prefixes.contains { text.hasPrefix($0) } ? text : text.lowercased()
            default: filter.userID = text
            }
            devices = try await self.dashboard.store.devices(appID: app.id, filter)
        } else {
            devices = try await self.dashboard.store.devices(appID: app.id, DeviceQuery(limit: 50))
        }
        let rows = devices.map { device in
            let r = device.registration
            return DevicesModel.Row(
                token: r.token, shortToken: String(r.token.prefix(16)), kind: r.kind.rawValue, platform: DashboardFormat.platform(r.route.transport),
                endpoint: Self.maskedEndpoint(r), environment: DashboardFormat.routeName(r.route),
                user: r.userID ?? "—", tags: r.tags.joined(separator: ", "), active: device.active
            )
        }
        let options = [("user", "User id"), ("prefix", "Token prefix"), ("tag", "Tag")].map {
            DashboardOption(value: $0.0, label: $0.1, selected: by == $0.0)
        }
        let model = DevicesModel(
            id: app.id, appPath: DashboardFormat.path(app.id), options: options, text: text, searched: !text.isEmpty, count: devices.count,
            plural: devices.count != 1, devices: rows, hasDevices: !rows.isEmpty
        )
        return DashboardView(template: .devices, title: "Devices of \(app.id)", model: model, section: .apps)
    }

    func devicePage(app: App, token text: String) async throws -> DashboardView {
        let token = try self.dashboard.backend.deviceIdentifier(text)
        guard let device = try await self.dashboard.store.device(appID: app.id, token: token) else { throw HeraldError.notFound("device") }
        let r = device.registration
        let deliveries = try await self.dashboard.store.deliveries(appID: app.id, token: token, limit: 50).map { d in
            DeviceModel.Delivery(
                notificationPath: DashboardFormat.path(d.notificationID), updated: DashboardFormat.time(d.updatedAt), pushType: d.pushType.rawValue,
                platform: DashboardFormat.platform(d.route.transport), state: d.state.rawValue, status: d.status.map(String.init) ?? "",
                reason: d.reason ?? "",
                why: d.reason.map(DashboardFormat.explain),
                attempts: d.attempts
            )
        }
        let invalidations = try await self.dashboard.store.invalidations(appID: app.id, deviceID: device.id).map { i in
            DeviceModel.Invalidation(at: DashboardFormat.time(i.at), reason: i.reason, applied: i.applied, why: DashboardFormat.explain(i.reason))
        }
        // A browser's subscription: its transport and its endpoint, masked (never whole, nor its keys).
        let endpoint = Self.maskedEndpoint(r)
        let web: [(String, String?)] = endpoint.map { [("Transport", r.route.transport.rawValue), ("Endpoint (masked)", $0)] } ?? []
        let details: [(String, String?)] =
            [("App", app.id), ("Kind", r.kind.rawValue), ("Platform", DashboardFormat.platform(r.route.transport))] + web + [
                ("Environment", DashboardFormat.routeName(r.route)),
                ("User", r.userID), ("Tags", r.tags.isEmpty ? nil : r.tags.joined(separator: ", ")), ("OS (as registered)", r.platform),
                ("App version", r.appVersion),
                ("Locale", r.locale), ("Time zone", r.timeZone), ("Registered first", DashboardFormat.time(device.createdAt)),
                ("Last registration", DashboardFormat.time(device.lastRegisteredAt)),
            ]
        let model = DeviceModel(
            token: r.token, appPath: DashboardFormat.path(app.id),
            details: details.map { DeviceModel.Pair(label: $0.0, value: $0.1 ?? "—") },
            active: device.active, invalidatedAt: DashboardFormat.time(device.invalidatedAt ?? 0),
            invalidationReason: device.invalidationReason ?? "",
            invalidations: invalidations, hasInvalidations: !invalidations.isEmpty, deliveries: deliveries, hasDeliveries: !deliveries.isEmpty
        )
        return DashboardView(template: .device, title: "Device \(r.token.prefix(8))… of \(app.id)", model: model, section: .apps)
    }

    /// A browser's subscription endpoint as the API shows it (`endpoint`): masked; nil for a
    /// device of another platform. Its keys are never read out.
    static func maskedEndpoint(_ r: DeviceRegistration) -> String? {
        guard let key = r.publicKey, let type = r.publicKeyType else { return nil }
        return WebSubscription(DevicePublicKey(type: type, key: key))?.maskedEndpoint
    }
}

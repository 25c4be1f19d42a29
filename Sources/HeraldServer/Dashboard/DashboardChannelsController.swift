// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import Hummingbird

/// An app's Live Activity broadcast channels: each with its environment, storage policy, when it
/// was made and whether APNs still holds it; a form that makes one, and a delete that asks first
/// (as `/v1/apps/{app}/channels` does them, at APNs or the built-in emulator). Broadcasting is the
/// send page's, with the channel as its audience.
struct DashboardChannelsController: Sendable {
    let dashboard: Dashboard

    struct Model: Sendable {
        struct Row: Sendable {
            var id: String
            /// The id in a path or a link: base64url.
            var pathID: String
            var environment: String
            var policy: String
            var created: String
            var state: String
        }
        /// A refusal: what happened in words, and the API's code.
        struct Failure: Sendable {
            var message: String
            var code: String
            /// What to do about it, where there is more to say than the message.
            var fix: String?
        }
        /// The delete being confirmed.
        struct Confirm: Sendable {
            var id: String
            var environment: String
        }
        var id: String
        var appPath: String
        var channels: [Row]
        var hasChannels: Bool
        var error: Failure?
        var notice: String?
        var confirm: Confirm?
        /// Why the states could not be read from APNs, when they could not.
        var stateNote: String?
        var environments: [DashboardOption]
        var policies: [DashboardOption]
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/channels") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.channelsPage(app: try await self.dashboard.app(context.parameters.get("app")))
            }
        }
        group.post("apps/:app/channels") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            do {
                let channel = try await self.dashboard.backend.createChannel(
                    app, environment: form["environment"] ?? "", policy: form["messageStoragePolicy"] ?? "0")
                let view = try await self.channelsPage(app: app, notice: "Channel \(channel.channelID) made.")
                return self.dashboard.views.response(view, session: session, status: .created)
            } catch let error as HeraldError {
                let view = try await self.channelsPage(app: app, form: form, error: error)
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
        group.post("apps/:app/channels/delete") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            let id = form["channel"] ?? ""
            guard form["confirm"] == "yes" else {
                // First press: the page again, asking.
                let channel = try await self.dashboard.backend.channel(app, id: id)
                let confirm = Model.Confirm(id: channel.channelID, environment: DashboardFormat.environmentName(channel.environment))
                return self.dashboard.views.response(try await self.channelsPage(app: app, confirm: confirm), session: session)
            }
            do {
                try await self.dashboard.backend.deleteChannel(app, id: id)
            } catch let error as HeraldError {
                let view = try await self.channelsPage(app: app, error: error)
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
            return DashboardViews.redirect("/dashboard/apps/\(DashboardFormat.path(app.id))/channels")
        }
    }

    func channelsPage(
        app: App, form: [String: String] = [:], error: HeraldError? = nil, notice: String? = nil, confirm: Model.Confirm? = nil
    ) async throws -> DashboardView {
        let channels = try await self.dashboard.backend.channels(app)
        // Whether APNs still holds each: Apple's list, per environment that has channels here.
        var held: [APNSEnvironment: Set<String>] = [:]
        var stateNote: String?
        for environment in Set(channels.map(\.environment)).sorted(by: { $0.rawValue < $1.rawValue }) {
            do {
                held[environment] = try await self.dashboard.backend.channelsAtAPNs(app, environment: environment)
            } catch let error as HeraldError {
                let name = DashboardFormat.environmentName(environment)
                stateNote = "APNs (\(name)) did not list its channels: \(DashboardFormat.sentence(error.message))"
            }
        }
        let rows = channels.map { channel in
            let state: String
            switch held[channel.environment]?.contains(channel.channelID) {
            case true?: state = "active"
            case false?: state = "gone at APNs"
            case nil: state = "unknown"
            }
            return Model.Row(
                id: channel.channelID, pathID: Self.pathID(channel.channelID), environment: DashboardFormat.environmentName(channel.environment),
                policy: channel.messageStoragePolicy == 1 ? "most recent kept (8 h)" : "none kept", created: DashboardFormat.time(channel.createdAt),
                state: state)
        }
        func options(_ field: String, _ fallback: String, _ choices: [(String, String)]) -> [DashboardOption] {
            choices.map { DashboardOption(value: $0.0, label: $0.1, selected: (form[field] ?? fallback) == $0.0) }
        }
        let model = Model(
            id: app.id, appPath: DashboardFormat.path(app.id), channels: rows, hasChannels: !rows.isEmpty,
            error: error.map { Model.Failure(message: DashboardFormat.sentence($0.message), code: $0.code, fix: Self.fixes[$0.code]) },
            notice: notice, confirm: confirm,
            stateNote: stateNote,
            environments: options("environment", "sandbox", [("sandbox", "sandbox"), ("production", "production")]),
            policies: options(
                "messageStoragePolicy", "0",
                [("0", "0: keep nothing for offline devices (the higher budget)"), ("1", "1: keep the most recent message for 8 hours")])
        )
        return DashboardView(template: .channels, title: "Channels · \(app.id)", model: model, section: .apps)
    }

    /// What to do about a refusal, by its code.
    static let fixes = [
        "broadcast_not_enabled": "Enable the Broadcast capability for the app's bundle id on developer.apple.com, then try again.",
        "channel_limit_reached": "Delete channels no activity uses any more (each environment has its own 10,000).",
        "apns_unavailable": "It may or may not have been done at APNs: reload the page (the state column asks APNs) before trying again.",
    ]

    /// A channel id (base64) as a path segment: base64url, as the API's paths take it.
    static func pathID(_ id: String) -> String {
        id.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }
}

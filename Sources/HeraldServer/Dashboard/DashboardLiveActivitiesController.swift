// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// An app's Live Activities: the list with each one's state (active, or ended and why), a form
/// that starts one by push-to-start, and an activity's page with an update form and an end that
/// asks first. Each goes through what `/v1/apps/{app}/live-activities` does
/// (``DashboardBackend/startLiveActivity(_:body:)`` and the others), so a refusal is the API's,
/// shown in words with its code, the form keeping what was typed.
struct DashboardLiveActivitiesController: Sendable {
    let dashboard: Dashboard

    /// A refusal: what happened in words, and the API's code.
    struct Failure: Sendable {
        var message: String
        var code: String
        var fix: String?

        init(_ error: HeraldError) {
            self.message = DashboardFormat.sentence(error.message)
            self.code = error.code
            self.fix = DashboardLiveActivitiesController.fixes[error.code]
        }
    }

    /// One activity as a row of the list and the head of its page.
    struct Row: Sendable {
        var id: String
        var active: Bool
        var state: String
        var attributesType: String
        /// "channel …" or "update tokens (n)".
        var input: String
        var channel: String?
        var tokens: Int
        var environment: String?
        var updates: Int
        var started: String
        var updated: String
        var ended: String?
        var startNotification: String
        var lastNotification: String?

        init(_ activity: LiveActivityResponse) {
            let active = activity.state == "active"
            self.id = activity.id
            self.active = active
            self.state = active ? "active" : "ended: " + DashboardLiveActivitiesController.reason(activity.endReason)
            self.attributesType = activity.attributesType
            self.channel = activity.channel
            self.tokens = activity.tokens
            self.input = activity.channel.map { "channel \($0)" } ?? (active ? "update tokens (\(activity.tokens))" : "update tokens")
            self.environment = activity.environment.map { DashboardFormat.environmentName($0) }
            self.updates = activity.updates
            self.started = DashboardFormat.time(activity.startedAt)
            self.updated = DashboardFormat.time(activity.updatedAt)
            self.ended = activity.endedAt.map { DashboardFormat.time($0) }
            self.startNotification = activity.startNotificationId
            self.lastNotification = activity.lastNotificationId
        }
    }

    struct ListModel: Sendable {
        struct Filter: Sendable {
            var label: String
            var href: String
            var current: Bool
        }
        struct Start: Sendable {
            var target: String
            var attributesType: String
            var attributes: String
            var contentState: String
            var title: String
            var body: String
        }
        var id: String
        var appPath: String
        var activities: [Row]
        var hasActivities: Bool
        var filters: [Filter]
        var filterName: String
        var error: Failure?
        var audiences: [DashboardOption]
        var inputs: [DashboardOption]
        var hasChannels: Bool
        var start: Start
    }

    struct ActivityModel: Sendable {
        struct Update: Sendable {
            var contentState: String
            var staleDate: String
            var relevanceScore: String
            var title: String
            var body: String
        }
        var appID: String
        var appPath: String
        var activity: Row
        var error: Failure?
        var notice: String?
        /// The end being confirmed: its dismissal date as typed (UTC), empty for the system's default.
        var confirmEnd: ConfirmEnd?
        var update: Update
        var priorities: [DashboardOption]
        var dismissalDate: String
    }

    struct ConfirmEnd: Sendable {
        var dismissalDate: String
        var when: String
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/live-activities") { request, context in
            try await self.dashboard.page(request) { _ in
                let app = try await self.dashboard.app(context.parameters.get("app"))
                return try await self.listPage(app: app, filter: request.uri.queryParameters["state"].map(String.init))
            }
        }
        group.post("apps/:app/live-activities") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            do {
                let started = try await self.dashboard.backend.startLiveActivity(app, body: try Self.startBody(form))
                return DashboardViews.redirect("/dashboard/apps/\(DashboardFormat.path(app.id))/live-activities/\(DashboardFormat.path(started.id))")
            } catch let error as HeraldError {
                let view = try await self.listPage(app: app, form: form, error: error)
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
        group.get("apps/:app/live-activities/:id") { request, context in
            try await self.dashboard.page(request) { _ in
                let app = try await self.dashboard.app(context.parameters.get("app"))
                return try await self.activityPage(app: app, id: context.parameters.get("id") ?? "")
            }
        }
        group.post("apps/:app/live-activities/:id/update") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            let id = context.parameters.get("id") ?? ""
            do {
                let updated = try await self.dashboard.backend.updateLiveActivity(app, id: id, body: try Self.updateBody(form))
                let sent =
                    updated.channel == nil ? "to \(updated.tokens) update token\(updated.tokens == 1 ? "" : "s")" : "as one broadcast on its channel"
                let view = try await self.activityPage(app: app, id: id, notice: "Update \(updated.updates) sent \(sent).")
                return self.dashboard.views.response(view, session: session)
            } catch let error as HeraldError where !DashboardBackend.isNotFound(error) {
                let view = try await self.activityPage(app: app, id: id, form: form, error: error)
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
        group.post("apps/:app/live-activities/:id/end") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            let id = context.parameters.get("id") ?? ""
            let typed = DashboardForm.field(form, "dismissalDate") ?? ""
            do {
                var dismissal: Int64?
                if !typed.isEmpty {
                    guard let seconds = DashboardSendController.utcSeconds(typed) else {
                        throw HeraldError.invalid(
                            "the dismissal date must be a date and time (UTC), like 2026-11-24T21:30", code: "bad_dismissalDate")
                    }
                    dismissal = seconds
                }
                guard form["confirm"] == "yes" else {
                    // First press: the page again, asking.
                    let when =
                        dismissal.map { "removed from the Lock Screen at \(DashboardFormat.time($0 * 1000)) UTC" }
                        ?? "left on the Lock Screen until the system removes it (up to 4 hours)"
                    let view = try await self.activityPage(app: app, id: id, confirm: ConfirmEnd(dismissalDate: typed, when: when))
                    return self.dashboard.views.response(view, session: session)
                }
                let ended = try await self.dashboard.backend.endLiveActivity(app, id: id, dismissalDate: dismissal)
                let view = try await self.activityPage(
                    app: app, id: id, notice: "Ended: the end event was sent (\(ended.updates) update\(ended.updates == 1 ? "" : "s") before it).")
                return self.dashboard.views.response(view, session: session)
            } catch let error as HeraldError where !DashboardBackend.isNotFound(error) {
                let view = try await self.activityPage(app: app, id: id, form: form, error: error)
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
    }

    // MARK: pages

    func listPage(app: App, filter requested: String? = nil, form: [String: String] = [:], error: HeraldError? = nil) async throws -> DashboardView {
        let filter: String = requested == "active" || requested == "ended" ? requested ?? "all" : "all"
        var activities = try await self.dashboard.backend.liveActivities(app, activeOnly: filter == "active")
        if filter == "ended" { activities = activities.filter { $0.state != "active" } }
        let channels = try await self.dashboard.backend.channels(app)
        let base = "/dashboard/apps/\(DashboardFormat.path(app.id))/live-activities"
        let filters = [("all", "All", base), ("active", "Active", base + "?state=active"), ("ended", "Ended", base + "?state=ended")].map {
            ListModel.Filter(label: $0.1, href: $0.2, current: $0.0 == filter)
        }
        let to = form["to"] ?? "user"
        let input = form["input"] ?? "token"
        let inputs =
            [DashboardOption(value: "token", label: "update tokens (each device mints one)", selected: input == "token")]
            + channels.map { channel in
                DashboardOption(
                    value: channel.channelID, label: "channel \(channel.channelID) (\(DashboardFormat.environmentName(channel.environment)))",
                    selected: input == channel.channelID)
            }
        let model = ListModel(
            id: app.id, appPath: DashboardFormat.path(app.id), activities: activities.map(Row.init), hasActivities: !activities.isEmpty,
            filters: filters, filterName: filter == "all" ? "" : filter, error: error.map(Failure.init),
            audiences: [("user", "Users"), ("tag", "Tags"), ("token", "Push-to-start tokens")].map {
                DashboardOption(value: $0.0, label: $0.1, selected: to == $0.0)
            },
            inputs: inputs, hasChannels: !channels.isEmpty,
            start: ListModel.Start(
                target: form["target"] ?? "", attributesType: form["attributesType"] ?? "", attributes: form["attributes"] ?? "{}",
                contentState: form["contentState"] ?? "{}", title: form["title"] ?? "", body: form["body"] ?? ""))
        return DashboardView(template: .liveActivities, title: "Live Activities · \(app.id)", model: model, section: .apps)
    }

    func activityPage(
        app: App, id: String, form: [String: String] = [:], error: HeraldError? = nil, notice: String? = nil, confirm: ConfirmEnd? = nil
    ) async throws -> DashboardView {
        let (activity, contentState) = try await self.dashboard.backend.liveActivity(app, id: id)
        let priority = form["priority"] ?? "5"
        let model = ActivityModel(
            appID: app.id, appPath: DashboardFormat.path(app.id), activity: Row(activity), error: error.map(Failure.init), notice: notice,
            confirmEnd: confirm,
            update: ActivityModel.Update(
                contentState: form["contentState"] ?? contentState, staleDate: form["staleDate"] ?? "", relevanceScore: form["relevanceScore"] ?? "",
                title: form["title"] ?? "", body: form["body"] ?? ""),
            priorities: [("5", "5: when the system sees fit (no budget used)"), ("10", "10: at once (counts against Apple's hourly budget)")].map {
                DashboardOption(value: $0.0, label: $0.1, selected: priority == $0.0)
            },
            dismissalDate: confirm?.dismissalDate ?? form["dismissalDate"] ?? "")
        return DashboardView(template: .liveActivity, title: "Live Activity · \(app.id)", model: model, section: .apps)
    }

    // MARK: bodies (the API's, from the forms' fields)

    /// `POST …/live-activities`'s body: the audience (users, tags or push-to-start tokens,
    /// separated by commas or spaces), the attributes type, the attributes and content state (JSON
    /// objects as typed), the alert's title and body, and the input: update tokens or a channel.
    static func startBody(_ form: [String: String]) throws -> JSONValue {
        let targets = (form["target"] ?? "").split(whereSeparator: { $0 == "," || $0.isWhitespace }).map { JSONValue.string(String($0)) }
        guard !targets.isEmpty else {
            throw HeraldError.invalid("name the users, tags or push-to-start tokens to start the activity for", code: "missing_audience")
        }
        let key = ["tag": "tags", "token": "tokens"][form["to"] ?? "user"] ?? "users"
        var members: [(String, JSONValue)] = [("audience", .object([(key, .array(targets))]))]
        if let type = DashboardForm.field(form, "attributesType") { members.append(("attributesType", .string(type))) }
        if let attributes = try Self.object(form, "attributes", code: "bad_attributes", what: "the attributes") {
            members.append(("attributes", attributes))
        }
        if let state = try Self.object(form, "contentState", code: "bad_contentState", what: "the content state") {
            members.append(("contentState", state))
        }
        if let alert = Self.alert(form) { members.append(("alert", alert)) }
        let input = DashboardForm.field(form, "input") ?? "token"
        if input == "token" {
            members.append(("inputPushToken", true))
        } else {
            members.append(("inputPushChannel", .string(input)))
        }
        return .object(members)
    }

    /// `PATCH …/live-activities/{id}`'s body: the content state, the stale date (UTC), the
    /// relevance score, the optional alert and the priority.
    static func updateBody(_ form: [String: String]) throws -> JSONValue {
        var members: [(String, JSONValue)] = []
        if let state = try Self.object(form, "contentState", code: "bad_contentState", what: "the content state") {
            members.append(("contentState", state))
        }
        if let text = DashboardForm.field(form, "staleDate") {
            guard let seconds = DashboardSendController.utcSeconds(text) else {
                throw HeraldError.invalid("the stale date must be a date and time (UTC), like 2026-11-24T21:30", code: "bad_staleDate")
            }
            members.append(("staleDate", .int(seconds)))
        }
        if let text = DashboardForm.field(form, "relevanceScore") {
            guard let score = Double(text) else { throw HeraldError.invalid("the relevance score must be a number", code: "bad_relevanceScore") }
            members.append(("relevanceScore", .double(score)))
        }
        if let alert = Self.alert(form) { members.append(("alert", alert)) }
        if let text = DashboardForm.field(form, "priority") {
            guard let priority = Int64(text) else { throw HeraldError.invalid("priority is 5 or 10", code: "bad_priority") }
            members.append(("priority", .int(priority)))
        }
        return .object(members)
    }

    /// A JSON text field as typed; what is not JSON is refused here with the API's code, the rest
    /// (not an object) by the API; nil when empty (the API says what is missing).
    private static func object(_ form: [String: String], _ name: String, code: String, what: String) throws -> JSONValue? {
        guard let text = DashboardForm.field(form, name) else { return nil }
        guard let value = try? JSONValue.parse(Array(text.utf8)) else {
            throw HeraldError.invalid("\(what) must be a JSON object, like {\"score\": 1}: this is not JSON", code: code)
        }
        return value
    }

    private static func alert(_ form: [String: String]) -> JSONValue? {
        var members: [(String, JSONValue)] = []
        for name in ["title", "body"] {
            if let value = DashboardForm.field(form, name) { members.append((name, .string(value))) }
        }
        return members.isEmpty ? nil : .object(members)
    }

    /// Why an activity ended, in words.
    static func reason(_ code: String?) -> String {
        switch code {
        case "expired": "expired (8 hours active)"
        case "user_changed": "its user changed (no token of theirs holds it)"
        default: "ended from Herald"
        }
    }

    /// What to do about a refusal, by its code.
    static let fixes = [
        "no_push_to_start_tokens":
            "The app registers a push-to-start token (kind push-to-start, with this attributes type) for a user once the system gives it one; check the audience and the attributes type.",
        "activity_ended": "Nothing more is sent to an ended activity: start a new one.",
        "unknown_channel": "Choose one of the app's channels (or make one on the channels page).",
    ]
}

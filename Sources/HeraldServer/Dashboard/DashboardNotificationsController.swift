// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import Hummingbird

/// A notification's page: its counts per state and its delivery log.
struct DashboardNotificationsController: Sendable {
    let dashboard: Dashboard

    struct Model: Sendable {
        struct Count: Sendable {
            var state: String
            var count: Int
        }
        struct Delivery: Sendable {
            var token: String
            var shortToken: String
            /// The push service: apns or fcm.
            var platform: String
            var pushType: String
            var state: String
            var status: String
            var reason: String
            var why: String?
            var attempts: Int
            var latency: String
            var apnsID: String
        }
        var id: String
        var appID: String
        var appPath: String
        var state: String
        /// Accepted with nobody to send to: the page says why.
        var emptyAudience: Bool
        var created: String
        var scheduled: String?
        var audience: Int
        var pending: Bool
        var counts: [Count]
        var deliveries: [Delivery]
        var hasDeliveries: Bool
        var audienceText: String
        var shown: Shown
        var headerLines: String
        var payload: String
        var encrypted: Bool
        /// One broadcast on a channel: APNs knows its subscribers, Herald does not.
        var broadcast: Bool
        /// Sent → received → opened (receipts), each with its share of sent.
        var funnel: [Step] = []
        struct Step: Sendable {
            var step: String
            var count: Int
            var share: String
        }
    }

    /// What a notification shows, from its payload.
    struct Shown: Sendable {
        var title: String
        var subtitle: String
        var body: String
    }

    struct ListModel: Sendable {
        struct Row: Sendable {
            var path: String
            var shortID: String
            var created: String
            var title: String
            var audienceText: String
            var audience: Int
            var state: String
            var sent: Int
            var failed: Int
            var pending: Int
        }
        var appID: String
        var appPath: String
        var states: [DashboardOption]
        var from: String
        var to: String
        var rows: [Row]
        var hasRows: Bool
        var filtered: Bool
        var more: Bool
    }

    static let stateChoices = ["sent", "sending", "partly failed", "failed", "no audience", "scheduled", "cancelled"]

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/notifications") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.listPage(app: try await self.dashboard.app(context.parameters.get("app")), query: request.uri.queryParameters)
            }
        }
        group.get("apps/:app/notifications/:id") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.notificationPage(
                    app: try await self.dashboard.app(context.parameters.get("app")), id: context.parameters.get("id") ?? "")
            }
        }
    }

    /// To whom, in words, from the stored targeting.
    static func audienceText(_ json: String?) -> String {
        guard let json, let value = try? JSONValue.parse(json) else { return "—" }
        func list(_ key: String) -> [String] { value[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        func plural(_ count: Int64, _ word: String) -> String { "\(count) \(word)\(count == 1 ? "" : "s")" }
        var text: String
        if value["all"]?.boolValue == true {
            text = "everyone"
        } else if let count = value["tokenCount"]?.intValue {
            text = plural(count, "token")
        } else if !list("tokens").isEmpty {
            let tokens = list("tokens")
            text = tokens.count == 1 ? "token \(tokens[0].prefix(12))…" : plural(Int64(tokens.count), "token")
        } else if let count = value["userCount"]?.intValue {
            text = plural(count, "user")
        } else if !list("users").isEmpty {
            let users = list("users")
            text = (users.count == 1 ? "user " : "users ") + users.prefix(5).joined(separator: ", ") + (users.count > 5 ? "…" : "")
        } else if !list("tags").isEmpty {
            let tags = list("tags")
            text = (tags.count == 1 ? "tag " : "tags ") + tags.joined(separator: ", ")
            if tags.count > 1 { text += value["matchAll"]?.boolValue == true ? " (all of them)" : " (any of them)" }
        } else if let activity = value["activity"]?.stringValue {
            text = "Live Activity \(activity)"
        } else if let channel = value["channel"]?.stringValue {
            text = "channel \(channel) (one broadcast)"
        } else {
            text = "—"
        }
        if let environment = value["environment"]?.stringValue { text += ", \(DashboardFormat.environmentName(environment)) only" }
        let transports = value["transports"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let named = transports.compactMap(Transport.init(rawValue:))
        if !named.isEmpty, named.count < Transport.allCases.count {
            text += ", \(named.map(DashboardOverviewController.label).joined(separator: " and ")) devices only"
        }
        return text
    }

    /// Title, subtitle and body from a payload (an alert string is the title).
    static func shown(_ content: NotificationContent?) -> Shown {
        guard let content else { return Shown(title: "", subtitle: "", body: "") }
        if content.encrypted { return Shown(title: "(end-to-end encrypted)", subtitle: "", body: "") }
        guard let bytes = content.payload, let payload = try? JSONValue.parse(bytes) else { return Shown(title: "", subtitle: "", body: "") }
        let alert = payload["aps"]?["alert"]
        if let text = alert?.stringValue { return Shown(title: text, subtitle: "", body: "") }
        let title = alert?["title"]?.stringValue ?? (payload["aps"]?["content-available"] != nil ? "(background update)" : "")
        return Shown(title: title, subtitle: alert?["subtitle"]?.stringValue ?? "", body: alert?["body"]?.stringValue ?? "")
    }

    /// The notifications of an app, newest first, filtered by state and creation date (UTC days).
    func listPage(app: App, query: Parameters) async throws -> DashboardView {
        // A form's GET query writes a space as "+".
        func field(_ name: String) -> String {
            query[Substring(name)].map { String($0).replacingOccurrences(of: "+", with: " ") }.map { $0.removingPercentEncoding ?? $0 } ?? ""
        }
        let state = field("state")
        let from = field("from")
        let to = field("to")
        func day(_ text: String) -> Int64? {
            guard !text.isEmpty, let date = try? Date(text + "T00:00:00Z", strategy: .iso8601) else { return nil }
            return Int64(date.timeIntervalSince1970 * 1000)
        }
        let start = day(from)
        // Before the end of the `to` day.
        let end = day(to).map { $0 + 86_400_000 }
        let now = self.dashboard.backend.nowMilliseconds
        var rows: [ListModel.Row] = []
        var position: NotificationPosition?
        var scanned = 0
        var more = false
        scan: while scanned < 2000 {
            let page = try await self.dashboard.store.notifications(appID: app.id, limit: 100, before: end, after: position)
            if page.isEmpty { break }
            scanned += page.count
            for summary in page {
                if let start, summary.createdAt < start { break scan }
                let counts = try await self.dashboard.store.notification(appID: app.id, id: summary.id, deliveryLimit: 0)?.counts ?? [:]
                let rowState = Self.state(summary, counts: counts, now: now)
                guard state.isEmpty || state == rowState else { continue }
                if rows.count == 50 {
                    more = true
                    break scan
                }
                let shown = Self.shown(summary.content)
                rows.append(
                    ListModel.Row(
                        path: DashboardFormat.path(summary.id), shortID: String(summary.id.prefix(8)),
                        created: DashboardFormat.time(summary.createdAt),
                        title: shown.title.isEmpty ? shown.body : shown.title, audienceText: Self.audienceText(summary.content?.targetingJSON),
                        audience: summary.audienceSize, state: rowState, sent: counts[.sent] ?? 0, failed: counts[.failed] ?? 0,
                        pending: counts[.pending] ?? 0
                    ))
            }
            position = page.last.map { NotificationPosition(createdAt: $0.createdAt, id: $0.id) }
        }
        let states =
            [DashboardOption(value: "", label: "any state", selected: state.isEmpty)]
            + Self.stateChoices.map { DashboardOption(value: $0, label: $0, selected: $0 == state) }
        let model = ListModel(
            appID: app.id, appPath: DashboardFormat.path(app.id), states: states, from: from, to: to, rows: rows, hasRows: !rows.isEmpty,
            filtered: !state.isEmpty || start != nil || end != nil, more: more
        )
        return DashboardView(template: .notifications, title: "Notifications of \(app.id)", model: model, section: .apps)
    }

    /// A notification's state in a word: cancelled, scheduled, sending, no audience, sent, failed
    /// or partly failed.
    static func state(_ summary: NotificationSummary, counts: [DeliveryState: Int], now: Int64) -> String {
        let pending = counts[.pending] ?? 0
        let failed = counts[.failed] ?? 0
        let done = counts.values.reduce(0, +)
        if summary.cancelledAt != nil { return "cancelled" }
        if summary.audienceSize == 0 && !summary.expanding && done == 0 { return "no audience" }
        if summary.scheduledAt > now && done == pending { return "scheduled" }
        if pending > 0 || summary.expanding { return "sending" }
        if failed == 0 { return "sent" }
        return failed == done ? "failed" : "partly failed"
    }

    /// The APNs headers every delivery of it carries (the push type and topic follow each
    /// device's kind when the sender left them open).
    static func headerLines(_ content: NotificationContent?, bundleID: String) -> String {
        guard let content else { return "" }
        var lines: [String] = []
        if let pushType = content.pushType {
            lines.append("apns-push-type: \(pushType.rawValue)")
            lines.append("apns-topic: \(pushType.topic(forBundleID: bundleID))")
        } else {
            lines.append("apns-push-type: (each device's kind: alert for an app, voip for a VoIP token, …)")
            lines.append("apns-topic: \(bundleID) (with the kind's suffix)")
        }
        if let priority = content.priority { lines.append("apns-priority: \(priority)") }
        if let expiration = content.expiration { lines.append("apns-expiration: \(expiration)") }
        if let collapse = content.collapseID { lines.append("apns-collapse-id: \(collapse)") }
        return lines.joined(separator: "\n")
    }

    func notificationPage(app: App, id: String) async throws -> DashboardView {
        guard let status = try await self.dashboard.store.notification(appID: app.id, id: id, deliveryLimit: 1000) else {
            throw HeraldError.notFound("notification")
        }
        let deliveries = status.deliveries.map { d in
            Model.Delivery(
                token: d.token, shortToken: String(d.token.prefix(16)), platform: DashboardFormat.platform(d.route.transport),
                pushType: d.pushType.rawValue,
                state: d.state.rawValue,
                status: d.status.map(String.init) ?? "", reason: d.reason ?? "", why: d.reason.map(DashboardFormat.explain), attempts: d.attempts,
                latency: d.latencyMilliseconds.map { "\($0) ms" } ?? "", apnsID: d.apnsID ?? ""
            )
        }
        let summary = status.summary
        let model = Model(
            id: summary.id, appID: app.id, appPath: DashboardFormat.path(app.id),
            state: Self.state(summary, counts: status.counts, now: self.dashboard.backend.nowMilliseconds),
            emptyAudience: summary.audienceSize == 0 && !summary.expanding && status.deliveries.isEmpty,
            created: DashboardFormat.time(summary.createdAt),
            scheduled: summary.scheduledAt > summary.createdAt ? DashboardFormat.time(summary.scheduledAt) : nil, audience: summary.audienceSize,
            pending: (status.counts[.pending] ?? 0) > 0 || summary.expanding,
            counts: DeliveryState.allCases.map { Model.Count(state: $0.rawValue, count: status.counts[$0] ?? 0) },
            deliveries: deliveries, hasDeliveries: !deliveries.isEmpty,
            audienceText: Self.audienceText(summary.content?.targetingJSON), shown: Self.shown(summary.content),
            headerLines: Self.headerLines(summary.content, bundleID: app.bundleID),
            payload: summary.content?.payload.flatMap { try? JSONValue.parse($0) }.map { DashboardFormat.pretty($0) } ?? "",
            encrypted: summary.content?.encrypted ?? false,
            broadcast: summary.content?.targetingJSON.flatMap { try? JSONValue.parse($0) }?["channel"] != nil
        )
        var withFunnel = model
        let receipts = try await self.dashboard.store.receiptCounts(appID: app.id, notificationID: summary.id)
        let sent = status.counts[.sent] ?? 0
        withFunnel.funnel = [("sent", sent), ("received", receipts?.received ?? 0), ("opened", receipts?.opened ?? 0)].map { step, count in
            Model.Step(step: step, count: count, share: sent == 0 ? "" : "\(count * 100 / sent)% of sent")
        }
        return DashboardView(template: .notification, title: "Notification \(summary.id.prefix(8)) of \(app.id)", model: withFunnel, section: .apps)
    }
}

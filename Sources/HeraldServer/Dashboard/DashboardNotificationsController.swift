// SPDX-License-Identifier: Apache-2.0
import APNSModels
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
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/notifications/:id") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.notificationPage(
                    app: try await self.dashboard.app(context.parameters.get("app")), id: context.parameters.get("id") ?? "")
            }
        }
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

    func notificationPage(app: App, id: String) async throws -> DashboardView {
        guard let status = try await self.dashboard.store.notification(appID: app.id, id: id, deliveryLimit: 1000) else {
            throw HeraldError.notFound("notification")
        }
        let deliveries = status.deliveries.map { d in
            Model.Delivery(
                token: d.token, shortToken: String(d.token.prefix(16)), pushType: d.pushType.rawValue, state: d.state.rawValue,
                status: d.status.map(String.init) ?? "", reason: d.reason ?? "", why: d.reason.map(DashboardFormat.explain), attempts: d.attempts,
                latency: d.latencyMilliseconds.map { "\($0) ms" } ?? "", apnsID: d.apnsID ?? ""
            )
        }
        let summary = status.summary
        let model = Model(
            id: summary.id, appID: app.id, appPath: DashboardFormat.path(app.id),
            state: Self.state(summary, counts: status.counts, now: self.dashboard.backend.nowMilliseconds),
            emptyAudience: summary.audienceSize == 0 && !summary.expanding && status.deliveries.isEmpty, created: DashboardFormat.time(summary.createdAt),
            scheduled: summary.scheduledAt > summary.createdAt ? DashboardFormat.time(summary.scheduledAt) : nil, audience: summary.audienceSize,
            pending: (status.counts[.pending] ?? 0) > 0 || summary.expanding,
            counts: DeliveryState.allCases.map { Model.Count(state: $0.rawValue, count: status.counts[$0] ?? 0) },
            deliveries: deliveries, hasDeliveries: !deliveries.isEmpty
        )
        return DashboardView(template: .notification, title: "Notification \(summary.id.prefix(8)) of \(app.id)", model: model, section: .apps)
    }
}

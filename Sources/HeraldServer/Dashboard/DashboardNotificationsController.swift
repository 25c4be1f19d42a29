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
        var appPath: String
        var created: String
        var scheduled: String?
        var audience: Int
        var pending: Bool
        var counts: [Count]
        var deliveries: [Delivery]
        var hasDeliveries: Bool
        /// Sent → received → opened (receipts), each with its share of sent.
        var funnel: [Step] = []
        struct Step: Sendable {
            var step: String
            var count: Int
            var share: String
        }
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/notifications/:id") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.notificationPage(
                    app: try await self.dashboard.app(context.parameters.get("app")), id: context.parameters.get("id") ?? "")
            }
        }
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
            id: summary.id, appPath: DashboardFormat.path(app.id), created: DashboardFormat.time(summary.createdAt),
            scheduled: summary.scheduledAt > summary.createdAt ? DashboardFormat.time(summary.scheduledAt) : nil, audience: summary.audienceSize,
            pending: (status.counts[.pending] ?? 0) > 0 || summary.expanding,
            counts: DeliveryState.allCases.map { Model.Count(state: $0.rawValue, count: status.counts[$0] ?? 0) },
            deliveries: deliveries, hasDeliveries: !deliveries.isEmpty
        )
        var withFunnel = model
        let receipts = try await self.dashboard.store.receiptCounts(appID: app.id, notificationID: summary.id)
        let sent = status.counts[.sent] ?? 0
        withFunnel.funnel = [("sent", sent), ("received", receipts?.received ?? 0), ("opened", receipts?.opened ?? 0)].map { step, count in
            Model.Step(step: step, count: count, share: sent == 0 ? "" : "\(count * 100 / sent)%")
        }
        return DashboardView(template: .notification, title: nil, model: withFunnel)
    }
}

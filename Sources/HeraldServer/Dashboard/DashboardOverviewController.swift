// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Hummingbird

/// The overview: last hour's counts and chart, top failure reasons, APNs connections, apps.
struct DashboardOverviewController: Sendable {
    let dashboard: Dashboard

    struct Model: Sendable {
        struct Reason: Sendable {
            var reason: String
            var count: Int
            var explanation: String
        }
        struct Connection: Sendable {
            var appID: String
            var environment: String
            var open: Int
        }
        struct AppLink: Sendable {
            var id: String
            var path: String
            var bundleID: String
            /// Its active devices per platform, in words ("3 APNs, 1 FCM, 2 Web Push").
            var devices: String
        }
        /// Active devices of one platform, over every app.
        struct Platform: Sendable {
            var transport: String
            var label: String
            var devices: Int
        }
        var sent: Int
        var failed: Int
        var retried: Int
        var pending: Int
        var openConnections: Int
        var chart: Chart
        var reasons: [Reason]
        var hasReasons: Bool
        var connections: [Connection]
        var hasConnections: Bool
        var apps: [AppLink]
        var hasApps: Bool
        var platforms: [Platform]
    }

    static func label(_ transport: Transport) -> String {
        switch transport {
        case .apns: "APNs (Apple)"
        case .fcm: "FCM (Android)"
        case .webpush: "Web Push (browsers)"
        }
    }

    /// Stacked bars (sent, retried, failed) per minute, with a table for screen readers.
    struct Chart: Sendable {
        struct Bar: Sendable {
            var kind: String
            var x: String
            var y: String
            var barWidth: String
            var barHeight: String
            var count: Int
            var clock: String
        }
        struct Row: Sendable {
            var clock: String
            var sent: Int
            var retried: Int
            var failed: Int
        }
        var width: Int
        var height: Int
        var sent: Int
        var retried: Int
        var failed: Int
        var highest: Int
        var bars: [Bar]
        var rows: [Row]
        var hasRows: Bool
        /// Where the axes are drawn (the plot's edges).
        struct Axis: Sendable {
            var left: String
            var top: String
            var bottom: String
            var right: String
        }
        /// A label on an axis: where, and what.
        struct Tick: Sendable {
            var x: String
            var y: String
            var label: String
            var anchor = "end"
        }
        var axis: Axis
        var yTicks: [Tick]
        var xTicks: [Tick]
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("") { request, _ in try await self.dashboard.page(request) { _ in try await self.overview() } }
    }

    func overview() async throws -> DashboardView {
        let minutes = self.dashboard.backend.events.lastHour()
        let pending = (try? await self.dashboard.store.pendingDeliveries()) ?? 0
        let connections = await self.dashboard.clients.connections()
        var reasons: [String: Int] = [:]
        for minute in minutes { reasons.merge(minute.reasons, uniquingKeysWith: +) }
        let totals = minutes.reduce(into: (sent: 0, failed: 0, retried: 0)) {
            $0.sent += $1.sent
            $0.failed += $1.failed
            $0.retried += $1.retried
        }
        let top = reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(10)
        let apps = try await self.dashboard.store.apps()
        // Active devices per platform: a count per app and transport (apps being deleted left out).
        var platformTotals: [Transport: Int] = [:]
        var links: [Model.AppLink] = []
        for app in apps {
            var counts: [Transport: Int] = [:]
            if app.deletion == nil {
                for transport in Transport.allCases { counts[transport] = try await self.dashboard.backend.activeDevices(app, transport: transport) }
                platformTotals.merge(counts, uniquingKeysWith: +)
            }
            let devices = Transport.allCases.map { "\(counts[$0] ?? 0) \(DashboardBackend.serviceName($0))" }.joined(separator: ", ")
            links.append(
                Model.AppLink(
                    id: app.id, path: DashboardFormat.path(app.id), bundleID: app.bundleID,
                    devices: app.deletion == nil ? devices + " active devices" : "being deleted"))
        }
        let model = Model(
            sent: totals.sent, failed: totals.failed, retried: totals.retried, pending: pending,
            openConnections: connections.reduce(0) { $0 + $1.open }, chart: Self.chart(minutes),
            reasons: top.map { Model.Reason(reason: $0.key, count: $0.value, explanation: DashboardFormat.explain($0.key)) },
            hasReasons: !top.isEmpty,
            connections: connections.map {
                Model.Connection(appID: $0.appID, environment: DashboardFormat.environmentName($0.environment), open: $0.open)
            },
            hasConnections: !connections.isEmpty,
            apps: links, hasApps: !apps.isEmpty,
            platforms: Transport.allCases.map { Model.Platform(transport: $0.rawValue, label: Self.label($0), devices: platformTotals[$0] ?? 0) }
        )
        return DashboardView(template: .overview, title: "Overview", model: model, section: .overview)
    }

    static func chart(_ minutes: [DeliveryEvents.Minute]) -> Chart {
        // The plot sits right of the y axis's labels and above the x axis's.
        let width = 600.0
        let height = 190.0
        let left = 44.0
        let top = 8.0
        let plotWidth = width - left - 4
        let plotHeight = 150.0
        let bottom = top + plotHeight
        let highest = minutes.map { $0.sent + $0.failed + $0.retried }.max() ?? 0
        let peak = max(1, highest)
        let slot = plotWidth / Double(max(1, minutes.count))
        var bars: [Chart.Bar] = []
        for (index, minute) in minutes.enumerated() {
            var y = bottom
            let x = left + Double(index) * slot
            for (count, kind) in [(minute.sent, "sent"), (minute.retried, "retried"), (minute.failed, "failed")] where count > 0 {
                let h = max(1, plotHeight * Double(count) / Double(peak))
                y -= h
                bars.append(
                    Chart.Bar(
                        kind: kind, x: DashboardFormat.number(x + 1), y: DashboardFormat.number(y),
                        barWidth: DashboardFormat.number(max(1, slot - 2)),
                        barHeight: DashboardFormat.number(h), count: count, clock: DashboardFormat.clock(minute.minute * 60_000)
                    ))
            }
        }
        // The y axis: 0, half the peak and the peak (per minute); the x axis: the hour's first
        // minute, its middle and its last (UTC).
        var yTicks: [Chart.Tick] = []
        for fraction in [0.0, 0.5, 1.0] {
            let value = Double(peak) * fraction
            let label = fraction == 0.5 && peak % 2 == 1 ? DashboardFormat.number(value) : "\(Int(value))"
            yTicks.append(
                Chart.Tick(x: DashboardFormat.number(left - 6), y: DashboardFormat.number(bottom - plotHeight * fraction + 4), label: label))
        }
        var xTicks: [Chart.Tick] = []
        if let first = minutes.first, let last = minutes.last {
            let middle = minutes[minutes.count / 2]
            for (index, minute, anchor) in [(0, first, "start"), (minutes.count / 2, middle, "middle"), (minutes.count - 1, last, "end")] {
                let x = anchor == "end" ? width - 4 : anchor == "start" ? left : left + Double(index) * slot + slot / 2
                xTicks.append(
                    Chart.Tick(
                        x: DashboardFormat.number(x), y: DashboardFormat.number(bottom + 18), label: DashboardFormat.clock(minute.minute * 60_000),
                        anchor: anchor))
            }
        }
        let totals = minutes.reduce(into: (0, 0, 0)) {
            $0.0 += $1.sent
            $0.1 += $1.retried
            $0.2 += $1.failed
        }
        let rows = minutes.filter { $0.sent + $0.failed + $0.retried > 0 }.map {
            Chart.Row(clock: DashboardFormat.clock($0.minute * 60_000), sent: $0.sent, retried: $0.retried, failed: $0.failed)
        }
        return Chart(
            width: Int(width), height: Int(height), sent: totals.0, retried: totals.1, failed: totals.2, highest: highest, bars: bars, rows: rows,
            hasRows: !rows.isEmpty,
            axis: Chart.Axis(
                left: DashboardFormat.number(left), top: DashboardFormat.number(top), bottom: DashboardFormat.number(bottom),
                right: DashboardFormat.number(width - 4)),
            yTicks: yTicks, xTicks: xTicks
        )
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import Hummingbird

/// An app's templates, read-only: each variant's texts as written, by locale, and the variables
/// a send must give. (Making and editing them is the API's, `/v1/apps/{app}/templates`, for now.)
struct DashboardTemplatesController: Sendable {
    let dashboard: Dashboard

    struct TemplatesModel: Sendable {
        struct Variant: Sendable {
            /// "default" or the locale.
            var locale: String
            var title: String
            var subtitle: String
            var body: String
            var payload: String
        }
        struct Row: Sendable {
            var id: String
            var name: String
            var variables: String
            var updated: String
            var variants: [Variant]
        }
        var id: String
        var appPath: String
        var templates: [Row]
        var hasTemplates: Bool
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/templates") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.templatesPage(app: try await self.dashboard.app(context.parameters.get("app")))
            }
        }
    }

    func templatesPage(app: App) async throws -> DashboardView {
        let rows = try await self.dashboard.store.templates(appID: app.id).map { template in
            let compiled = try? CompiledTemplate(template)
            let variants =
                [("default", template.defaultVariant)] + template.variants.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            return TemplatesModel.Row(
                id: template.id, name: template.name, variables: (compiled?.dataVariables ?? []).joined(separator: ", "),
                updated: DashboardFormat.time(template.updatedAt),
                variants: variants.map {
                    TemplatesModel.Variant(
                        locale: $0.0, title: $0.1.title ?? "", subtitle: $0.1.subtitle ?? "", body: $0.1.body ?? "", payload: $0.1.payload ?? "")
                }
            )
        }
        return DashboardView(
            template: .templates, title: "Templates · \(app.id)",
            model: TemplatesModel(id: app.id, appPath: DashboardFormat.path(app.id), templates: rows, hasTemplates: !rows.isEmpty),
            section: .apps)
    }
}

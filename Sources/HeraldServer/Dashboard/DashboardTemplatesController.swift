// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// An app's templates: each variant's texts as written, by locale, and the variables a send must
/// give; and a form that makes one (a default and up to three locales, title and body; the
/// rest, and editing, is the API's, `/v1/apps/{app}/templates`).
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
        /// The new-template form, as typed (kept when it is refused).
        struct Form: Sendable {
            struct Locale: Sendable {
                var index: Int
                var locale: String
                var title: String
                var body: String
            }
            var name: String
            var title: String
            var body: String
            var locales: [Locale]
        }
        var id: String
        var appPath: String
        var templates: [Row]
        var hasTemplates: Bool
        var error: String?
        var form: Form
    }

    /// How many other locales the new-template form offers.
    static let formLocales = 3

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/templates") { request, context in
            try await self.dashboard.page(request) { _ in
                try await self.templatesPage(app: try await self.dashboard.app(context.parameters.get("app")))
            }
        }
        group.post("apps/:app/templates") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            do {
                try await self.dashboard.backend.createTemplate(Self.saveRequest(form), appID: app.id)
            } catch let error as HeraldError {
                let view = try await self.templatesPage(app: app, form: form, error: error.message)
                return self.dashboard.views.response(view, session: session, status: .unprocessableContent)
            }
            return DashboardViews.redirect("/dashboard/apps/\(DashboardFormat.path(app.id))/templates")
        }
    }

    /// The API's template body from the form: the default's title and body, and each other
    /// locale whose name is given.
    static func saveRequest(_ form: [String: String]) -> SaveTemplateRequest {
        func text(_ name: String) -> String? { DashboardForm.field(form, name) }
        var locales: [String: TemplateVariantBody] = [:]
        for index in 0..<Self.formLocales {
            guard let locale = text("locale-\(index)") else { continue }
            locales[locale] = TemplateVariantBody(title: text("title-\(index)"), body: text("body-\(index)"))
        }
        return SaveTemplateRequest(name: form["name"] ?? "", default: TemplateVariantBody(title: text("title"), body: text("body")), locales: locales)
    }

    func templatesPage(app: App, form: [String: String] = [:], error: String? = nil) async throws -> DashboardView {
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
            model: TemplatesModel(
                id: app.id, appPath: DashboardFormat.path(app.id), templates: rows, hasTemplates: !rows.isEmpty, error: error,
                form: TemplatesModel.Form(
                    name: form["name"] ?? "", title: form["title"] ?? "", body: form["body"] ?? "",
                    locales: (0..<Self.formLocales).map {
                        TemplatesModel.Form.Locale(
                            index: $0, locale: form["locale-\($0)"] ?? "", title: form["title-\($0)"] ?? "", body: form["body-\($0)"] ?? "")
                    })),
            section: .apps)
    }
}

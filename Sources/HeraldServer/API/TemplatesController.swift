// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/apps/{app}/templates` (send and admin keys): stored notification templates with
/// variants per locale.
struct TemplatesController {
    let store: any HeraldStore
    let clock: any EpochClock

    /// At most this many locales per template, and this many bytes per text.
    static let maximumLocales = 100
    static let maximumTextBytes = 4096

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let templates = v1.group("apps/:app/templates").add(middleware: RequireScope(.send, store: self.store, clock: self.clock))
        templates.post(use: self.create)
        templates.get(use: self.list)
        templates.get(":id", use: self.get)
        templates.put(":id", use: self.replace)
        templates.delete(":id", use: self.delete)
        templates.post(":id/preview", use: self.preview)
    }

    /// Every variant filled from `data` (device attributes as a device of that locale with
    /// nothing else registered); 400 `template_variable_missing` naming what `data` lacks.
    @Sendable func preview(_ request: Request, context: APIRequestContext) async throws -> TemplatePreview {
        let template = try await self.existing(context)
        let body = try await request.decode(as: TemplatePreviewRequest.self, context: context)
        let compiled = try CompiledTemplate(template)
        let data = body.data.map(JSONValue.init)
        try compiled.check(data: data)
        return TemplatePreview(
            variants: try compiled.renderAll(data: data).map {
                RenderedTemplateVariant(locale: $0.locale, title: $0.title, subtitle: $0.subtitle, body: $0.body, payload: $0.payload.map(JSON.init))
            })
    }

    /// 201 with the template and a new id.
    @Sendable func create(_ request: Request, context: APIRequestContext) async throws -> Answer<TemplateResponse> {
        let app = try context.requireApp()
        let body = try await request.decode(as: SaveTemplateRequest.self, context: context)
        let (template, compiled) = try Self.template(body, appID: app.id, id: Self.newID(), now: self.clock.nowMilliseconds)
        return Answer(.created, TemplateResponse(try await self.store.saveTemplate(template), compiled))
    }

    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> TemplateList {
        let templates = try await self.store.templates(appID: try context.requireApp().id)
        return TemplateList(templates: templates.map { TemplateResponse($0, try? CompiledTemplate($0)) })
    }

    @Sendable func get(_ request: Request, context: APIRequestContext) async throws -> TemplateResponse {
        let template = try await self.existing(context)
        return TemplateResponse(template, try? CompiledTemplate(template))
    }

    /// Replaces an existing template's name and variants.
    @Sendable func replace(_ request: Request, context: APIRequestContext) async throws -> TemplateResponse {
        let old = try await self.existing(context)
        let body = try await request.decode(as: SaveTemplateRequest.self, context: context)
        let (template, compiled) = try Self.template(body, appID: old.appID, id: old.id, now: self.clock.nowMilliseconds)
        return TemplateResponse(try await self.store.saveTemplate(template), compiled)
    }

    @Sendable func delete(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        guard try await self.store.deleteTemplate(appID: app.id, id: context.parameters.get("id") ?? "") else {
            throw HeraldError.notFound("template")
        }
        return Response(status: .noContent)
    }

    private func existing(_ context: APIRequestContext) async throws -> Template {
        let app = try context.requireApp()
        guard let template = try await self.store.template(appID: app.id, id: context.parameters.get("id") ?? "") else {
            throw HeraldError.notFound("template")
        }
        return template
    }

    /// The request as a template, checked (`missing_name`, `bad_name`, `missing_default`,
    /// `bad_locales`, `template_invalid`).
    /// A new template's id: `tpl_` and 16 random hex digits.
    static func newID() -> String { "tpl_" + UUIDText.random().replacingOccurrences(of: "-", with: "").prefix(16) }

    static func template(_ body: SaveTemplateRequest, appID: String, id: String, now: Int64) throws -> (Template, CompiledTemplate) {
        guard let name = body.name?.trimmingCharacters(in: .whitespaces), !name.isEmpty else {
            throw HeraldError.invalid("name is required", code: "missing_name")
        }
        guard name.utf8.count <= 200 else { throw HeraldError.invalid("name is at most 200 bytes", code: "bad_name") }
        guard let defaultBody = body.default else {
            throw HeraldError.invalid("default (the variant of devices with no locale of their own) is required", code: "missing_default")
        }
        let locales = body.locales ?? [:]
        guard locales.count <= Self.maximumLocales else {
            throw HeraldError.invalid("at most \(Self.maximumLocales) locales", code: "bad_locales")
        }
        for locale in locales.keys where !Self.isLocale(locale) {
            throw HeraldError.invalid("'\(locale.prefix(40))' is not a locale (letters, digits, - and _, like pt-BR)", code: "bad_locales")
        }
        let defaultVariant = try Self.variant(defaultBody)
        guard defaultVariant.title != nil || defaultVariant.body != nil else {
            throw HeraldError.invalid("template: the default variant needs a title or a body", code: "template_invalid")
        }
        var variants: [String: TemplateVariant] = [:]
        for (locale, variant) in locales { variants[locale] = try Self.variant(variant) }
        let template = Template(id: id, appID: appID, name: name, defaultVariant: defaultVariant, variants: variants, createdAt: now, updatedAt: now)
        return (template, try CompiledTemplate(template))
    }

    static func isLocale(_ locale: String) -> Bool {
        !locale.isEmpty && locale.utf8.count <= 35
            && locale.unicodeScalars.allSatisfy {
                $0 == "-" || $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
            }
    }

    private static func variant(_ body: TemplateVariantBody) throws -> TemplateVariant {
        for text in [body.title, body.subtitle, body.body].compactMap({ $0 }) where text.utf8.count > Self.maximumTextBytes {
            throw HeraldError.invalid("template: a text is at most \(Self.maximumTextBytes) bytes", code: "template_invalid")
        }
        return TemplateVariant(
            title: body.title, subtitle: body.subtitle, body: body.body,
            payload: body.payload.map { String(decoding: JSONValue($0).serialized(), as: UTF8.self) }
        )
    }
}

extension TemplateResponse {
    init(_ template: Template, _ compiled: CompiledTemplate?) {
        self.init(
            id: template.id, name: template.name, default: TemplateVariantBody(template.defaultVariant),
            locales: template.variants.mapValues(TemplateVariantBody.init), variables: compiled?.dataVariables ?? [],
            deviceVariables: compiled?.deviceVariables ?? [], createdAt: template.createdAt, updatedAt: template.updatedAt
        )
    }
}

extension TemplateVariantBody {
    init(_ variant: TemplateVariant) {
        self.init(
            title: variant.title, subtitle: variant.subtitle, body: variant.body,
            payload: variant.payload.flatMap { try? JSONValue.parse($0) }.map(JSON.init)
        )
    }
}

extension JSON {
    /// Herald's own value as the API's.
    init(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool(let bool): self = .bool(bool)
        case .int(let int): self = .int(int)
        case .double(let double): self = .double(double)
        case .string(let string): self = .string(string)
        case .array(let items): self = .array(items.map(JSON.init))
        case .object(let members): self = .object(members.map { JSON.Member($0.0, JSON($0.1)) })
        }
    }
}

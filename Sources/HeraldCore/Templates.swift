// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// One language's content of a template: the alert's texts and, optionally, a JSON object of
/// custom payload keys. Any text may hold `{{name}}` variables, filled when it is sent.
package struct TemplateVariant: Sendable, Hashable {
    package var title: String?
    package var subtitle: String?
    package var body: String?
    /// A JSON object (as written) merged into the payload beside `aps`.
    package var payload: String?

    package init(title: String? = nil, subtitle: String? = nil, body: String? = nil, payload: String? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.payload = payload
    }
}

/// A stored notification template of one app: a default variant and variants per locale
/// (`pt-BR`, `pt`, `en`, …), chosen per device by ``TemplateVariant`` lookup with fallback.
package struct Template: Sendable, Hashable {
    package var id: String
    package var appID: String
    package var name: String
    /// The variant of devices whose locale (nor its language) has none of its own.
    package var defaultVariant: TemplateVariant
    /// Variants by locale, as written (`pt-BR`, `pt`).
    package var variants: [String: TemplateVariant]
    package var createdAt: Int64
    package var updatedAt: Int64

    package init(
        id: String, appID: String, name: String, defaultVariant: TemplateVariant, variants: [String: TemplateVariant] = [:],
        createdAt: Int64, updatedAt: Int64
    ) {
        self.id = id
        self.appID = appID
        self.name = name
        self.defaultVariant = defaultVariant
        self.variants = variants
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// Templates per app; both drivers implement it beside ``HeraldStore``.
package protocol TemplateStore: Sendable {
    /// Creates the template, or replaces an existing one of the same app and id (its name and
    /// variants; `createdAt` is kept). Returns the template as stored.
    func saveTemplate(_ template: Template) async throws -> Template
    /// The app's templates, by name then id.
    func templates(appID: String) async throws -> [Template]
    func template(appID: String, id: String) async throws -> Template?
    /// False when there is none.
    func deleteTemplate(appID: String, id: String) async throws -> Bool
}

extension Template {
    /// app_id, id, name, variants, created_at, updated_at
    package static let columns = "app_id, id, name, variants, created_at, updated_at"

    /// The stored form of the variants, one JSON document both drivers keep as text:
    /// `{"default": {…}, "locales": {"pt": {…}, "pt-BR": {…}}}`, locales sorted.
    package var storedVariants: String {
        let document = JSONValue.object([
            ("default", Self.json(self.defaultVariant)),
            ("locales", .object(self.variants.sorted { $0.key < $1.key }.map { ($0.key, Self.json($0.value)) })),
        ])
        return String(decoding: document.serialized(), as: UTF8.self)
    }

    package init(row: some StoredRow) {
        self.init(
            id: row.string(1) ?? "", appID: row.string(0) ?? "", name: row.string(2) ?? "", storedVariants: row.string(3) ?? "{}",
            createdAt: row.int(4) ?? 0, updatedAt: row.int(5) ?? 0
        )
    }

    /// A template from ``storedVariants``' document.
    package init(id: String, appID: String, name: String, storedVariants: String, createdAt: Int64, updatedAt: Int64) {
        let document = (try? JSONValue.parse(storedVariants)) ?? .object([])
        var variants: [String: TemplateVariant] = [:]
        for (locale, value) in document["locales"]?.objectMembers ?? [] { variants[locale] = Self.variant(value) }
        self.init(
            id: id, appID: appID, name: name, defaultVariant: document["default"].map(Self.variant) ?? TemplateVariant(), variants: variants,
            createdAt: createdAt, updatedAt: updatedAt
        )
    }

    private static func json(_ variant: TemplateVariant) -> JSONValue {
        let fields: [(String, String?)] = [
            ("title", variant.title), ("subtitle", variant.subtitle), ("body", variant.body), ("payload", variant.payload),
        ]
        return .object(fields.compactMap { key, value in value.map { (key, JSONValue.string($0)) } })
    }

    private static func variant(_ value: JSONValue) -> TemplateVariant {
        TemplateVariant(
            title: value["title"]?.stringValue, subtitle: value["subtitle"]?.stringValue, body: value["body"]?.stringValue,
            payload: value["payload"]?.stringValue
        )
    }
}

// SPDX-License-Identifier: Apache-2.0

/// One language's content of a template; any text may hold `{{name}}` variables.
public struct TemplateVariantBody: Sendable, Hashable, Codable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    /// Custom payload keys (a JSON object, no `aps`), merged beside `aps`; variables in its strings.
    public var payload: JSON?

    public init(title: String? = nil, subtitle: String? = nil, body: String? = nil, payload: JSON? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.payload = payload
    }
}

/// `POST /v1/apps/{app}/templates` and `PUT /v1/apps/{app}/templates/{id}`: a name, the default
/// variant and variants by locale (`pt-BR`, `pt`).
public struct SaveTemplateRequest: Sendable, Hashable, Codable {
    public var name: String?
    public var `default`: TemplateVariantBody?
    public var locales: [String: TemplateVariantBody]?

    public init(name: String, default: TemplateVariantBody, locales: [String: TemplateVariantBody]? = nil) {
        self.name = name
        self.default = `default`
        self.locales = locales
    }
}

/// A stored template, with the variables it takes from `data` and from the device.
public struct TemplateResponse: Sendable, Hashable, Codable {
    public var id: String
    public var name: String
    public var `default`: TemplateVariantBody
    public var locales: [String: TemplateVariantBody]
    /// The names `data` must give when sending with it.
    public var variables: [String]
    /// The device attributes it uses (`device.locale`, …).
    public var deviceVariables: [String]
    public var createdAt: Int64
    public var updatedAt: Int64

    public init(
        id: String, name: String, default: TemplateVariantBody, locales: [String: TemplateVariantBody], variables: [String],
        deviceVariables: [String], createdAt: Int64, updatedAt: Int64
    ) {
        self.id = id
        self.name = name
        self.default = `default`
        self.locales = locales
        self.variables = variables
        self.deviceVariables = deviceVariables
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// `POST /v1/apps/{app}/templates/{id}/preview`: the values of its variables.
public struct TemplatePreviewRequest: Sendable, Hashable, Codable {
    public var data: JSON?

    public init(data: JSON? = nil) { self.data = data }
}

/// One variant filled in; `locale` is null for the default.
public struct RenderedTemplateVariant: Sendable, Hashable, Codable {
    public var locale: String?
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var payload: JSON?

    public init(locale: String?, title: String?, subtitle: String?, body: String?, payload: JSON?) {
        self.locale = locale
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.payload = payload
    }
}

/// The answer to a preview: the default variant first, then each locale's.
public struct TemplatePreview: Sendable, Hashable, Codable {
    public var variants: [RenderedTemplateVariant]

    public init(variants: [RenderedTemplateVariant]) { self.variants = variants }
}

/// `GET /v1/apps/{app}/templates`: by name.
public struct TemplateList: Sendable, Hashable, Codable {
    public var templates: [TemplateResponse]

    public init(templates: [TemplateResponse]) { self.templates = templates }
}

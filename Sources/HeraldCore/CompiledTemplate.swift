// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// A device's attributes a template may use, as `{{device.locale}}`, `{{device.timeZone}}`,
/// `{{device.appVersion}}` and `{{device.platform}}`; one the device did not register renders
/// as an empty string.
package struct TemplateDevice: Sendable, Hashable {
    package var locale: String?
    package var timeZone: String?
    package var appVersion: String?
    package var platform: String?

    package init(locale: String? = nil, timeZone: String? = nil, appVersion: String? = nil, platform: String? = nil) {
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.platform = platform
    }

    /// The names a template may use (anything else under `device.` is refused when saved).
    package static let variables: Set<String> = ["device.locale", "device.timeZone", "device.appVersion", "device.platform"]

    func value(_ name: String) -> String? {
        switch name {
        case "device.locale": self.locale
        case "device.timeZone": self.timeZone
        case "device.appVersion": self.appVersion
        case "device.platform": self.platform
        default: nil
        }
    }
}

/// One variant filled in: the alert's texts and the custom payload keys.
package struct RenderedVariant: Sendable, Hashable {
    /// The variant's locale as written in the template; nil for the default variant.
    package var locale: String?
    package var title: String?
    package var subtitle: String?
    package var body: String?
    /// The payload fragment (a JSON object), its strings filled in.
    package var payload: JSONValue?

    package init(locale: String?, title: String? = nil, subtitle: String? = nil, body: String? = nil, payload: JSONValue? = nil) {
        self.locale = locale
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.payload = payload
    }
}

/// A ``Template`` checked and parsed once, ready to render per locale.
///
/// Variables are filled from the send's `data` (a JSON object whose strings, numbers and booleans
/// may be used) and the device's attributes (``TemplateDevice``). Values go into JSON strings
/// only (the texts, and string values of the payload fragment) and are serialized by
/// `JSONValue`, so a value can never change the payload's structure.
package struct CompiledTemplate: Sendable {
    struct Variant: Sendable {
        var locale: String?
        var title: TemplateText?
        var subtitle: TemplateText?
        var body: TemplateText?
        var payload: JSONValue?
    }

    package let id: String
    let defaultVariant: Variant
    /// By normalized locale (`pt-br`).
    let variants: [String: Variant]
    /// The variables it takes from `data`, sorted.
    package let dataVariables: [String]
    /// The device attributes it uses, sorted.
    package let deviceVariables: [String]

    /// Checks every variant (`template_invalid`: a bad `{{`, an unknown `device.` attribute, a
    /// payload fragment that is not a JSON object or sets `aps`).
    package init(_ template: Template) throws(HeraldError) {
        var names: Set<String> = []
        let defaultVariant = try Self.compile(template.defaultVariant, locale: nil, names: &names)
        var variants: [String: Variant] = [:]
        for (locale, variant) in template.variants {
            let key = Self.normalized(locale)
            guard !key.isEmpty, variants[key] == nil else {
                throw TemplateText.invalid("the locale '\(locale.prefix(40))' is empty or given twice")
            }
            variants[key] = try Self.compile(variant, locale: locale, names: &names)
        }
        for name in names where name.hasPrefix("device.") && !TemplateDevice.variables.contains(name) {
            throw TemplateText.invalid("'\(name)' is not a device attribute (\(TemplateDevice.variables.sorted().joined(separator: ", ")))")
        }
        self.id = template.id
        self.defaultVariant = defaultVariant
        self.variants = variants
        self.dataVariables = names.filter { !$0.hasPrefix("device.") }.sorted()
        self.deviceVariables = names.filter { $0.hasPrefix("device.") }.sorted()
    }

    /// The locales it has variants for (as written), sorted.
    package var locales: [String] { self.variants.values.compactMap(\.locale).sorted() }

    /// Checks that `data` gives every variable of every variant a usable value, so a send is
    /// refused when accepted (`template_variable_missing`, `template_variable_invalid`), never
    /// broken per device later.
    package func check(data: JSONValue?) throws(HeraldError) {
        for name in self.dataVariables { _ = try Self.value(name, in: data) }
    }

    /// The variant's key for a device's locale, most specific first: `pt-BR`, then `pt`, then the
    /// default (nil). Locales are matched without regard to case, `_` as `-`, `@…` ignored.
    package func variantKey(locale: String?) -> String? {
        var candidate = Self.normalized(locale ?? "")
        while !candidate.isEmpty {
            if self.variants[candidate] != nil { return candidate }
            guard let dash = candidate.lastIndex(of: "-") else { break }
            candidate = String(candidate[..<dash])
        }
        return nil
    }

    /// What devices rendering the same way share: the chosen variant and the device attributes
    /// used. A send renders once per distinct key (once per locale unless other attributes are used).
    package func renderKey(_ device: TemplateDevice) -> [String?] {
        [self.variantKey(locale: device.locale)] + self.deviceVariables.map { device.value($0) }
    }

    /// The variant for `device`, filled from `data` and the device's attributes.
    package func render(data: JSONValue?, device: TemplateDevice) throws(HeraldError) -> RenderedVariant {
        let variant = self.variantKey(locale: device.locale).flatMap { self.variants[$0] } ?? self.defaultVariant
        return try Self.render(variant, data: data, device: device)
    }

    /// Every variant filled from `data`, the default first then by locale (a preview; device
    /// attributes as if the device had the variant's locale and nothing else).
    package func renderAll(data: JSONValue?) throws(HeraldError) -> [RenderedVariant] {
        let ordered = [self.defaultVariant] + self.variants.values.sorted { ($0.locale ?? "") < ($1.locale ?? "") }
        var rendered: [RenderedVariant] = []
        for variant in ordered { rendered.append(try Self.render(variant, data: data, device: TemplateDevice(locale: variant.locale))) }
        return rendered
    }

    static func normalized(_ locale: String) -> String {
        String(locale.prefix { $0 != "@" }.map { $0 == "_" ? "-" : $0 }).lowercased()
    }

    private static func compile(_ variant: TemplateVariant, locale: String?, names: inout Set<String>) throws(HeraldError) -> Variant {
        func text(_ string: String?) throws(HeraldError) -> TemplateText? {
            guard let string else { return nil }
            let text = try TemplateText(parsing: string)
            names.formUnion(text.variables)
            return text
        }
        var payload: JSONValue?
        if let fragment = variant.payload {
            guard let parsed = try? JSONValue.parse(fragment), let members = parsed.objectMembers else {
                throw TemplateText.invalid("a payload fragment must be a JSON object")
            }
            guard !members.contains(where: { $0.0 == "aps" }) else {
                throw TemplateText.invalid("a payload fragment cannot set 'aps' (use title, subtitle and body)")
            }
            try Self.strings(in: parsed) { (string) throws(HeraldError) in _ = try text(string) }
            payload = parsed
        }
        return Variant(
            locale: locale, title: try text(variant.title), subtitle: try text(variant.subtitle), body: try text(variant.body), payload: payload)
    }

    private static func render(_ variant: Variant, data: JSONValue?, device: TemplateDevice) throws(HeraldError) -> RenderedVariant {
        let value = { (name: String) throws(HeraldError) -> String in
            name.hasPrefix("device.") ? device.value(name) ?? "" : try Self.value(name, in: data)
        }
        return RenderedVariant(
            locale: variant.locale, title: try variant.title?.rendered(value), subtitle: try variant.subtitle?.rendered(value),
            body: try variant.body?.rendered(value),
            payload: try variant.payload.map { (payload) throws(HeraldError) in try Self.fill(payload, value) }
        )
    }

    /// The text of `data[name]`: a string as is, a number or boolean as JSON writes it.
    private static func value(_ name: String, in data: JSONValue?) throws(HeraldError) -> String {
        switch data?[name] {
        case nil, .null?:
            throw HeraldError.invalid("the template's variable '\(name)' has no value in data", code: "template_variable_missing")
        case .string(let string)?: return string
        case let scalar? where scalar.boolValue != nil || scalar.doubleValue != nil:
            return String(decoding: scalar.serialized(), as: UTF8.self)
        case _?:
            throw HeraldError.invalid("the template's variable '\(name)' must be a string, number or boolean", code: "template_variable_invalid")
        }
    }

    private static func fill(_ json: JSONValue, _ value: (String) throws(HeraldError) -> String) throws(HeraldError) -> JSONValue {
        switch json {
        case .string(let string): return .string(try TemplateText(parsing: string).rendered(value))
        case .array(let items):
            var filled: [JSONValue] = []
            for item in items { filled.append(try Self.fill(item, value)) }
            return .array(filled)
        case .object(let members):
            var filled: [(String, JSONValue)] = []
            for (key, item) in members { filled.append((key, try Self.fill(item, value))) }
            return .object(filled)
        default: return json
        }
    }

    private static func strings(in json: JSONValue, _ body: (String) throws(HeraldError) -> Void) throws(HeraldError) {
        switch json {
        case .string(let string): try body(string)
        case .array(let items): for item in items { try Self.strings(in: item, body) }
        case .object(let members): for (_, item) in members { try Self.strings(in: item, body) }
        default: break
        }
    }
}

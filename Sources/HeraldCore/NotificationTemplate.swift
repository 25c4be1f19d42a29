// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// A notification sent by template, as accepted: the template's variants as they were then (a
/// later edit or delete of the template does not change what is still to be sent) and the send's
/// `data`. Stored beside the notification as one JSON document:
/// `{"id": …, "variants": {"default": {…}, "locales": {…}}, "data": {…}}`.
package struct NotificationTemplate: Sendable, Hashable {
    package var template: Template
    package var data: JSONValue?

    package init(template: Template, data: JSONValue?) {
        self.template = template
        self.data = data
    }

    package var stored: String {
        var members: [(String, JSONValue)] = [
            ("id", .string(self.template.id)),
            ("variants", (try? JSONValue.parse(self.template.storedVariants)) ?? .object([])),
        ]
        if let data = self.data { members.append(("data", data)) }
        return JSONValue.object(members).jsonString
    }

    /// Reads ``stored``; nil for a document that is not one.
    package init?(stored: String) {
        guard let document = try? JSONValue.parse(stored), let id = document["id"]?.stringValue, let variants = document["variants"] else {
            return nil
        }
        let template = Template(id: id, appID: "", name: "", storedVariants: variants.jsonString, createdAt: 0, updatedAt: 0)
        self.init(template: template, data: document["data"])
    }
}

/// A templated notification ready to render in a claim: the template compiled once, the send's
/// data and the notification's own payload (`aps` without an alert, and the custom keys), into
/// which each device's variant is laid.
package struct TemplateRendering: Sendable, Hashable {
    package let compiled: CompiledTemplate
    let data: JSONValue?
    let base: JSONValue
    /// The notification's parts for other platforms (``NotificationParts``), each a base too.
    let partBases: [Transport: JSONValue]
    /// What it was read from (its identity: equal documents render equally).
    let stored: String

    /// Nil when the stored template or payload cannot be read (never, for what Herald wrote).
    package init?(stored: String, payload: [UInt8], parts: [Transport: [UInt8]] = [:]) {
        guard let accepted = NotificationTemplate(stored: stored), let compiled = try? CompiledTemplate(accepted.template),
            let base = try? JSONValue.parse(payload)
        else { return nil }
        (self.compiled, self.data, self.base, self.stored) = (compiled, accepted.data, base, stored)
        self.partBases = parts.compactMapValues { try? JSONValue.parse($0) }
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.stored == rhs.stored && lhs.base == rhs.base }
    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.stored)
        hasher.combine(self.base)
    }

    /// The payload `device` gets: its variant (by locale, with the fallback) filled in.
    package func payload(for device: TemplateDevice, transport: Transport = .apns) throws(HeraldError) -> [UInt8] {
        let variant = try self.compiled.render(data: self.data, device: device)
        switch transport {
        case .apns: return Self.payload(base: self.base, variant: variant)
        case .fcm: return FCMPart.rendered(base: self.partBases[.fcm] ?? .object([]), variant: variant)
        case .webpush: return WebPushPart.rendered(base: self.partBases[.webpush] ?? .object([]), variant: variant)
        }
    }

    /// Every variant's payload, the default first (see ``CompiledTemplate/renderAll(data:)``).
    package func allPayloads() throws(HeraldError) -> [(locale: String?, payload: [UInt8])] {
        try self.compiled.renderAll(data: self.data).map { (locale: $0.locale, payload: Self.payload(base: self.base, variant: $0)) }
    }

    /// `base` with the variant laid over it: `aps.alert` holds its title, subtitle and body (any
    /// alert `base` had is replaced), and the keys of its payload fragment are set beside `aps`
    /// (replacing keys of the same name from `data`).
    package static func payload(base: JSONValue, variant: RenderedVariant) -> [UInt8] {
        var members = base.objectMembers ?? []
        var aps = members.first { $0.0 == "aps" }?.1.objectMembers ?? []
        let alert = [("title", variant.title), ("subtitle", variant.subtitle), ("body", variant.body)].compactMap { key, value in
            value.map { (key, JSONValue.string($0)) }
        }
        aps.removeAll { $0.0 == "alert" }
        if !alert.isEmpty { aps.insert(("alert", .object(alert)), at: 0) }
        members.removeAll { $0.0 == "aps" }
        let fragment = variant.payload?.objectMembers ?? []
        members.removeAll { member in fragment.contains { $0.0 == member.0 } }
        return JSONValue.object([("aps", .object(aps))] + members + fragment).serialized()
    }
}

extension ClaimPolicy {
    /// The devices of claimed deliveries whose payload is still to be rendered from a template.
    package static func templatedDevices(_ claimed: [ClaimedDelivery]) -> [Int64] {
        claimed.compactMap { $0.template != nil ? $0.deviceID : nil }
    }

    /// Renders each templated delivery's payload for its device (`devices`: their attributes as
    /// they are now; a device not there renders as one with none), once per notification and
    /// distinct render key, so a broadcast renders once per locale. A delivery whose rendering
    /// fails keeps the notification's payload without an alert (it cannot happen for data
    /// checked at accept time).
    package static func render(_ devices: [Int64: TemplateDevice], into claimed: inout [ClaimedDelivery]) {
        struct Key: Hashable {
            var notificationID: String
            var transport: Transport
            var render: [String?]
        }
        var rendered: [Key: [UInt8]] = [:]
        for index in claimed.indices {
            guard let template = claimed[index].template else { continue }
            let device = devices[claimed[index].deviceID] ?? TemplateDevice()
            let transport = claimed[index].route.transport
            let key = Key(notificationID: claimed[index].notificationID, transport: transport, render: template.compiled.renderKey(device))
            if let payload = rendered[key] {
                claimed[index].payload = payload
            } else if let payload = try? template.payload(for: device, transport: transport) {
                rendered[key] = payload
                claimed[index].payload = payload
            }
            claimed[index].template = nil
        }
    }
}

extension TemplateDevice {
    /// The columns of `devices` a template reads, after the device's id.
    package static let columns = "id, locale, time_zone, app_version, platform"

    /// Reads ``columns`` (without the id) from `row`, starting at column `first`.
    package init(row: some StoredRow, from first: Int) {
        self.init(locale: row.string(first), timeZone: row.string(first + 1), appVersion: row.string(first + 2), platform: row.string(first + 3))
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI
import HeraldCore

extension NotificationRequest {
    /// A send by template (`"template": "<id>"`), checked when accepted so that no device gets a
    /// broken push later: the template must be the app's (400 `template_unknown`), `data` must
    /// give every variable of every variant (any device may fall back to any of them: 400
    /// `template_variable_missing`, `template_variable_invalid`), and every variant's payload must
    /// fit an alert (422 `payload_too_large`). The template renders the alert, so the send may not
    /// give one too, nor ask for encryption or a push type other than alert (400
    /// `template_conflict`). The template is kept with the notification as it is now.
    static func applyTemplate(_ body: SendRequest, to spec: inout NotificationSpec, appID: String, store: any HeraldStore) async throws {
        guard let id = body.template else { return }
        func conflict(_ what: String) -> HeraldError {
            HeraldError.invalid("a template renders the alert: do not give \(what) with it", code: "template_conflict")
        }
        if body.title != nil || body.subtitle != nil || body.body != nil { throw conflict("title, subtitle or body") }
        if case .object(let aps)? = body.aps, aps.contains(where: { $0.key == "alert" }) { throw conflict("aps.alert") }
        if body.encrypt == true { throw conflict("encrypt (end-to-end encryption of templated sends is not supported)") }
        if let pushType = spec.pushType, pushType != .alert { throw conflict("pushType \(pushType.rawValue)") }
        guard !id.isEmpty, id.utf8.count <= 128, let template = try await store.template(appID: appID, id: id) else {
            throw HeraldError.invalid("the app has no template '\(id.prefix(128))'", code: "template_unknown")
        }
        spec.template = NotificationTemplate(template: template, data: body.data.map(JSONValue.init))
        guard let rendering = try self.rendering(spec) else { return }
        try rendering.compiled.check(data: spec.template?.data)
        for variant in try rendering.allPayloads() {
            do {
                try PayloadRules.checkSize(variant.payload.count, pushType: .alert)
            } catch {
                throw HeraldError.unprocessable(
                    "the template's \(variant.locale.map { "'\($0)'" } ?? "default") variant: \(error.description)", code: error.code.description)
            }
        }
    }

    /// What renders a templated spec's payloads (nil for a send without a template).
    static func rendering(_ spec: NotificationSpec) throws -> TemplateRendering? {
        guard let template = spec.template else { return nil }
        guard let rendering = TemplateRendering(stored: template.stored, payload: spec.payload) else {
            throw HeraldError.invalid("the template cannot be compiled", code: "template_invalid")
        }
        return rendering
    }
}

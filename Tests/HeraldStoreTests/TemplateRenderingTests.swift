// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Testing

@Suite struct TemplateRenderingTests {
    let template = Template(
        id: "tpl", appID: "demo", name: "Order",
        defaultVariant: TemplateVariant(title: "Order {{order}}", body: "Hi {{ name }}, it ships {{when}}"),
        variants: [
            "pt": TemplateVariant(title: "Pedido {{order}}", body: "Olá {{name}}"),
            "pt-BR": TemplateVariant(
                title: "Pedido {{order}} (BR)", subtitle: "{{device.locale}}", payload: #"{"link":"app://o/{{order}}","n":[1,"{{name}}"]}"#),
        ],
        createdAt: 1, updatedAt: 1
    )

    func data(_ json: String) throws -> JSONValue { try JSONValue.parse(json) }

    @Test(
        "each device's locale picks its variant with the fallback pt-BR, then pt, then the default",
        arguments: [
            ("pt-BR", "Pedido 7 (BR)"), ("pt_br", "Pedido 7 (BR)"), ("pt-PT", "Pedido 7"), ("pt", "Pedido 7"), ("PT", "Pedido 7"),
            ("pt-BR@calendar=gregorian", "Pedido 7 (BR)"), ("en-US", "Order 7"), ("", "Order 7"), ("p", "Order 7"),
        ])
    func fallback(locale: String, title: String) throws {
        let compiled = try CompiledTemplate(self.template)
        let rendered = try compiled.render(data: try self.data(#"{"order":7,"name":"Ana","when":"today"}"#), device: TemplateDevice(locale: locale))
        #expect(rendered.title == title)
    }

    @Test("a device without a locale gets the default variant")
    func noLocale() throws {
        let rendered = try CompiledTemplate(self.template).render(
            data: try self.data(#"{"order":7,"name":"Ana","when":"now"}"#), device: TemplateDevice())
        #expect(rendered == RenderedVariant(locale: nil, title: "Order 7", body: "Hi Ana, it ships now"))
    }

    @Test("values are escaped for JSON: quotes, backslashes and braces in data stay inside their strings")
    func escaping() throws {
        let compiled = try CompiledTemplate(self.template)
        let hostile = #"Ana\", \"aps\": {\"badge\": 99}, \"x\": \"\\ {{order}}"#
        let rendered = try compiled.render(data: try self.data(#"{"order":"1","name":"\#(hostile)"}"#), device: TemplateDevice(locale: "pt-BR"))
        let payload = try #require(rendered.payload)
        #expect(payload["n"]?.arrayValue?.last?.stringValue == #"Ana", "aps": {"badge": 99}, "x": "\ {{order}}"#, "a value is not rendered again")
        let reparsed = try JSONValue.parse(payload.serialized())
        #expect(reparsed["aps"] == nil && reparsed.objectMembers?.map(\.0) == ["link", "n"])
        #expect(reparsed["link"]?.stringValue == "app://o/1")
        #expect(rendered.subtitle == "pt-BR", "a device attribute")
    }

    @Test("numbers and booleans render as JSON writes them; null, arrays and objects are refused")
    func values() throws {
        let compiled = try CompiledTemplate(
            Template(id: "t", appID: "demo", name: "t", defaultVariant: TemplateVariant(body: "{{a}} {{b}} {{c}}"), createdAt: 1, updatedAt: 1))
        #expect(try compiled.render(data: try self.data(#"{"a":3,"b":true,"c":2.5}"#), device: TemplateDevice()).body == "3 true 2.5")
        for bad in [#"{"a":1,"b":[1],"c":1}"#, #"{"a":1,"b":{},"c":1}"#] {
            #expect(throws: HeraldError.invalid("the template's variable 'b' must be a string, number or boolean", code: "template_variable_invalid"))
            {
                try compiled.check(data: try self.data(bad))
            }
        }
        #expect(throws: HeraldError.invalid("the template's variable 'b' has no value in data", code: "template_variable_missing")) {
            try compiled.check(data: try self.data(#"{"a":1,"b":null,"c":1}"#))
        }
    }

    @Test("a variable missing from data is named when the send is checked, whichever variant uses it")
    func missing() throws {
        let compiled = try CompiledTemplate(self.template)
        #expect(compiled.dataVariables == ["name", "order", "when"] && compiled.deviceVariables == ["device.locale"])
        try compiled.check(data: try self.data(#"{"order":7,"name":"Ana","when":"today"}"#))
        // Only the default variant uses `when`: still required, since any device may fall back to it.
        #expect(throws: HeraldError.invalid("the template's variable 'when' has no value in data", code: "template_variable_missing")) {
            try compiled.check(data: try self.data(#"{"order":7,"name":"Ana"}"#))
        }
        #expect(throws: HeraldError.self) { try compiled.check(data: nil) }
    }

    @Test(
        "a template that cannot render is refused when compiled",
        arguments: [
            TemplateVariant(body: "Hi {{name"), TemplateVariant(body: "Hi {{na me}}"), TemplateVariant(title: "{{}}"),
            TemplateVariant(body: "{{device.token}}"), TemplateVariant(payload: "[1]"), TemplateVariant(payload: "{\"a\":"),
            TemplateVariant(payload: #"{"aps":{"badge":1}}"#), TemplateVariant(body: "{{1abc}}"),
        ])
    func invalid(variant: TemplateVariant) {
        let template = Template(
            id: "t", appID: "demo", name: "t", defaultVariant: TemplateVariant(), variants: ["en": variant], createdAt: 1, updatedAt: 1)
        #expect(throws: HeraldError.self) { try CompiledTemplate(template) }
        do {
            _ = try CompiledTemplate(template)
        } catch {
            #expect(error.code == "template_invalid")
        }
    }

    @Test("devices share a rendering per variant and per device attribute the template uses")
    func renderKey() throws {
        var plain = self.template
        plain.variants["pt-BR"]?.subtitle = nil
        let shared = try CompiledTemplate(plain)
        #expect(shared.deviceVariables.isEmpty)
        #expect(shared.renderKey(TemplateDevice(locale: "pt-PT")) == shared.renderKey(TemplateDevice(locale: "pt", platform: "iOS")))
        #expect(shared.renderKey(TemplateDevice(locale: "en")) == shared.renderKey(TemplateDevice(locale: "fr")))
        #expect(shared.renderKey(TemplateDevice(locale: "en")) != shared.renderKey(TemplateDevice(locale: "pt")))
        // With {{device.locale}} in a variant, the locale as registered is part of the key.
        let compiled = try CompiledTemplate(self.template)
        #expect(compiled.renderKey(TemplateDevice(locale: "pt-BR")) != compiled.renderKey(TemplateDevice(locale: "pt_BR")))
        #expect(compiled.renderKey(TemplateDevice(locale: "pt-BR")) == compiled.renderKey(TemplateDevice(locale: "pt-BR", platform: "iOS")))
        #expect(compiled.locales == ["pt", "pt-BR"])
        #expect(
            try compiled.renderAll(data: try self.data(#"{"order":1,"name":"A","when":"w"}"#)).map(\.title) == [
                "Order 1", "Pedido 1", "Pedido 1 (BR)",
            ])
    }

    @Test("a locale given twice (by case or separator) is refused")
    func duplicateLocale() {
        let template = Template(
            id: "t", appID: "demo", name: "t", defaultVariant: TemplateVariant(), variants: ["pt-BR": TemplateVariant(), "pt_br": TemplateVariant()],
            createdAt: 1, updatedAt: 1)
        #expect(throws: HeraldError.self) { try CompiledTemplate(template) }
    }
}

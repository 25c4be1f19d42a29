// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// `POST /v1/apps/{app}/notifications {"template", "data"}`: each device gets its language.
extension ServerTests {
    /// Registers a virtual device with `locale` (nil: none) and tag `t`; returns its token.
    func templatedDevice(_ context: Context, register: String, locale: String?) async throws -> String {
        let token = try await self.virtualDevice(context)
        let json =
            locale.map { #"{"environment":"sandbox","tags":["t"],"locale":"\#($0)","timeZone":"Asia/Tokyo"}"# }
            ?? #"{"environment":"sandbox","tags":["t"]}"#
        #expect(try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: register, json: json).status == 200)
        return token
    }

    /// The payload the emulator's device `token` received last.
    func received(_ context: Context, _ token: String) async throws -> [String: Any] {
        let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
        return ((inbox.body["notifications"] as? [[String: Any]])?.last?["payload"] as? [String: Any]) ?? [:]
    }

    @Test(
        "a send by template: pt-BR, pt_PT (falls back to pt), de and no locale (the default) each get their variant, values escaped",
        arguments: StoreDriver.enabled)
    func templateSend(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (register, send) = try await self.setUp(context)
            let made = try await context.api.call(
                "POST", "/v1/apps/demo/templates", key: send,
                json: #"""
                    {"name":"Shipped","default":{"title":"Order {{order}}","body":"Hi {{name}}","payload":{"link":"app://o/{{order}}"}},
                     "locales":{"pt-BR":{"title":"Pedido {{order}}","body":"Olá {{name}}","subtitle":"{{device.timeZone}}"},
                                "pt":{"title":"Encomenda {{order}}","body":"Olá {{name}}"}}}
                    """#)
            let template = try #require(made.body["id"] as? String, "\(made.body)")
            let brazil = try await self.templatedDevice(context, register: register, locale: "pt_BR")
            let portugal = try await self.templatedDevice(context, register: register, locale: "pt_PT")
            let germany = try await self.templatedDevice(context, register: register, locale: "de-DE")
            let unknown = try await self.templatedDevice(context, register: register, locale: nil)

            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"tags":["t"]},"template":"\#(template)","data":{"order":42,"name":"Ann \"the\" {{x}}"},"sound":"default"}"#)
            #expect(sent.status == 202, "\(sent.body)")
            let id = try #require(sent.body["id"] as? String)
            #expect((try await self.settled(context, key: send, id: id)["counts"] as? [String: Int])?["sent"] == 4)

            func alert(_ payload: [String: Any]) -> [String: String] {
                ((payload["aps"] as? [String: Any])?["alert"] as? [String: String]) ?? [:]
            }
            let br = try await self.received(context, brazil)
            #expect(alert(br) == ["title": "Pedido 42", "body": #"Olá Ann "the" {{x}}"#, "subtitle": "Asia/Tokyo"], "\(br)")
            #expect((br["aps"] as? [String: Any])?["sound"] as? String == "default")
            #expect(br["order"] as? Int == 42, "data's keys travel beside aps, as in any send")
            #expect(br["link"] == nil, "the pt-BR variant has no payload fragment")
            let pt = try await self.received(context, portugal)
            #expect(alert(pt) == ["title": "Encomenda 42", "body": #"Olá Ann "the" {{x}}"#], "\(pt)")
            for token in [germany, unknown] {
                let payload = try await self.received(context, token)
                #expect(alert(payload) == ["title": "Order 42", "body": #"Hi Ann "the" {{x}}"#], "\(payload)")
                #expect(payload["link"] as? String == "app://o/42")
            }

            // A later edit of the template changes no notification already accepted, only new ones.
            #expect(
                try await context.api.call(
                    "PUT", "/v1/apps/demo/templates/\(template)", key: send, json: #"{"name":"Shipped","default":{"body":"Edited {{name}}"}}"#
                ).status == 200)
            let again = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"tokens":["\#(brazil)"]},"template":"\#(template)","data":{"name":"Bo"}}"#)
            #expect(again.status == 202, "\(again.body)")
            _ = try await self.settled(context, key: send, id: try #require(again.body["id"] as? String))
            #expect(alert(try await self.received(context, brazil)) == ["body": "Edited Bo"])
        }
    }

    @Test("a send by template is checked when accepted: unknown template, missing variable, conflicting fields, too large; nothing is stored")
    func templateSendRefused() async throws {
        try await self.withServer { context in
            let (register, send) = try await self.setUp(context)
            _ = try await self.templatedDevice(context, register: register, locale: "en")
            let made = try await context.api.call(
                "POST", "/v1/apps/demo/templates", key: send,
                json: #"{"name":"t","default":{"body":"Hi {{name}}"},"locales":{"fr":{"body":"Salut {{name}} {{city}}"}}}"#)
            let template = try #require(made.body["id"] as? String)
            let cases: [(String, Int, String)] = [
                (#""template":"tpl_nope","data":{"name":"a","city":"b"}"#, 400, "template_unknown"),
                (#""template":"\#(template)","data":{"name":"a"}"#, 400, "template_variable_missing"),
                (#""template":"\#(template)","data":{"name":"a","city":["b"]}"#, 400, "template_variable_invalid"),
                (#""template":"\#(template)","data":{"name":"a","city":"b"},"title":"x""#, 400, "template_conflict"),
                (#""template":"\#(template)","data":{"name":"a","city":"b"},"aps":{"alert":"x"}"#, 400, "template_conflict"),
                (#""template":"\#(template)","data":{"name":"a","city":"b"},"pushType":"voip""#, 400, "template_conflict"),
                (#""template":"\#(template)","data":{"name":"\#(String(repeating: "x", count: 2100))","city":"b"}"#, 422, "payload_too_large"),
            ]
            for (fields, status, code) in cases {
                let answer = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: send, json: #"{"audience":{"tags":["t"]},\#(fields)}"#)
                let error = answer.body["error"] as? [String: Any]
                #expect(answer.status == status && error?["code"] as? String == code, "\(fields.prefix(80)): \(answer.body)")
                if code == "template_variable_missing" { #expect((error?["message"] as? String)?.contains("city") == true) }
            }
            let list = try await context.api.call("GET", "/v1/apps/demo/notifications", key: send)
            #expect((list.body["notifications"] as? [[String: Any]])?.isEmpty == true, "nothing was stored: \(list.body)")

            // A dry run shows each variant's exact payload, the default first.
            let dry = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send,
                json: #"{"audience":{"tags":["t"]},"template":"\#(template)","data":{"name":"Zé","city":"Lyon"},"dryRun":true}"#)
            #expect(dry.status == 200, "\(dry.body)")
            let push = try #require((dry.body["pushTypes"] as? [[String: Any]])?.first)
            let variants = try #require(push["variants"] as? [[String: Any]])
            #expect(variants.map { $0["locale"] as? String } == [nil, "fr"])
            // As each device gets it: with its receipt id (a placeholder of the same size here).
            #expect(
                variants.map { $0["payload"] as? String } == [
                    #"{"aps":{"alert":{"body":"Hi Zé"}},"name":"Zé","city":"Lyon","hr":"<receipt id of each device>"}"#,
                    #"{"aps":{"alert":{"body":"Salut Zé Lyon"}},"name":"Zé","city":"Lyon","hr":"<receipt id of each device>"}"#,
                ])
            #expect(push["payload"] as? String == variants.first?["payload"] as? String)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// `/v1/apps/{app}/templates`: stored templates with variants per locale.
extension ServerTests {
    @Test("templates: created with a send key, read, listed, replaced and deleted; another app's key sees none", arguments: StoreDriver.enabled)
    func templatesCRUD(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (register, send) = try await self.setUp(context)
            let made = try await context.api.call(
                "POST", "/v1/apps/demo/templates", key: send,
                json: #"""
                    {"name":"Order shipped","default":{"title":"Order {{order}}","body":"Hi {{name}}"},
                     "locales":{"pt-BR":{"title":"Pedido {{order}}","subtitle":"{{device.locale}}","payload":{"link":"app://o/{{order}}"}},
                                "pt":{"body":"Olá {{name}}"}}}
                    """#)
            #expect(made.status == 201, "\(made.body)")
            let id = try #require(made.body["id"] as? String)
            #expect(id.hasPrefix("tpl_"))
            #expect(made.body["variables"] as? [String] == ["name", "order"] && made.body["deviceVariables"] as? [String] == ["device.locale"])
            let read = try await context.api.call("GET", "/v1/apps/demo/templates/\(id)", key: context.admin)
            #expect(read.status == 200 && read.body["name"] as? String == "Order shipped")
            let ptBR = try #require((read.body["locales"] as? [String: Any])?["pt-BR"] as? [String: Any])
            #expect((ptBR["payload"] as? [String: Any])?["link"] as? String == "app://o/{{order}}" && ptBR["title"] as? String == "Pedido {{order}}")
            #expect(((read.body["default"] as? [String: Any])?["body"] as? String) == "Hi {{name}}")

            #expect(try await context.api.call("GET", "/v1/apps/demo/templates", key: register).status == 403, "a register key cannot")
            let listed = try await context.api.call("GET", "/v1/apps/demo/templates", key: send)
            #expect((listed.body["templates"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id])

            let replaced = try await context.api.call(
                "PUT", "/v1/apps/demo/templates/\(id)", key: send, json: #"{"name":"Shipped","default":{"body":"{{ name }}, it ships"}}"#)
            #expect(replaced.status == 200 && replaced.body["name"] as? String == "Shipped", "\(replaced.body)")
            #expect((replaced.body["locales"] as? [String: Any])?.isEmpty == true && replaced.body["variables"] as? [String] == ["name"])
            #expect(replaced.body["createdAt"] as? Int64 == made.body["createdAt"] as? Int64)
            let missing = try await context.api.call(
                "PUT", "/v1/apps/demo/templates/tpl_nope", key: send, json: #"{"name":"x","default":{"body":"x"}}"#)
            #expect(missing.status == 404)

            // Another app's key sees none of demo's templates.
            #expect(
                try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"other","bundleId":"com.example.other"}"#).status
                    == 201)
            let otherKey = try #require(
                try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"other"}"#).body["key"] as? String)
            #expect(try await context.api.call("GET", "/v1/apps/demo/templates/\(id)", key: otherKey).status == 403)
            #expect(try await context.api.call("GET", "/v1/apps/other/templates/\(id)", key: otherKey).status == 404)
            #expect(try await context.api.call("DELETE", "/v1/apps/other/templates/\(id)", key: otherKey).status == 404)

            #expect(try await context.api.call("DELETE", "/v1/apps/demo/templates/\(id)", key: send).status == 204)
            #expect(try await context.api.call("DELETE", "/v1/apps/demo/templates/\(id)", key: send).status == 404)
            #expect(try await context.api.call("GET", "/v1/apps/demo/templates/\(id)", key: send).status == 404)
        }
    }

    @Test("a template that cannot render is refused with a stable code, and nothing is stored")
    func templatesInvalid() async throws {
        try await self.withServer { context in
            let (_, send) = try await self.setUp(context)
            let cases: [(String, String)] = [
                (#"{"name":"t","default":{"body":"Hi {{name"}}"#, "template_invalid"),
                (#"{"name":"t","default":{"body":"{{device.token}}"}}"#, "template_invalid"),
                (#"{"name":"t","default":{"body":"x","payload":{"aps":{"badge":1}}}}"#, "template_invalid"),
                (#"{"name":"t","default":{"subtitle":"only"}}"#, "template_invalid"),
                (#"{"name":"t","default":{"body":"x"},"locales":{"pt BR":{"body":"y"}}}"#, "bad_locales"),
                (#"{"name":"t","default":{"body":"x"},"locales":{"pt-BR":{"body":"y"},"pt_br":{"body":"z"}}}"#, "template_invalid"),
                (#"{"name":" ","default":{"body":"x"}}"#, "missing_name"),
                (#"{"name":"t"}"#, "missing_default"),
                (#"{"name":"t","default":{"body":"x","colour":"red"}}"#, "unknown_field"),
            ]
            for (json, expected) in cases {
                let answer = try await context.api.call("POST", "/v1/apps/demo/templates", key: send, json: json)
                #expect(answer.status == 400 && self.code(answer) == expected, "\(json): \(answer.body)")
            }
            #expect((try await context.api.call("GET", "/v1/apps/demo/templates", key: send).body["templates"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("a preview shows every locale's rendering with the values escaped for JSON, and names a missing variable")
    func templatesPreview() async throws {
        try await self.withServer { context in
            let (_, send) = try await self.setUp(context)
            let made = try await context.api.call(
                "POST", "/v1/apps/demo/templates", key: send,
                json:
                    #"{"name":"t","default":{"title":"Hi {{name}}"},"locales":{"pt":{"title":"Olá {{name}}","payload":{"n":"{{name}}","l":"{{device.locale}}"}}}}"#
            )
            let id = try #require(made.body["id"] as? String)
            let preview = try await context.api.call(
                "POST", "/v1/apps/demo/templates/\(id)/preview", key: send, json: #"{"data":{"name":"A\"}, \"x\": {{name}}"}}"#)
            #expect(preview.status == 200, "\(preview.body)")
            let variants = try #require(preview.body["variants"] as? [[String: Any]])
            #expect(variants.map { $0["locale"] as? String } == [nil, "pt"])
            #expect(variants.map { $0["title"] as? String } == [#"Hi A"}, "x": {{name}}"#, #"Olá A"}, "x": {{name}}"#])
            let payload = try #require(variants.last?["payload"] as? [String: Any])
            #expect(payload["n"] as? String == #"A"}, "x": {{name}}"# && payload["l"] as? String == "pt" && payload.count == 2)

            let missing = try await context.api.call("POST", "/v1/apps/demo/templates/\(id)/preview", key: send, json: #"{"data":{"nome":"A"}}"#)
            #expect(missing.status == 400 && self.code(missing) == "template_variable_missing", "\(missing.body)")
            #expect(((missing.body["error"] as? [String: Any])?["message"] as? String)?.contains("'name'") == true)
            let array = try await context.api.call("POST", "/v1/apps/demo/templates/\(id)/preview", key: send, json: #"{"data":{"name":[1]}}"#)
            #expect(array.status == 400 && self.code(array) == "template_variable_invalid")
            #expect(try await context.api.call("POST", "/v1/apps/demo/templates/tpl_nope/preview", key: send, json: "{}").status == 404)
        }
    }
}

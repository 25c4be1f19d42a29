// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

extension DashboardTests {
    @Test("an app's templates page shows each locale's texts and the variables, escaped; the app page links to it")
    func templatesPage() async throws {
        try await self.server.withServer { context in
            let (_, send) = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let empty = try await browser.get("/dashboard/apps/demo/templates")
            #expect(empty.status == 200 && empty.body.contains(#"id="no-templates""#))
            #expect(empty.body.contains("<title>Templates · demo · Herald</title>"), "\(empty.body.prefix(400))")

            let made = try await context.api.call(
                "POST", "/v1/apps/demo/templates", key: send,
                json: #"""
                    {"name":"<b>Order</b>","default":{"title":"Order {{order}}","body":"<script>x</script>"},
                     "locales":{"pt-BR":{"title":"Pedido {{order}}","payload":{"l":"{{name}}"}}}}
                    """#)
            let id = try #require(made.body["id"] as? String)
            let page = try await browser.get("/dashboard/apps/demo/templates")
            #expect(page.status == 200)
            #expect(page.body.contains("<h2>&lt;b&gt;Order&lt;/b&gt; <span class=\"muted\"><code>\(id)</code></span></h2>"), "\(page.body)")
            #expect(page.body.contains(#"<span class="variables">name, order</span>"#))
            #expect(!page.body.contains("<script>x</script>") && page.body.contains("&lt;script&gt;x&lt;/script&gt;"))
            let locales = page.body.matches(of: /<tr data-locale="([^"]+)"><td>[^<]+<\/td><td class="wrap">([^<]*)<\/td>/).map { "\($0.1)=\($0.2)" }
            #expect(locales == ["default=Order {{order}}", "pt-BR=Pedido {{order}}"], "\(page.body)")
            #expect(try await browser.get("/dashboard/apps/demo").body.contains(#"href="/dashboard/apps/demo/templates""#))
            #expect(try await browser.get("/dashboard/apps/nope/templates").status == 404)
        }
    }

    @Test(
        "the send form composes from a template: its variables get inputs, the preview shows each locale (escaped), the send reaches each device in its language"
    )
    func sendFormTemplate() async throws {
        try await self.server.withServer { context in
            let (register, send) = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let plain = try await browser.get("/dashboard/apps/demo/send")
            #expect(plain.status == 200 && !plain.body.contains(#"id="f-template""#), "no templates, no template field")

            // Made with the templates page's form: refused without a name, keeping what was typed.
            let fields = [
                ("csrf", try #require(Browser.csrf(plain.body))), ("title", "Order {{order}}"), ("body", "It ships"), ("locale-0", "pt-BR"),
                ("title-0", "Pedido {{order}}"), ("body-0", "Enviado"),
            ]
            let refused = try await browser.post("/dashboard/apps/demo/templates", fields)
            #expect(refused.status == 422 && refused.body.contains(#"id="template-error""#), "\(refused.body)")
            #expect(refused.body.contains(#"name="title-0" type="text" value="Pedido {{order}}""#), "\(refused.body)")
            #expect(try await browser.post("/dashboard/apps/demo/templates", fields + [("name", "Shipped")]).status == 303)
            let listed = try await context.api.call("GET", "/v1/apps/demo/templates", key: send)
            let made = try #require((listed.body["templates"] as? [[String: Any]])?.first)
            #expect(made["name"] as? String == "Shipped" && (made["locales"] as? [String: Any])?.keys.sorted() == ["pt-BR"], "\(listed.body)")
            let id = try #require(made["id"] as? String)
            var tokens: [String: String] = [:]
            for locale in ["pt-BR", "en"] {
                let token = try await self.server.virtualDevice(context)
                #expect(
                    try await context.api.call(
                        "PUT", "/v1/apps/demo/devices/\(token)", key: register,
                        json: #"{"environment":"sandbox","locale":"\#(locale)","tags":["team"]}"#
                    ).status == 200)
                tokens[locale] = token
            }
            let page = try await browser.get("/dashboard/apps/demo/send")
            #expect(page.body.contains(#"<option value="\#(id)">Shipped</option>"#), "\(page.body)")
            let csrf = try #require(Browser.csrf(page.body))
            let base = [("csrf", csrf), ("to", "tag"), ("target", "team"), ("template", id)]

            // Chosen without its variables: the page names the missing one and gives it an input.
            let chosen = try await browser.post("/dashboard/apps/demo/send", base + [("action", "preview")])
            #expect(chosen.status == 422 && (chosen.body.contains("&#39;order&#39;") || chosen.body.contains("'order'")), "\(chosen.body)")
            #expect(chosen.body.contains(#"name="var-order""#) && chosen.body.contains(#"<option value="\#(id)" selected>"#), "\(chosen.body)")

            let previewed = try await browser.post("/dashboard/apps/demo/send", base + [("var-order", "<b>7</b>"), ("action", "preview")])
            #expect(previewed.status == 200, "\(previewed.body)")
            let locales = previewed.body.matches(
                of: /<li data-locale="([^"]+)" class="wrap"><strong>[^<]+<\/strong>: <span class="locale-title">([^<]*)<\/span>/
            )
            .map { "\($0.1)=\($0.2)" }
            #expect(locales == ["default=Order &lt;b&gt;7&lt;/b&gt;", "pt-BR=Pedido &lt;b&gt;7&lt;/b&gt;"], "\(previewed.body)")
            #expect(previewed.body.contains(#"value="&lt;b&gt;7&lt;/b&gt;""#), "the value stays in its input")

            let sent = try await browser.post("/dashboard/apps/demo/send", base + [("var-order", "7"), ("action", "send")])
            #expect(sent.status == 303, "\(sent.body)")
            let location = try #require(sent.headers.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("location:") })
            let notification = String(location.split(separator: "/").last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            let status = try await self.server.settled(context, key: send, id: notification)
            #expect((status["counts"] as? [String: Int])?["sent"] == 2, "\(status)")
            for (locale, title) in [("pt-BR", "Pedido 7"), ("en", "Order 7")] {
                let inbox = try await context.control.call("GET", "/v1/devices/\(tokens[locale] ?? "")/inbox")
                let payload = (inbox.body["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any]
                #expect(((payload?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String == title, "\(locale): \(inbox.body)")
            }
        }
    }
}

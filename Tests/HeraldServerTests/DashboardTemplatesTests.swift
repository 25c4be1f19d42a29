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
}

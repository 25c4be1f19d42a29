// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// The dashboard's server side through a real socket (curl): sessions, CSRF, what the pages say.
/// The browser flow is `DashboardBrowserTests`.
@Suite(.heavy) struct DashboardTests {
    let server = ServerTests()

    /// curl with a cookie jar: the page's status, body and headers.
    struct Browser: Sendable {
        let base: String
        let jar: String

        func get(_ path: String) async throws -> (status: Int, body: String, headers: String) {
            try await self.call(["-X", "GET"], path)
        }

        func post(_ path: String, _ fields: [(String, String)]) async throws -> (status: Int, body: String, headers: String) {
            try await self.call(["-X", "POST"] + fields.flatMap { ["--data-urlencode", "\($0.0)=\($0.1)"] }, path)
        }

        func call(_ arguments: [String], _ path: String) async throws -> (status: Int, body: String, headers: String) {
            let headers = self.jar + ".headers"
            let result = try await ProcessRunner.run(
                "curl",
                ["-s", "-S", "--max-time", "20", "-b", self.jar, "-c", self.jar, "-D", headers, "-o", "-", "-w", "\n%{http_code}"] + arguments + [
                    self.base + path
                ]
            )
            var lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
            let status = Int(lines.popLast() ?? "") ?? 0
            return (status, lines.joined(separator: "\n"), (try? String(contentsOfFile: headers, encoding: .utf8)) ?? "")
        }

        /// The CSRF token in the page's forms.
        static func csrf(_ page: String) -> String? {
            guard let range = page.range(of: #"name="csrf" value=""#) else { return nil }
            return String(page[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    @Test(
        "sign-in takes admin keys only; the session cookie is HttpOnly and SameSite; forged cookies, missing CSRF tokens and revoked keys are refused"
    )
    func sessions() async throws {
        try await self.server.withServer { context in
            let keys = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            let anonymous = try await browser.get("/dashboard/apps")
            #expect(anonymous.status == 303 && anonymous.headers.lowercased().contains("location: /dashboard/login"))
            #expect(try await browser.post("/dashboard/login", [("key", keys.send)]).status == 401, "a send key is not enough")
            #expect(try await browser.post("/dashboard/login", [("key", "hk_nonsense")]).status == 401)
            // A second admin key, to revoke later.
            let second = try #require(
                try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"admin","name":"ops"}"#).body["key"] as? String)
            let signedIn = try await browser.post("/dashboard/login", [("key", second)])
            #expect(signedIn.status == 303)
            let cookie =
                signedIn.headers.split(separator: "\n").first { $0.lowercased().hasPrefix("set-cookie") }.map(String.init) ?? signedIn.headers
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/dashboard"))
            let overview = try await browser.get("/dashboard")
            #expect(overview.status == 200 && overview.body.contains("<h1>Overview</h1>") && overview.body.contains("Sign out (ops)"))
            #expect(overview.headers.contains("Content-Security-Policy"))
            let csrf = try #require(Browser.csrf(overview.body))

            // A state-changing form without (or with a wrong) CSRF token is refused and writes nothing.
            #expect(try await browser.post("/dashboard/apps/demo/webhooks", [("url", "https://example.com/a")]).status == 403)
            #expect(
                try await browser.post(
                    "/dashboard/apps/demo/webhooks", [("url", "https://example.com/a"), ("csrf", (csrf.first == "0" ? "1" : "0") + csrf.dropFirst())]
                ).status == 403)
            #expect((try await context.api.call("GET", "/v1/apps/demo/webhooks", key: context.admin).body["webhooks"] as? [Any])?.isEmpty == true)
            let added = try await browser.post(
                "/dashboard/apps/demo/webhooks", [("url", "https://example.com/a"), ("csrf", csrf), ("event.delivery.sent", "on")])
            #expect(added.status == 200 && added.body.contains("whsec_"))
            #expect(
                (try await context.api.call("GET", "/v1/apps/demo/webhooks", key: context.admin).body["webhooks"] as? [[String: Any]])?.first?[
                    "events"] as? [String] == ["delivery.sent"])
            // Bad input in a form: explained, nothing written.
            let bad = try await browser.post("/dashboard/apps/demo/webhooks", [("url", "javascript:alert(1)"), ("csrf", csrf)])
            #expect(bad.status == 400 && bad.body.contains("role=\"alert\""))
            #expect((try await context.api.call("GET", "/v1/apps/demo/webhooks", key: context.admin).body["webhooks"] as? [Any])?.count == 1)

            // A tampered cookie is no session.
            let jar = try String(contentsOfFile: browser.jar, encoding: .utf8)
            let tampered = Browser(base: context.api.base, jar: directory.path + "/tampered")
            try jar.replacingOccurrences(of: "herald_session\t", with: "herald_session\tX").write(
                toFile: tampered.jar, atomically: true, encoding: .utf8)
            #expect(try await tampered.get("/dashboard").status == 303)

            // Revoking the key ends its sessions.
            let id = try #require(second.split(separator: "_").dropFirst().first.map(String.init))
            #expect(try await context.api.call("DELETE", "/v1/keys/\(id)", key: context.admin).status == 204)
            #expect(try await browser.get("/dashboard").status == 303)
        }
    }

    @Test("pages: credentials with certificate expiry warnings, failures explained in plain words, HTML escaped")
    func pages() async throws {
        try await self.server.withServer { context in
            let keys = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            // App "certs" (never sent to: its credentials would point at Apple): a certificate that
            // expires in 10 days for production, a token key for development.
            #expect(
                try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"certs","bundleId":"com.example.certs"}"#).status
                    == 201)
            let key = directory.path + "/key.pem"
            let certificate = directory.path + "/cert.pem"
            let made = try await ProcessRunner.run(
                "openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", certificate,
                    "-days", "10", "-subj", "/CN=Apple Push Services: com.example.app",
                ])
            try #require(made.exitCode == 0, "\(made.standardError)")
            func jsonString(_ text: String) -> String {
                String(decoding: try! JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast().description
            }
            let certificateBody =
                #"{"certificate":\#(jsonString(try String(contentsOfFile: certificate, encoding: .utf8))),"privateKey":\#(jsonString(try String(contentsOfFile: key, encoding: .utf8)))}"#
            #expect(
                try await context.api.call("PUT", "/v1/apps/certs/credentials/production", key: context.admin, json: certificateBody).status == 204)
            let p8 = directory.path + "/AuthKey.p8"
            _ = try await ProcessRunner.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p8])
            let tokenBody =
                #"{"keyId":"ABC123DEFG","teamId":"TEAM123456","privateKey":\#(jsonString(try String(contentsOfFile: p8, encoding: .utf8)))}"#
            #expect(try await context.api.call("PUT", "/v1/apps/certs/credentials/development", key: context.admin, json: tokenBody).status == 204)

            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let apps = try await browser.get("/dashboard/apps")
            #expect(apps.body.contains("expires in 9 days") || apps.body.contains("expires in 10 days"), "\(apps.body)")
            #expect(apps.body.contains("token key <code>ABC123DEFG</code>, team <code>TEAM123456</code>"))
            #expect(!apps.body.contains("PRIVATE KEY"), "key material is never shown")

            // A device whose push failed: the device page says why, in plain words. The token is
            // registered for production but the device is a sandbox one (the built-in emulator
            // answers BadDeviceToken); the user id is markup.
            let token = try await self.server.virtualDevice(context)
            _ = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(token)", key: keys.send, json: #"{"environment":"production","userId":"<b>ann</b>"}"#
            )
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["\#(token)"]},"title":"Hi"}"#)
            _ = try await self.server.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            let device = try await browser.get("/dashboard/apps/demo/devices/\(token)")
            #expect(device.body.contains("BadDeviceToken"))
            #expect(device.body.contains("Wrong environment"))
            #expect(device.body.contains("&lt;b&gt;ann&lt;/b&gt;") && !device.body.contains("<b>ann</b>"))
            let search = try await browser.get("/dashboard/apps/demo/devices?by=prefix&q=\(token.prefix(6))")
            #expect(search.body.contains(String(token.prefix(16))))
            #expect(try await browser.get("/dashboard/apps/demo/devices/nothex").status == 400)
            #expect(try await browser.get("/dashboard/apps/nope/devices").status == 404)
            let overview = try await browser.get("/dashboard")
            #expect(overview.body.contains("<code>BadDeviceToken</code>"), "top failure reasons")
        }
    }

    @Test("a value with markup in it (a user id, a tag, a webhook URL) reaches every page escaped, through the real server")
    func markupEscaped() async throws {
        try await self.server.withServer { context in
            let keys = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let script = "<script>alert(1)</script>"
            let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
            let token = try await self.server.virtualDevice(context)
            let registered = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(token)", key: keys.send,
                json: #"{"environment":"sandbox","userId":"\#(script)","tags":["\#(script)"]}"#
            )
            #expect(registered.status == 200 || registered.status == 201, "\(registered.body)")
            let hook = try await context.api.call(
                "POST", "/v1/apps/demo/webhooks", key: context.admin, json: #"{"url":"https://example.com/hook?\#(script)"}"#)
            #expect(hook.status == 201, "\(hook.body)")

            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let query = script.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let pages = [
                ("devices", try await browser.get("/dashboard/apps/demo/devices")),
                ("search", try await browser.get("/dashboard/apps/demo/devices?by=user&q=\(query)")),
                ("device", try await browser.get("/dashboard/apps/demo/devices/\(token)")),
                ("app", try await browser.get("/dashboard/apps/demo")),
            ]
            for (name, page) in pages {
                #expect(page.status == 200, "\(name)")
                #expect(!page.body.contains(script), "\(name) shows the markup unescaped")
            }
            #expect(pages[0].1.body.contains("<td>\(escaped)</td><td>\(escaped)</td>"), "user and tag in the device list")
            #expect(pages[1].1.body.contains("value=\"\(escaped)\""), "the search field")
            #expect(pages[2].1.body.contains("<dd>\(escaped)</dd>"), "user on the device page")
            #expect(pages[3].1.body.contains("https://example.com/hook?\(escaped)"), "the webhook URL on the app page")
        }
    }

    @Test("the keys page shows each key's expiry and last use, never a secret, and a key's name escaped")
    func keysPage() async throws {
        try await self.server.withServer { context in
            _ = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            // Whole seconds: the page shows seconds.
            let expiry = (Int64(Date().timeIntervalSince1970) + 86_400) * 1000
            let made = try await context.api.call(
                "POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"demo","name":"<b>ops</b>","expiresAt":\#(expiry)}"#)
            let id = try #require(made.body["id"] as? String)
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let page = try await browser.get("/dashboard/keys")
            #expect(page.status == 200)
            let row = try #require(page.body.firstRange(of: "<tr data-key=\"\(id)\">").map { String(page.body[$0.lowerBound...].prefix(600)) })
            #expect(row.contains(#"<td class="name">&lt;b&gt;ops&lt;/b&gt;</td>"#), "\(row)")
            let expires = Date(timeIntervalSince1970: Double(expiry / 1000)).formatted(.iso8601).replacingOccurrences(of: "T", with: " ").dropLast()
            #expect(row.contains(#"<td class="expires">\#(expires)</td><td class="last-used">never</td><td class="state">active</td>"#), "\(row)")
            #expect(!page.body.contains(try #require(made.body["key"] as? String)), "the secret is never shown")
            // The admin key signing in was used just now.
            #expect(
                page.body.contains(
                    /<td class="name">initial admin<\/td><td>admin<\/td><td>every app<\/td><td>[^<]+<\/td><td class="expires">never<\/td><td class="last-used">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d<\/td>/
                ), "\(page.body)")
        }
    }

    @Test("static files carry a strong ETag (the SHA-256 of their bytes) and Cache-Control; a matching If-None-Match gets a bodiless 304")
    func staticFilesETag() async throws {
        try await self.server.withServer { context in
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            func header(_ name: String, _ headers: String) -> String? {
                headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                    .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
            }
            for file in ["dashboard.css", "dashboard.js"] {
                let first = try await browser.get("/dashboard/static/" + file)
                #expect(first.status == 200 && !first.body.isEmpty)
                let etag = try #require(header("ETag", first.headers), "\(first.headers)")
                let digest = SHA256.hash(data: Array(first.body.utf8)).map { String(format: "%02x", $0) }.joined()
                #expect(etag == "\"\(digest)\"", "a strong tag of the bytes served")
                #expect(header("Cache-Control", first.headers) == "no-cache")

                let unchanged = try await browser.call(["-X", "GET", "-H", "If-None-Match: \(etag)"], "/dashboard/static/" + file)
                #expect(unchanged.status == 304 && unchanged.body.isEmpty)
                #expect(header("ETag", unchanged.headers) == etag)
                #expect(
                    try await browser.call(["-X", "GET", "-H", "If-None-Match: \"other\", W/\(etag)"], "/dashboard/static/" + file).status == 304)
                let changed = try await browser.call(["-X", "GET", "-H", "If-None-Match: \"0000\""], "/dashboard/static/" + file)
                #expect(changed.status == 200 && changed.body == first.body)
            }
            #expect(try await browser.get("/dashboard/static/nope.css").status == 404)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import HeraldTesting
import Testing
import WebPush
import WebPushEmulator

@testable import HeraldServer

/// The dashboard's web side through a real socket (curl), with browsers of the built-in Web Push
/// emulator subscribed with the app's VAPID key: a browser's device in the lists and on its page
/// (the endpoint masked, its keys never shown), the app's VAPID key on its page (made on first
/// view) and a new one (an admin session's, CSRF-checked, audited), the web message in the send
/// preview, and the overview's count.
@Suite(.heavy) struct DashboardWebPushTests {
    let server = ServerTests()

    /// A page's text between `<tag … id="id">` and the next `<`.
    static func element(_ id: String, in page: String) -> String? {
        guard let start = page.range(of: "id=\"\(id)\">") else { return nil }
        return String(page[start.upperBound...].prefix { $0 != "<" })
    }

    /// A browser of the emulator subscribed with app `demo`'s key, registered (tag `web`): its
    /// subscription, its device's token (`wp:…`) and the endpoint as the API shows it (masked).
    func subscribed(
        _ context: ServerTests.Context, register: String
    ) async throws -> (emulator: WebPushEmulator, subscription: WebPushBrowserSubscription, token: String, masked: String) {
        let (emulator, subscription) = try await self.server.browser(context, register: register)
        let registered = try await context.api.call(
            "POST", "/v1/apps/demo/registrations", key: register,
            json: #"{"transport":"webpush","subscription":\#(self.server.subscriptionJSON(subscription)),"tags":["web"],"platform":"web"}"#)
        #expect(registered.status == 200, "\(registered.body)")
        return (
            emulator, subscription, try #require(registered.body["token"] as? String), try #require(registered.body["endpoint"] as? String)
        )
    }

    /// The web's audit records (`webpush.rotate`) of app `demo`.
    func rotations(_ context: ServerTests.Context) async throws -> [[String: Any]] {
        let audit = try await context.api.call("GET", "/v1/audit?app=demo", key: context.admin)
        return (audit.body["records"] as? [[String: Any]] ?? []).filter { $0["action"] as? String == "webpush.rotate" }
    }

    @Test(
        "a browser's device: platform Web (transport webpush) in the list, the search and its page, with its endpoint masked and never whole nor its keys; counted on the overview and the app's page"
    )
    func devices() async throws {
        try await self.server.withServer { context in
            let keys = try await self.server.setUp(context)
            let (_, subscription, token, masked) = try await self.subscribed(context, register: keys.register)
            #expect(token.hasPrefix("wp:") && masked.hasSuffix("…") && masked.count < subscription.endpoint.count)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard-web")
            defer { directory.remove() }
            let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)

            let list = try await browser.get("/dashboard/apps/demo/devices")
            #expect(list.status == 200 && list.body.contains("<td class=\"platform\">Web</td>"), "\(list.body)")
            #expect(list.body.contains("<div class=\"endpoint muted wrap\">\(masked)</div>"), "\(list.body)")
            let search = try await browser.get("/dashboard/apps/demo/devices?by=prefix&q=\(token.prefix(12))")
            #expect(search.body.contains("1 device found") && search.body.contains(String(token.prefix(16))), "\(search.body)")
            let page = try await browser.get("/dashboard/apps/demo/devices/\(token)")
            #expect(page.status == 200, "\(page.body)")
            #expect(page.body.contains("<dt>Platform</dt><dd>Web</dd><dt>Transport</dt><dd>webpush</dd>"), "\(page.body)")
            #expect(page.body.contains("<dt>Endpoint (masked)</dt><dd>\(masked)</dd>"), "\(page.body)")
            #expect(page.body.contains("/send?to=token&amp;target=\(token)"), "a test to this browser")
            for (name, shown) in [("list", list.body), ("search", search.body), ("device", page.body)] {
                #expect(!shown.contains(subscription.endpoint), "\(name) shows the whole endpoint")
                #expect(!shown.contains(subscription.p256dh) && !shown.contains(subscription.auth), "\(name) shows the subscription's keys")
            }

            let overview = try await browser.get("/dashboard")
            #expect(overview.body.contains("Web Push (browsers)</span><span class=\"value\" id=\"devices-webpush\">1<"), "\(overview.body)")
            #expect(overview.body.contains("id=\"devices-apns\">0<") && overview.body.contains("id=\"devices-fcm\">0<"))
            #expect(overview.body.contains("0 APNs, 0 FCM, 1 Web Push active devices"), "\(overview.body)")
            let app = try await browser.get("/dashboard/apps/demo")
            #expect(Self.element("webpush-browsers", in: app.body) == "1", "\(app.body)")
        }
    }

    @Test(
        "the app's page: the VAPID public key made on first view (the API's key), never the private one; a new key from an admin session with its CSRF token, audited webpush.rotate, with the warning"
    )
    func vapidKey() async throws {
        let master = SecretBox.generateMasterKey()
        try await self.server.withServer(configure: { $0.masterKey = master }) { context in
            _ = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard-web")
            defer { directory.remove() }
            let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            #expect(try await context.server.store.credentials(appID: "demo")[.webpush] == nil, "no key before anyone asks")

            // Made on first view, stored sealed: the page shows its public half, the API's.
            let page = try await browser.get("/dashboard/apps/demo")
            #expect(page.status == 200, "\(page.body)")
            let shown = try #require(Self.element("webpush-key", in: page.body), "\(page.body)")
            let api = try await context.api.call("GET", "/v1/apps/demo/webpush/key", key: context.admin)
            #expect(api.body["publicKey"] as? String == shown)
            #expect(Base64URL.decode(shown)?.count == 65)
            #expect(Self.element("webpush-browsers", in: page.body) == "0")
            #expect(page.body.contains("must subscribe again") && page.body.contains("id=\"webpush-rotate\">New key</button>"))
            let secrets = try SecretBox(masterKey: master)
            let sealed = try #require(try await context.server.store.credentials(appID: "demo")[.webpush])
            let privateKey = try VAPIDKeys.open(sealed, secrets: secrets).rawRepresentation
            #expect(try VAPIDKeys.open(sealed, secrets: secrets).publicKeyBase64URL == shown)
            func showsPrivateKey(_ body: String) -> Bool {
                let hex = privateKey.map { String(format: "%02x", $0) }.joined()
                return [Base64URL.encode(privateKey), Data(privateKey).base64EncodedString(), hex].contains { body.contains($0) }
            }
            #expect(!showsPrivateKey(page.body), "the private key is never shown")
            // Viewed again: the same key.
            #expect(Self.element("webpush-key", in: try await browser.get("/dashboard/apps/demo").body) == shown)
            let csrf = try #require(DashboardTests.Browser.csrf(page.body))

            // Without the form's CSRF token: refused, nothing changed.
            let forged = try await browser.post("/dashboard/apps/demo/webpush/key", [("csrf", "0" + csrf.dropFirst())])
            #expect(forged.status == 403)
            #expect(try await context.server.store.credentials(appID: "demo")[.webpush] == sealed)
            #expect(try await self.rotations(context).isEmpty)

            // A new key: shown at once, the API's now, audited with the session's key.
            let rotated = try await browser.post("/dashboard/apps/demo/webpush/key", [("csrf", csrf)])
            #expect(rotated.status == 200, "\(rotated.body)")
            #expect(rotated.body.contains("id=\"webpush-notice\">New VAPID key made."), "\(rotated.body)")
            let next = try #require(Self.element("webpush-key", in: rotated.body))
            #expect(next != shown && Base64URL.decode(next)?.count == 65)
            #expect((try await context.api.call("GET", "/v1/apps/demo/webpush/key", key: context.admin)).body["publicKey"] as? String == next)
            let nextSealed = try #require(try await context.server.store.credentials(appID: "demo")[.webpush])
            #expect(nextSealed != sealed)
            let nextPrivate = try VAPIDKeys.open(nextSealed, secrets: secrets).rawRepresentation
            #expect(!rotated.body.contains(Base64URL.encode(nextPrivate)) && !showsPrivateKey(rotated.body))
            let records = try await self.rotations(context)
            let adminID = try #require(context.admin.split(separator: "_").dropFirst().first.map(String.init))
            #expect(records.count == 1 && records.first?["keyId"] as? String == adminID && records.first?["appId"] as? String == "demo", "\(records)")
        }
    }

    @Test(
        "a register key, a send key or an admin key bound to the app opens no dashboard session, so none can make a new VAPID key there: the key is unchanged and nothing is audited"
    )
    func rotationNeedsAnAdminSession() async throws {
        try await self.server.withServer { context in
            let keys = try await self.server.setUp(context)
            let made = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"admin","appId":"demo"}"#)
            let appAdmin = try #require(made.body["key"] as? String, "\(made.body)")
            let key = try await context.api.call("GET", "/v1/apps/demo/webpush/key", key: keys.register)
            let before = try #require(key.body["publicKey"] as? String)
            let sealed = try await context.server.store.credentials(appID: "demo")[.webpush]
            let directory = try TemporaryDirectory(prefix: "herald-dashboard-web")
            defer { directory.remove() }
            for (name, token) in [("register", keys.register), ("send", keys.send), ("app-bound admin", appAdmin)] {
                let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/\(name)")
                let signIn = try await browser.post("/dashboard/login", [("key", token)])
                #expect(signIn.status == 401 || signIn.status == 403, "\(name): \(signIn.status)")
                // The form without a session (its sign-in refused), and with the key as a bearer
                // token: sent to sign in, nothing done.
                let posted = try await browser.post("/dashboard/apps/demo/webpush/key", [("csrf", "x")])
                #expect(posted.status == 303 && posted.headers.lowercased().contains("location: /dashboard/login"), "\(name): \(posted.status)")
                let bearer = try await browser.call(
                    ["-X", "POST", "-H", "authorization: Bearer \(token)", "--data-urlencode", "csrf=x"], "/dashboard/apps/demo/webpush/key")
                #expect(bearer.status == 303 && bearer.headers.lowercased().contains("location: /dashboard/login"), "\(name): \(bearer.status)")
                #expect(try await browser.get("/dashboard/apps/demo").status == 303, "\(name) sees no app page")
            }
            #expect(try await context.server.store.credentials(appID: "demo")[.webpush] == sealed)
            #expect((try await context.api.call("GET", "/v1/apps/demo/webpush/key", key: keys.register)).body["publicKey"] as? String == before)
            #expect(try await self.rotations(context).isEmpty)
        }
    }

    @Test(
        "the send form: Web among the platforms; the preview shows the exact message a browser decrypts (what the browser got, byte for byte), and why none would go to browsers in the refusal's own words"
    )
    func sendPreview() async throws {
        try await self.server.withServer { context in
            let keys = try await self.server.setUp(context)
            let (emulator, subscription, token, _) = try await self.subscribed(context, register: keys.register)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard-web")
            defer { directory.remove() }
            let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let form = try await browser.get("/dashboard/apps/demo/send?to=token&target=\(token)")
            #expect(form.body.contains("<option value=\"webpush\">Web Push (browsers) only</option>"), "\(form.body)")
            #expect(form.body.contains("id=\"preview-web\">") && form.body.contains("id=\"preview-web-note\">"))
            let csrf = try #require(DashboardTests.Browser.csrf(form.body))
            func preview(_ fields: [(String, String)]) async throws -> [String: Any] {
                let answer = try await browser.post("/dashboard/apps/demo/preview", fields + [("csrf", csrf)])
                return try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any], "\(answer.body)")
            }
            let fields = [
                ("to", "token"), ("target", token), ("title", "Order shipped"), ("body", "It left the warehouse"), ("badge", "2"),
                ("custom", #"{"order":42}"#),
            ]
            let shown = try await preview(fields)
            let web = try #require(shown["web"] as? String, "\(shown)")
            let message = try #require(try JSONSerialization.jsonObject(with: Data(web.utf8)) as? [String: Any])
            #expect(message["web_push"] as? Int == 8030 && message["app_badge"] as? Int == 2 && message["mutable"] as? Bool == true, "\(web)")
            let notification = try #require(message["notification"] as? [String: Any])
            #expect(notification["title"] as? String == "Order shipped" && notification["body"] as? String == "It left the warehouse")
            #expect((notification["data"] as? [String: Any])?["order"] as? Int == 42, "\(web)")
            #expect(
                shown["webNote"] as? String
                    == "\(web.utf8.count) bytes: the Declarative Web Push message each browser decrypts (encrypted to each subscription, RFC 8291).")

            // Sent from the form: the browser decrypts what the preview showed, its receipt id in
            // place of the placeholder.
            let sent = try await browser.post("/dashboard/apps/demo/send", fields + [("action", "send"), ("csrf", csrf)])
            #expect(sent.status == 303, "\(sent.status) \(sent.body)")
            let inbox = try await self.server.eventually(
                "the browser's message", { emulator.inbox(subscription.id) }, until: { ($0?.messages.count ?? 0) >= 1 })
            let plaintext = String(decoding: try #require(inbox?.messages.first?.plaintext), as: UTF8.self)
            let hr = (try JSONSerialization.jsonObject(with: Data(plaintext.utf8)) as? [String: Any])?["hr"] as? String
            #expect(web.replacingOccurrences(of: "<receipt id of each device>", with: hr ?? "") == plaintext, "\(web) vs \(plaintext)")
            let location = try #require(
                sent.headers.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("location:") }.map {
                    $0.dropFirst("location:".count).trimmingCharacters(in: .whitespacesAndNewlines)
                })
            let log = try await self.server.eventually(
                "the web delivery sent", { try await browser.get(location).body }, until: { $0.contains("<span class=\"state sent\">sent</span>") })
            #expect(log.contains("<td class=\"platform\">Web</td>"), "\(log)")

            // No title: not for browsers, as the API's refusal says it.
            let refusal = { (json: String) async throws -> String in
                let answer = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: json)
                return try #require((answer.body["error"] as? [String: Any])?["message"] as? String, "\(answer.body)")
            }
            let untitled = try await preview([("to", "token"), ("target", token), ("body", "x")])
            let needsTitle = try await refusal(#"{"audience":{"tags":["web"]},"body":"x","transports":["webpush"]}"#)
            #expect(untitled["ok"] as? Bool == true && untitled["web"] as? String == "", "\(untitled)")
            #expect(
                untitled["webNote"] as? String == "Not for browsers: browsers would refuse it (webpush_needs_title): \(needsTitle).", "\(untitled)")
            // Too large for one encrypted record (not for APNs).
            let long = String(repeating: "x", count: 3950)
            let large = try await preview([("to", "token"), ("target", token), ("title", "t"), ("body", long)])
            let tooLarge = try await refusal(#"{"audience":{"tags":["web"]},"title":"t","body":"\#(long)","transports":["webpush"]}"#)
            #expect(large["ok"] as? Bool == true && large["web"] as? String == "", "\(large)")
            #expect(large["webNote"] as? String == "Not for browsers: browsers would refuse it (webpush_too_large): \(tooLarge).", "\(large)")
            // What only APNs carries, and the platforms chosen.
            let voip = try await preview([("to", "user"), ("target", "ann"), ("pushType", "voip"), ("custom", #"{"call":"1"}"#)])
            #expect(voip["webNote"] as? String == "Not for browsers: push type voip is APNs's alone.", "\(voip)")
            let apnsOnly = try await preview(fields + [("transports", "apns")])
            #expect(apnsOnly["webNote"] as? String == "Not for browsers: sent to APNs devices only, as asked.", "\(apnsOnly)")
            let webOnly = try await preview(fields + [("transports", "webpush")])
            #expect(webOnly["web"] as? String == web, "\(webOnly)")
            #expect(webOnly["androidNote"] as? String == "Not for Android: sent to Web Push devices only, as asked.", "\(webOnly)")
            let page = try await browser.post(
                "/dashboard/apps/demo/send", fields + [("transports", "webpush"), ("action", "preview"), ("csrf", csrf)])
            #expect(page.body.contains("<option value=\"webpush\" selected>"), "\(page.body)")
            #expect(page.body.contains("id=\"preview-web\">{&quot;web_push&quot;:8030,"), "\(page.body)")
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird
import HTTPTypes
import NIOCore
import SwiftASN1
import X509

/// The dashboard at `/dashboard`: server-rendered HTML (readable without JavaScript), a little
/// plain JavaScript for the live parts (the send form's preview, the emulated phone).
///
/// Sign-in takes an admin key and gives a session cookie (HttpOnly, SameSite=Strict) that is
/// signed with a key derived from the master key, so every process of a shared database accepts
/// it and a revoked admin key ends its sessions at once. Every form carries a CSRF token derived
/// from the session.
struct Dashboard: Sendable {
    let api: API
    let clients: ClientProvider
    let emulator: APNSEmulator?
    let engineConfiguration: DeliveryEngine.Configuration

    var store: any HeraldStore { self.api.store }
    static let cookie = "herald_session"
    static let sessionSeconds: Int64 = 12 * 3600

    struct Session: Sendable {
        var key: StoredAPIKey
        var csrf: String
    }

    func register(on router: Router<APIRequestContext>) {
        let group = router.group("dashboard")
        group.get("static/:file") { _, context in
            let name = context.parameters.get("file") ?? ""
            let types = ["dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"]
            guard let type = types[name], let url = Bundle.module.url(forResource: "Dashboard/" + name, withExtension: nil),
                let data = try? Data(contentsOf: url)
            else { throw HeraldError.notFound("file") }
            var headers = HTTPFields()
            headers[.contentType] = type
            headers[.cacheControl] = "no-cache"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        }
        group.get("login") { request, _ in
            if try await self.session(request) != nil { return Self.redirect("/dashboard") }
            return self.loginPage(error: nil)
        }
        group.post("login") { request, _ in
            let form = try await Self.form(request)
            let token = (form["key"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            guard let id = APIKeySecret.id(of: token), let key = try await self.store.apiKey(id: id), APIKeySecret.matches(token, hash: key.hash),
                key.scope == .admin
            else {
                return self.loginPage(error: "That is not an admin key of this server.", status: .unauthorized)
            }
            let expires = self.api.clock.nowMilliseconds / 1000 + Self.sessionSeconds
            let value = "\(key.id).\(expires).\(self.mac("session|\(key.id)|\(expires)"))"
            var response = Self.redirect("/dashboard")
            // Behind a TLS-terminating proxy the cookie is marked for https only.
            let secure = request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased() == "https" ? "; Secure" : ""
            response.headers[.setCookie] = "\(Self.cookie)=\(value); Path=/dashboard; Max-Age=\(Self.sessionSeconds); HttpOnly; SameSite=Strict\(secure)"
            return response
        }
        group.post("logout") { request, _ in
            _ = try await self.authorized(request, form: try await Self.form(request))
            var response = Self.redirect("/dashboard/login")
            response.headers[.setCookie] = "\(Self.cookie)=; Path=/dashboard; Max-Age=0; HttpOnly; SameSite=Strict"
            return response
        }
        group.get("") { request, _ in try await self.page(request) { try await self.overview($0) } }
        group.get("apps") { request, _ in try await self.page(request) { try await self.appsPage($0) } }
        group.get("apps/:app") { request, context in
            try await self.page(request) { session in try await self.appPage(session, app: try await self.app(context), secret: nil) }
        }
        group.post("apps/:app/webhooks") { request, context in
            let form = try await Self.form(request)
            let session = try await self.authorized(request, form: form)
            let app = try await self.app(context)
            let types = Set(DeliveryEventType.allCases.filter { form["event." + $0.rawValue] != nil })
            do {
                let (webhook, secret) = try self.api.webhooks.newWebhook(appID: app.id, url: form["url"], types: types.isEmpty ? EventTypes.defaultWebhookTypes : types)
                try await self.store.createWebhook(webhook)
                self.api.events.webhooksChanged()
                return Self.html(try await self.appPage(session, app: app, secret: (webhook.id, secret)), title: app.id, session: session)
            } catch let error as HeraldError {
                return Self.html(try await self.appPage(session, app: app, secret: nil, error: error.message), title: app.id, session: session, status: .badRequest)
            }
        }
        group.post("apps/:app/webhooks/:id/delete") { request, context in
            _ = try await self.authorized(request, form: try await Self.form(request))
            let app = try await self.app(context)
            _ = try await self.store.deleteWebhook(appID: app.id, id: context.parameters.get("id") ?? "")
            self.api.events.webhooksChanged()
            return Self.redirect("/dashboard/apps/\(Self.path(app.id))")
        }
        group.get("apps/:app/devices") { request, context in
            try await self.page(request) { session in try await self.devicesPage(session, app: try await self.app(context), request: request) }
        }
        group.get("apps/:app/devices/:token") { request, context in
            try await self.page(request) { session in
                try await self.devicePage(session, app: try await self.app(context), token: context.parameters.get("token") ?? "")
            }
        }
        group.get("apps/:app/send") { request, context in
            try await self.page(request) { session in
                let query = request.uri.queryParameters
                var form: [String: String] = [:]
                for key in ["to", "target", "title", "body"] { if let value = query[Substring(key)] { form[key] = String(value) } }
                return try await self.sendPage(session, app: try await self.app(context), form: form, outcome: nil)
            }
        }
        group.post("apps/:app/send") { request, context in
            let form = try await Self.form(request)
            let session = try await self.authorized(request, form: form)
            let app = try await self.app(context)
            let now = self.api.clock.nowMilliseconds
            do {
                let body = try Self.notificationBody(form)
                let spec = try NotificationRequest.parse(body, now: now)
                if form["action"] == "preview" {
                    return Self.html(try await self.sendPage(session, app: app, form: form, outcome: nil), title: "Send a test", session: session)
                }
                let created = try await self.store.createNotification(appID: app.id, id: UUIDText.random(), bundleID: app.bundleID, spec, now: now)
                self.api.engine.ring()
                return Self.redirect("/dashboard/apps/\(Self.path(app.id))/notifications/\(Self.path(created.id))")
            } catch let error as HeraldError {
                return Self.html(
                    try await self.sendPage(session, app: app, form: form, outcome: "\(error.code): \(error.message)"), title: "Send a test", session: session,
                    status: .unprocessableContent
                )
            }
        }
        group.post("apps/:app/preview") { request, context in
            let form = try await Self.form(request)
            _ = try await self.authorized(request, form: form)
            let app = try await self.app(context)
            return API.json(.ok, Self.preview(form, app: app, now: self.api.clock.nowMilliseconds))
        }
        group.get("apps/:app/notifications/:id") { request, context in
            try await self.page(request) { session in
                try await self.notificationPage(session, app: try await self.app(context), id: context.parameters.get("id") ?? "")
            }
        }
        group.get("emulator") { request, _ in try await self.page(request) { try await self.emulatorPage($0, error: nil) } }
        group.post("emulator/devices") { request, _ in
            let form = try await Self.form(request)
            let session = try await self.authorized(request, form: form)
            guard let emulator = self.emulator else { throw HeraldError.notFound("the built-in emulator (Apple credentials are configured)") }
            guard let app = try await self.store.app(form["app"] ?? "") else {
                return Self.html(try await self.emulatorPage(session, error: "Choose an app."), title: "Emulator", session: session, status: .badRequest)
            }
            let environment = form["environment"] == "production" ? APNSEnvironment.production : .development
            let now = self.api.clock.nowMilliseconds
            let device = emulator.state.createDevice(bundleID: app.bundleID, environment: environment, kind: .device, now: now)
            let user = (form["user"] ?? "").trimmingCharacters(in: .whitespaces)
            let tags = (form["tags"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            do {
                let body = JSONValue.object([
                    ("environment", .string(environment == .development ? "sandbox" : "production")),
                    ("userId", user.isEmpty ? .null : .string(user)), ("tags", .array(tags.map(JSONValue.string))), ("platform", "iOS"),
                ])
                let registration = try DevicesController.registration(try APIRequestDecoder.decode(DeviceRegistrationRequest.self, json: body), token: try Validate.token(device.token))
                _ = try await self.store.register(appID: app.id, registration, now: now)
            } catch let error as HeraldError {
                emulator.state.removeDevice(token: device.token)
                return Self.html(try await self.emulatorPage(session, error: error.message), title: "Emulator", session: session, status: .badRequest)
            }
            return Self.redirect("/dashboard/emulator/\(device.token)")
        }
        group.get("emulator/:token") { request, context in
            try await self.page(request) { session in try await self.phonePage(session, token: context.parameters.get("token") ?? "") }
        }
        group.get("emulator/:token/stream") { request, context in
            guard try await self.session(request) != nil else { throw HeraldError.unauthorized }
            return try self.phoneStream(token: context.parameters.get("token") ?? "")
        }
    }

    // MARK: sessions

    func mac(_ text: String) -> String {
        APIKeySecret.hex(self.api.secrets.authenticationCode(Array(text.utf8), purpose: "herald dashboard"))
    }

    /// The signed-in admin, from the session cookie: signature, expiry and the key still valid.
    func session(_ request: Request) async throws -> Session? {
        guard let value = request.cookies[Self.cookie]?.value else { return nil }
        let parts = value.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let expires = Int64(parts[1]), expires > self.api.clock.nowMilliseconds / 1000,
            Self.constantTimeEqual(parts[2], self.mac("session|\(parts[0])|\(expires)")),
            let key = try await self.store.apiKey(id: parts[0]), key.scope == .admin
        else { return nil }
        return Session(key: key, csrf: self.mac("csrf|\(value)"))
    }

    /// A state-changing request: a session and its CSRF token (a form field or `X-CSRF-Token`).
    func authorized(_ request: Request, form: [String: String]) async throws -> Session {
        guard let session = try await self.session(request) else { throw HeraldError.unauthorized }
        let presented = form["csrf"] ?? request.headers[HTTPField.Name("X-CSRF-Token")!] ?? ""
        guard Self.constantTimeEqual(presented, session.csrf) else {
            throw HeraldError.forbidden("the form is stale or came from another site (CSRF check failed): reload the page")
        }
        return session
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }

    /// A page for a signed-in admin; others are sent to sign in.
    func page(_ request: Request, _ body: (Session) async throws -> String) async throws -> Response {
        guard let session = try await self.session(request) else { return Self.redirect("/dashboard/login") }
        do {
            return Self.html(try await body(session), title: nil, session: session)
        } catch let error as HeraldError where error.code == "not_found" {
            return Self.html("<h1>Not found</h1><p>\(Self.escape(error.message))</p>", title: "Not found", session: session, status: .notFound)
        }
    }

    func app(_ context: APIRequestContext) async throws -> App {
        let id = context.parameters.get("app") ?? ""
        guard let app = try await self.store.app(id) else { throw HeraldError.notFound("app '\(id)'") }
        return app
    }

    // MARK: pages

    func loginPage(error: String?, status: HTTPResponse.Status = .ok) -> Response {
        let body = """
            <section class="narrow">
            <h1>Sign in to Herald</h1>
            \(error.map { "<p class=\"error\" role=\"alert\">\(Self.escape($0))</p>" } ?? "")
            <form method="post" action="/dashboard/login">
              <label for="key">Admin API key</label>
              <input id="key" name="key" type="password" autocomplete="current-password" required placeholder="hk_…">
              <button type="submit">Sign in</button>
            </form>
            <p class="hint">The key printed by the first <code>herald serve</code>, or one made with <code>herald keys create --scope admin</code>.</p>
            </section>
            """
        return Self.html(body, title: "Sign in", session: nil, status: status)
    }

    func overview(_ session: Session) async throws -> String {
        let minutes = self.api.events.lastHour()
        let pending = (try? await self.store.pendingDeliveries()) ?? 0
        let connections = await self.clients.connections()
        var reasons: [String: Int] = [:]
        for minute in minutes { reasons.merge(minute.reasons, uniquingKeysWith: +) }
        let totals = minutes.reduce(into: (sent: 0, failed: 0, retried: 0)) { $0.sent += $1.sent; $0.failed += $1.failed; $0.retried += $1.retried }
        let top = reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(10)
        let apps = try await self.store.apps()
        return """
            <h1>Overview</h1>
            <div class="cards">
              <div class="card"><span class="label">Sent, last hour</span><span class="value" id="sent-hour">\(totals.sent)</span></div>
              <div class="card"><span class="label">Failed, last hour</span><span class="value">\(totals.failed)</span></div>
              <div class="card"><span class="label">Retried, last hour</span><span class="value">\(totals.retried)</span></div>
              <div class="card"><span class="label">Queue depth</span><span class="value" id="queue-depth">\(pending)</span></div>
              <div class="card"><span class="label">APNs connections</span><span class="value">\(connections.reduce(0) { $0 + $1.open })</span></div>
            </div>
            <h2>Sends per minute, last hour</h2>
            \(Self.chart(minutes))
            <div class="columns">
            <section><h2>Top failure reasons</h2>
            \(top.isEmpty ? "<p>No failures in the last hour.</p>" : "<table><thead><tr><th scope=\"col\">Reason</th><th scope=\"col\">Count</th><th scope=\"col\">What it means</th></tr></thead><tbody>" + top.map { "<tr><td><code>\(Self.escape($0.key))</code></td><td>\($0.value)</td><td>\(Self.escape(Self.explain($0.key)))</td></tr>" }.joined() + "</tbody></table>")
            </section>
            <section><h2>APNs connections</h2>
            \(connections.isEmpty ? "<p>None yet: a client connects on its app's first push.</p>" : "<table><thead><tr><th scope=\"col\">App</th><th scope=\"col\">Environment</th><th scope=\"col\">Open</th></tr></thead><tbody>" + connections.map { "<tr><td>\(Self.escape($0.appID))</td><td>\(Self.escape(Self.environmentName($0.environment)))</td><td>\($0.open)</td></tr>" }.joined() + "</tbody></table>")
            </section>
            </div>
            <h2>Apps</h2>
            \(apps.isEmpty ? "<p>No apps yet: <code>POST /v1/apps</code> creates one.</p>" : "<ul class=\"links\">" + apps.map { "<li><a href=\"/dashboard/apps/\(Self.path($0.id))\">\(Self.escape($0.id))</a> <span class=\"muted\">\(Self.escape($0.bundleID))</span></li>" }.joined() + "</ul>")
            <p class="hint">Counts are this process's (each Herald process of a shared database charts its own share).</p>
            """
    }

    /// Stacked bars (sent, retried, failed) per minute, with a table for screen readers.
    static func chart(_ minutes: [DeliveryEvents.Minute]) -> String {
        let width = 600.0
        let height = 160.0
        let highest = minutes.map { $0.sent + $0.failed + $0.retried }.max() ?? 0
        let peak = max(1, highest)
        let slot = width / Double(max(1, minutes.count))
        var bars = ""
        for (index, minute) in minutes.enumerated() {
            var y = height
            let x = Double(index) * slot
            for (count, kind) in [(minute.sent, "sent"), (minute.retried, "retried"), (minute.failed, "failed")] where count > 0 {
                let h = max(1, height * Double(count) / Double(peak))
                y -= h
                bars += "<rect class=\"\(kind)\" x=\"\(Self.number(x + 1))\" y=\"\(Self.number(y))\" width=\"\(Self.number(slot - 2))\" height=\"\(Self.number(h))\"><title>\(count) \(kind), \(Self.clock(minute.minute * 60_000))</title></rect>"
            }
        }
        let totals = minutes.reduce(into: (0, 0, 0)) { $0.0 += $1.sent; $0.1 += $1.retried; $0.2 += $1.failed }
        let rows = minutes.filter { $0.sent + $0.failed + $0.retried > 0 }.map {
            "<tr><td>\(Self.clock($0.minute * 60_000))</td><td>\($0.sent)</td><td>\($0.retried)</td><td>\($0.failed)</td></tr>"
        }.joined()
        return """
            <figure class="chart">
            <svg viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="Sends per minute over the last hour: \(totals.0) sent, \(totals.1) retried, \(totals.2) failed; the highest minute had \(highest)">\(bars)<line x1="0" y1="\(Int(height))" x2="\(Int(width))" y2="\(Int(height))" class="axis"/></svg>
            <figcaption><span class="key sent"></span> sent <span class="key retried"></span> retried <span class="key failed"></span> failed · peak \(highest)/min</figcaption>
            </figure>
            <details><summary>The numbers</summary>\(rows.isEmpty ? "<p>Nothing sent in the last hour.</p>" : "<table><thead><tr><th scope=\"col\">Minute (UTC)</th><th scope=\"col\">Sent</th><th scope=\"col\">Retried</th><th scope=\"col\">Failed</th></tr></thead><tbody>\(rows)</tbody></table>")</details>
            """
    }

    func appsPage(_ session: Session) async throws -> String {
        var rows = ""
        for app in try await self.store.apps() {
            let credentials = try await self.credentialSummaries(app)
            rows += "<tr><td><a href=\"/dashboard/apps/\(Self.path(app.id))\">\(Self.escape(app.id))</a></td><td><code>\(Self.escape(app.bundleID))</code></td>"
            for summary in credentials { rows += "<td>\(summary)</td>" }
            rows += "</tr>"
        }
        return """
            <h1>Apps and credentials</h1>
            \(rows.isEmpty ? "<p>No apps yet.</p>" : "<table><thead><tr><th scope=\"col\">App</th><th scope=\"col\">Bundle id</th><th scope=\"col\">Sandbox (development)</th><th scope=\"col\">Production</th></tr></thead><tbody>\(rows)</tbody></table>")
            <p class="hint">Key material is stored encrypted and never shown; credentials are set with <code>PUT /v1/apps/{app}/credentials/{environment}</code>.</p>
            """
    }

    /// One cell per environment (development, production): what credential it has, with warnings.
    func credentialSummaries(_ app: App) async throws -> [String] {
        let sealed = try await self.store.credentials(appID: app.id)
        let now = Date(timeIntervalSince1970: Double(self.api.clock.nowMilliseconds) / 1000)
        return [APNSEnvironment.development, .production].map { environment in
            guard let bytes = sealed[environment] else {
                return self.emulator == nil ? "<span class=\"warn\">not configured</span>" : "built-in emulator"
            }
            guard let opened = try? self.api.secrets.open(bytes), let material = try? CredentialCoding.decode(opened) else {
                return "<span class=\"bad\">unreadable (another master key?)</span>"
            }
            switch material {
            case .token(let keyID, let teamID, _, let restriction):
                var text = "token key <code>\(Self.escape(keyID))</code>, team <code>\(Self.escape(teamID))</code>"
                if let restriction { text += " (restricted to \(Self.escape(Self.environmentName(restriction.rawValue))))" }
                return text
            case .certificate(let pem, _):
                guard let certificate = try? Certificate(pemEncoded: pem) else { return "<span class=\"bad\">certificate unreadable</span>" }
                let expiry = certificate.notValidAfter
                let days = Int(expiry.timeIntervalSince(now) / 86_400)
                let date = expiry.formatted(.iso8601).prefix(10)
                if days < 0 { return "certificate <span class=\"bad\">expired on \(date)</span>" }
                if days < 30 { return "certificate <span class=\"warn\">expires in \(days) days (\(date))</span>" }
                return "certificate, valid until \(date)"
            }
        }
    }

    func appPage(_ session: Session, app: App, secret: (id: String, secret: String)?, error: String? = nil) async throws -> String {
        let credentials = try await self.credentialSummaries(app)
        let hooks = try await self.store.webhooks(appID: app.id)
        var hookRows = ""
        for hook in hooks {
            let messages = try await self.store.webhookMessages(webhookID: hook.id, limit: 5)
            let recent = messages.map { message in
                let state = message.state == .delivered ? "delivered" : message.state == .expired ? "expired" : "pending"
                let detail = message.lastError.map { " — " + Self.escape($0) } ?? message.lastStatus.map { " — HTTP \($0)" } ?? ""
                return "<li><span class=\"state \(state)\">\(state)</span> \(message.events) event\(message.events == 1 ? "" : "s"), \(message.attempts) attempt\(message.attempts == 1 ? "" : "s")\(detail)</li>"
            }.joined()
            hookRows += """
                <tr><td><code>\(Self.escape(hook.id))</code></td><td class="wrap">\(Self.escape(hook.url))</td>
                <td>\(DeliveryEventType.allCases.filter(hook.types.contains).map { Self.escape($0.rawValue) }.joined(separator: "<br>"))</td>
                <td>\(recent.isEmpty ? "none yet" : "<ul class=\"plain\">\(recent)</ul>")</td>
                <td><form method="post" action="/dashboard/apps/\(Self.path(app.id))/webhooks/\(Self.path(hook.id))/delete">\(Self.csrfField(session))<button type="submit" class="secondary">Delete</button></form></td></tr>
                """
        }
        let notifications = try await self.store.notifications(appID: app.id, limit: 20, before: nil)
        let recent = notifications.map { n in
            "<tr><td><a href=\"/dashboard/apps/\(Self.path(app.id))/notifications/\(Self.path(n.id))\"><code>\(Self.escape(String(n.id.prefix(8))))</code></a></td><td>\(Self.time(n.createdAt))</td><td>\(n.audienceSize)</td><td>\(n.cancelledAt != nil ? "cancelled" : n.expanding ? "expanding" : "")</td></tr>"
        }.joined()
        return """
            <h1>\(Self.escape(app.id)) <span class="muted">\(Self.escape(app.bundleID))</span></h1>
            <nav class="actions" aria-label="App">
              <a class="button" href="/dashboard/apps/\(Self.path(app.id))/send">Send a test</a>
              <a class="button secondary" href="/dashboard/apps/\(Self.path(app.id))/devices">Devices</a>
            </nav>
            <h2>Credentials</h2>
            <dl class="pairs"><dt>Sandbox (development)</dt><dd>\(credentials[0])</dd><dt>Production</dt><dd>\(credentials[1])</dd></dl>
            <h2>Recent notifications</h2>
            \(recent.isEmpty ? "<p>None yet.</p>" : "<table><thead><tr><th scope=\"col\">Id</th><th scope=\"col\">Created (UTC)</th><th scope=\"col\">Audience</th><th scope=\"col\">State</th></tr></thead><tbody>\(recent)</tbody></table>")
            <h2 id="webhooks">Webhooks</h2>
            \(error.map { "<p class=\"error\" role=\"alert\">\(Self.escape($0))</p>" } ?? "")
            \(secret.map { "<div class=\"notice\" role=\"status\"><p>Webhook <code>\(Self.escape($0.id))</code> created. Its signing secret is shown this once:</p><p><code id=\"webhook-secret\">\(Self.escape($0.secret))</code></p><p class=\"hint\">Verify <code>Herald-Signature: t=…,v1=…</code> as the hex HMAC-SHA256 of <code>t + \".\" + body</code> under this secret.</p></div>" } ?? "")
            \(hookRows.isEmpty ? "<p>No webhooks.</p>" : "<table><thead><tr><th scope=\"col\">Id</th><th scope=\"col\">URL</th><th scope=\"col\">Events</th><th scope=\"col\">Recent messages</th><th scope=\"col\"><span class=\"visually-hidden\">Actions</span></th></tr></thead><tbody>\(hookRows)</tbody></table>")
            <form method="post" action="/dashboard/apps/\(Self.path(app.id))/webhooks" class="inline-form">
              \(Self.csrfField(session))
              <label for="webhook-url">URL</label>
              <input id="webhook-url" name="url" type="url" required placeholder="https://example.com/herald">
              <fieldset><legend>Events</legend>
              \(DeliveryEventType.allCases.map { "<label><input type=\"checkbox\" name=\"event.\($0.rawValue)\"\($0 == .sent ? "" : " checked")> \($0.rawValue)</label>" }.joined(separator: " "))
              </fieldset>
              <button type="submit">Add webhook</button>
            </form>
            """
    }

    func devicesPage(_ session: Session, app: App, request: Request) async throws -> String {
        let query = request.uri.queryParameters
        let by = query["by"].map(String.init) ?? "user"
        let text = (query["q"].map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
        var devices: [Device] = []
        if !text.isEmpty {
            var filter = DeviceQuery(limit: 200)
            switch by {
            case "tag": filter.tag = text
            case "prefix": filter.tokenPrefix = text.lowercased()
            default: filter.userID = text
            }
            devices = try await self.store.devices(appID: app.id, filter)
        } else {
            devices = try await self.store.devices(appID: app.id, DeviceQuery(limit: 50))
        }
        let rows = devices.map { device in
            let r = device.registration
            return "<tr><td><a href=\"/dashboard/apps/\(Self.path(app.id))/devices/\(r.token.hex)\"><code>\(Self.escape(String(r.token.hex.prefix(16))))…</code></a></td><td>\(Self.escape(r.kind.rawValue))</td><td>\(r.environment == .development ? "sandbox" : "production")</td><td>\(Self.escape(r.userID ?? "—"))</td><td>\(Self.escape(r.tags.joined(separator: ", ")))</td><td>\(device.active ? "active" : "<span class=\"bad\">inactive</span>")</td></tr>"
        }.joined()
        func option(_ value: String, _ label: String) -> String { "<option value=\"\(value)\"\(by == value ? " selected" : "")>\(label)</option>" }
        return """
            <h1>Devices of \(Self.escape(app.id))</h1>
            <form method="get" action="/dashboard/apps/\(Self.path(app.id))/devices" class="search" role="search">
              <label for="by">Search by</label>
              <select id="by" name="by">\(option("user", "User id"))\(option("prefix", "Token prefix"))\(option("tag", "Tag"))</select>
              <label for="q" class="visually-hidden">Search for</label>
              <input id="q" name="q" type="search" value="\(Self.escape(text))" placeholder="ann, 3f9a…, beta">
              <button type="submit">Search</button>
            </form>
            <p class="muted">\(text.isEmpty ? "The 50 most recently registered devices." : "\(devices.count) device\(devices.count == 1 ? "" : "s") found.")</p>
            \(rows.isEmpty ? "<p>No devices.</p>" : "<table id=\"devices\"><thead><tr><th scope=\"col\">Token</th><th scope=\"col\">Kind</th><th scope=\"col\">Environment</th><th scope=\"col\">User</th><th scope=\"col\">Tags</th><th scope=\"col\">State</th></tr></thead><tbody>\(rows)</tbody></table>")
            """
    }

    func devicePage(_ session: Session, app: App, token text: String) async throws -> String {
        let token = try Validate.token(text)
        guard let device = try await self.store.device(appID: app.id, token: token.hex) else { throw HeraldError.notFound("device") }
        let r = device.registration
        let deliveries = try await self.store.deliveries(appID: app.id, token: token.hex, limit: 50)
        let invalidations = try await self.store.invalidations(appID: app.id, deviceID: device.id)
        let rows = deliveries.map { d in
            "<tr><td><a href=\"/dashboard/apps/\(Self.path(app.id))/notifications/\(Self.path(d.notificationID))\">\(Self.time(d.updatedAt))</a></td><td>\(Self.escape(d.pushType.rawValue))</td><td><span class=\"state \(d.state.rawValue)\">\(d.state.rawValue)</span></td><td>\(d.status.map(String.init) ?? "")</td><td>\(Self.escape(d.reason ?? ""))\(d.reason.map { "<div class=\"why\">\(Self.escape(Self.explain($0)))</div>" } ?? "")</td><td>\(d.attempts)</td></tr>"
        }.joined()
        let audit = invalidations.map { i in
            "<li>\(Self.time(i.at)): <code>\(Self.escape(i.reason))</code> — \(i.applied ? "applied" : "not applied (registered again after APNs's timestamp)")<div class=\"why\">\(Self.escape(Self.explain(i.reason)))</div></li>"
        }.joined()
        func row(_ label: String, _ value: String?) -> String { "<dt>\(label)</dt><dd>\(Self.escape(value ?? "—"))</dd>" }
        return """
            <h1>Device <code class="wrap">\(Self.escape(r.token.hex))</code></h1>
            <nav class="actions" aria-label="Device"><a class="button" href="/dashboard/apps/\(Self.path(app.id))/send?to=token&amp;target=\(r.token.hex)">Send a test to this device</a></nav>
            <dl class="pairs">
            \(row("App", app.id))\(row("Kind", r.kind.rawValue))\(row("Environment", r.environment == .development ? "sandbox (development)" : "production"))
            \(row("User", r.userID))\(row("Tags", r.tags.isEmpty ? nil : r.tags.joined(separator: ", ")))\(row("Platform", r.platform))\(row("App version", r.appVersion))
            \(row("Locale", r.locale))\(row("Time zone", r.timeZone))\(row("Registered first", Self.time(device.createdAt)))\(row("Last registration", Self.time(device.lastRegisteredAt)))
            <dt>State</dt><dd>\(device.active ? "active" : "<span class=\"bad\">inactive</span> since \(Self.time(device.invalidatedAt ?? 0)): \(Self.escape(device.invalidationReason ?? ""))")</dd>
            </dl>
            \(audit.isEmpty ? "" : "<h2>Invalidations</h2><ul>\(audit)</ul>")
            <h2>Recent deliveries</h2>
            \(rows.isEmpty ? "<p>None yet.</p>" : "<table><thead><tr><th scope=\"col\">Updated (UTC)</th><th scope=\"col\">Push type</th><th scope=\"col\">State</th><th scope=\"col\">Status</th><th scope=\"col\">Reason</th><th scope=\"col\">Attempts</th></tr></thead><tbody>\(rows)</tbody></table>")
            """
    }

    func notificationPage(_ session: Session, app: App, id: String) async throws -> String {
        guard let status = try await self.store.notification(appID: app.id, id: id, deliveryLimit: 1000) else { throw HeraldError.notFound("notification") }
        let counts = DeliveryState.allCases.map { "<div class=\"card\"><span class=\"label\">\($0.rawValue)</span><span class=\"value\" id=\"count-\($0.rawValue)\">\(status.counts[$0] ?? 0)</span></div>" }.joined()
        let rows = status.deliveries.map { d in
            "<tr><td><a href=\"/dashboard/apps/\(Self.path(app.id))/devices/\(Self.escape(d.token))\"><code>\(Self.escape(String(d.token.prefix(16))))…</code></a></td><td>\(Self.escape(d.pushType.rawValue))</td><td><span class=\"state \(d.state.rawValue)\">\(d.state.rawValue)</span></td><td>\(d.status.map(String.init) ?? "")</td><td>\(Self.escape(d.reason ?? ""))\(d.reason.map { "<div class=\"why\">\(Self.escape(Self.explain($0)))</div>" } ?? "")</td><td>\(d.attempts)</td><td>\(d.latencyMilliseconds.map { "\($0) ms" } ?? "")</td><td><code>\(Self.escape(d.apnsID ?? ""))</code></td></tr>"
        }.joined()
        let pending = (status.counts[.pending] ?? 0) > 0 || status.summary.expanding
        return """
            <h1>Notification <code>\(Self.escape(status.summary.id))</code></h1>
            <p class="muted">Created \(Self.time(status.summary.createdAt)) UTC\(status.summary.scheduledAt > status.summary.createdAt ? ", scheduled for \(Self.time(status.summary.scheduledAt))" : ""); audience \(status.summary.audienceSize).\(pending ? " <a href=\"\" data-refresh=\"2\">Still sending: refresh</a>" : "")</p>
            <div class="cards">\(counts)</div>
            <h2>Delivery log</h2>
            \(rows.isEmpty ? "<p>No deliveries yet.</p>" : "<table id=\"delivery-log\"><thead><tr><th scope=\"col\">Token</th><th scope=\"col\">Push type</th><th scope=\"col\">State</th><th scope=\"col\">Status</th><th scope=\"col\">Reason</th><th scope=\"col\">Attempts</th><th scope=\"col\">Latency</th><th scope=\"col\">apns-id</th></tr></thead><tbody>\(rows)</tbody></table>")
            """
    }

    // MARK: send a test

    /// The API's notification body from the form's fields.
    static func notificationBody(_ form: [String: String]) throws -> JSONValue {
        func field(_ name: String) -> String? {
            guard let value = form[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
            return value
        }
        guard let target = field("target") else { throw HeraldError.invalid("name a device token, user id or tag to send to", code: "missing_audience") }
        let audience: JSONValue
        switch form["to"] ?? "token" {
        case "user": audience = .object([("users", .array([.string(target)]))])
        case "tag": audience = .object([("tags", .array([.string(target)]))])
        default: audience = .object([("tokens", .array([.string(target)]))])
        }
        var members: [(String, JSONValue)] = [("audience", audience)]
        for name in ["title", "subtitle", "body", "sound", "collapseId", "pushType"] {
            if let value = field(name) { members.append((name, .string(value))) }
        }
        if let badge = field("badge") {
            guard let number = Int64(badge) else { throw HeraldError.invalid("badge must be a whole number", code: "bad_badge") }
            members.append(("badge", .int(number)))
        }
        if let priority = field("priority") {
            guard let number = Int64(priority) else { throw HeraldError.invalid("priority must be 1, 5 or 10", code: "bad_priority") }
            members.append(("priority", .int(number)))
        }
        if let custom = field("custom") {
            guard let value = try? JSONValue.parse(Array(custom.utf8)), value.objectMembers != nil else {
                throw HeraldError.invalid("custom data must be a JSON object", code: "bad_data")
            }
            members.append(("data", value))
        }
        return .object(members)
    }

    /// What would be sent: the payload and the APNs headers, or the error the form would get.
    static func preview(_ form: [String: String], app: App, now: Int64) -> JSONValue {
        do {
            let spec = try NotificationRequest.parse(try Self.notificationBody(form), now: now)
            let pushType = spec.pushType ?? .alert
            var headers: [(String, JSONValue)] = [
                ("apns-push-type", .string(pushType.rawValue)), ("apns-topic", .string(pushType.topic(forBundleID: app.bundleID))),
            ]
            if let priority = spec.priority { headers.append(("apns-priority", .string("\(priority.rawValue)"))) }
            if let expiration = spec.expiration { headers.append(("apns-expiration", .string("\(expiration)"))) }
            if let collapse = spec.collapseID { headers.append(("apns-collapse-id", .string(collapse))) }
            let payload = (try? JSONValue.parse(spec.payload)) ?? .null
            let alert = payload["aps"]?["alert"]
            return .object([
                ("ok", true), ("payload", .string(Self.pretty(payload))), ("bytes", .int(Int64(spec.payload.count))), ("headers", .object(headers)),
                ("title", alert?["title"] ?? alert ?? .null), ("subtitle", alert?["subtitle"] ?? .null), ("body", alert?["body"] ?? .null),
                ("derivedPushType", .bool(spec.pushType == nil)),
            ])
        } catch let error as HeraldError {
            return .object([("ok", false), ("error", .string("\(error.code): \(error.message)"))])
        } catch {
            return .object([("ok", false), ("error", .string("\(error)"))])
        }
    }

    func sendPage(_ session: Session, app: App, form: [String: String], outcome: String?) async throws -> String {
        let preview = Self.preview(form, app: app, now: self.api.clock.nowMilliseconds)
        func value(_ name: String) -> String { Self.escape(form[name] ?? "") }
        func input(_ name: String, _ label: String, type: String = "text", placeholder: String = "") -> String {
            "<div class=\"field\"><label for=\"f-\(name)\">\(label)</label><input id=\"f-\(name)\" name=\"\(name)\" type=\"\(type)\" value=\"\(value(name))\" placeholder=\"\(placeholder)\"></div>"
        }
        func option(_ field: String, _ optionValue: String, _ label: String) -> String {
            "<option value=\"\(optionValue)\"\((form[field] ?? "") == optionValue ? " selected" : "")>\(label)</option>"
        }
        let pushTypes = [("", "from each device's kind"), ("alert", "alert"), ("background", "background"), ("voip", "voip"), ("liveactivity", "liveactivity")]
        let ok = preview["ok"]?.boolValue == true
        let headerLines = preview["headers"]?.objectMembers?.map { "\($0.0): \($0.1.stringValue ?? "")" }.joined(separator: "\n") ?? ""
        let title = ok ? (preview["title"]?.stringValue ?? "") : ""
        let body = ok ? (preview["body"]?.stringValue ?? "") : ""
        return """
            <h1>Send a test — \(Self.escape(app.id))</h1>
            \(outcome.map { "<p class=\"error\" role=\"alert\">\(Self.escape($0))</p>" } ?? "")
            <div class="send">
            <form method="post" action="/dashboard/apps/\(Self.path(app.id))/send" id="send-form" data-preview="/dashboard/apps/\(Self.path(app.id))/preview">
              \(Self.csrfField(session))
              <fieldset><legend>To</legend>
                <div class="field"><label for="f-to">Send to</label><select id="f-to" name="to">\(option("to", "token", "a device token"))\(option("to", "user", "a user id"))\(option("to", "tag", "a tag"))</select></div>
                \(input("target", "Token, user id or tag", placeholder: "ann"))
              </fieldset>
              <fieldset><legend>Alert</legend>
                \(input("title", "Title"))\(input("subtitle", "Subtitle"))
                <div class="field"><label for="f-body">Body</label><textarea id="f-body" name="body" rows="3">\(value("body"))</textarea></div>
                \(input("badge", "Badge", type: "number"))\(input("sound", "Sound", placeholder: "default"))
              </fieldset>
              <fieldset><legend>Delivery</legend>
                <div class="field"><label for="f-pushType">Push type</label><select id="f-pushType" name="pushType">\(pushTypes.map { option("pushType", $0.0, $0.1) }.joined())</select></div>
                <div class="field"><label for="f-priority">Priority</label><select id="f-priority" name="priority">\(option("priority", "", "APNs default"))\(option("priority", "10", "10 (immediately)"))\(option("priority", "5", "5 (power-considerate)"))\(option("priority", "1", "1 (low)"))</select></div>
                \(input("collapseId", "Collapse id"))
                <div class="field"><label for="f-custom">Custom JSON (keys beside aps)</label><textarea id="f-custom" name="custom" rows="3" placeholder="{&quot;orderId&quot;: 42}">\(value("custom"))</textarea></div>
              </fieldset>
              <div class="buttons"><button type="submit" name="action" value="preview" class="secondary">Preview</button> <button type="submit" name="action" value="send" id="send-button">Send</button></div>
            </form>
            <section class="preview" aria-labelledby="preview-title">
              <h2 id="preview-title">Preview</h2>
              <div class="lock-screen" aria-label="Lock-screen preview">
                <div class="clock">9:41</div>
                <div class="banner"><div class="banner-app">\(Self.escape(app.id.uppercased()))</div><div class="banner-title" id="preview-banner-title">\(Self.escape(title))</div><div class="banner-body" id="preview-banner-body">\(Self.escape(body))</div></div>
              </div>
              <p class="error" id="preview-error" role="status">\(ok ? "" : Self.escape(preview["error"]?.stringValue ?? ""))</p>
              <h3>Headers</h3>
              <pre id="preview-headers">\(Self.escape(headerLines))</pre>
              <h3>Payload <span class="muted" id="preview-bytes">\(ok ? "\(preview["bytes"]?.intValue ?? 0) bytes" : "")</span></h3>
              <pre id="preview-payload">\(Self.escape(ok ? preview["payload"]?.stringValue ?? "" : ""))</pre>
            </section>
            </div>
            """
    }

    // MARK: emulator

    func emulatorPage(_ session: Session, error: String?) async throws -> String {
        guard let emulator = self.emulator else {
            return "<h1>Emulator</h1><p>This server sends to Apple (the built-in emulator is off).</p>"
        }
        let apps = try await self.store.apps()
        let devices = emulator.state.devices.sorted { $0.createdAtMilliseconds > $1.createdAtMilliseconds }.prefix(100)
        let rows = devices.map { d in
            "<tr><td><a href=\"/dashboard/emulator/\(d.token)\"><code>\(Self.escape(String(d.token.prefix(16))))…</code></a></td><td><code>\(Self.escape(d.bundleID))</code></td><td>\(d.environment == .development ? "sandbox" : "production")</td><td>\(Self.escape(d.kind.rawValue))</td><td>\(d.receivedCount)</td></tr>"
        }.joined()
        return """
            <h1>Emulator</h1>
            <p>Apps without Apple credentials push to the built-in APNs emulator. A virtual device here is a phone that receives them.</p>
            \(error.map { "<p class=\"error\" role=\"alert\">\(Self.escape($0))</p>" } ?? "")
            <form method="post" action="/dashboard/emulator/devices" class="inline-form">
              \(Self.csrfField(session))
              <div class="field"><label for="e-app">App</label><select id="e-app" name="app">\(apps.map { "<option value=\"\(Self.escape($0.id))\">\(Self.escape($0.id))</option>" }.joined())</select></div>
              <div class="field"><label for="e-env">Environment</label><select id="e-env" name="environment"><option value="development">sandbox</option><option value="production">production</option></select></div>
              <div class="field"><label for="e-user">User id</label><input id="e-user" name="user" placeholder="ann"></div>
              <div class="field"><label for="e-tags">Tags (comma-separated)</label><input id="e-tags" name="tags" placeholder="beta"></div>
              <button type="submit">New virtual device</button>
            </form>
            <p class="hint">It is registered with Herald as the app would do it: send to its user, a tag or its token.</p>
            \(rows.isEmpty ? "<p>No virtual devices yet.</p>" : "<table><thead><tr><th scope=\"col\">Token</th><th scope=\"col\">Bundle id</th><th scope=\"col\">Environment</th><th scope=\"col\">Kind</th><th scope=\"col\">Received</th></tr></thead><tbody>\(rows)</tbody></table>")
            """
    }

    func phonePage(_ session: Session, token: String) async throws -> String {
        guard let emulator = self.emulator, let device = emulator.state.device(token: token) else { throw HeraldError.notFound("virtual device") }
        let inbox = (emulator.state.inbox(token: device.token) ?? []).reversed()
        let apps = try await self.store.apps().filter { $0.bundleID == device.bundleID }
        let sendLinks = apps.map { "<a class=\"button\" href=\"/dashboard/apps/\(Self.path($0.id))/send?to=token&amp;target=\(device.token)\">Send a test from \(Self.escape($0.id))</a>" }.joined(separator: " ")
        return """
            <h1>Emulated phone</h1>
            <p class="muted"><code class="wrap">\(Self.escape(device.token))</code> · \(Self.escape(device.bundleID)) · \(device.environment == .development ? "sandbox" : "production")</p>
            <nav class="actions" aria-label="Phone">\(sendLinks) <a class="button secondary" href="/dashboard/emulator/\(device.token)">Refresh</a></nav>
            <div class="phone" data-stream="/dashboard/emulator/\(device.token)/stream">
              <div class="phone-screen">
                <div class="clock">9:41</div>
                <ol class="notifications" id="phone-notifications" aria-live="polite" aria-label="Notifications received">
                \(inbox.map(Self.phoneItem).joined())
                </ol>
                \(inbox.isEmpty ? "<p class=\"empty\" id=\"phone-empty\">No notifications yet.</p>" : "")
              </div>
            </div>
            """
    }

    static func phoneItem(_ notification: ReceivedNotification) -> String {
        let item = Self.phoneJSON(notification)
        let title = item["title"]?.stringValue ?? ""
        let body = item["body"]?.stringValue ?? ""
        return "<li class=\"banner\"><div class=\"banner-app\">\(Self.escape(item["pushType"]?.stringValue ?? "")) · \(Self.clock(notification.deliveredAtMilliseconds))</div><div class=\"banner-title\">\(Self.escape(title))</div><div class=\"banner-body\">\(Self.escape(body))</div></li>"
    }

    static func phoneJSON(_ notification: ReceivedNotification) -> JSONValue {
        let payload = (try? JSONValue.parse(notification.payload)) ?? .null
        let alert = payload["aps"]?["alert"]
        let title = alert?.stringValue ?? alert?["title"]?.stringValue ?? (notification.pushType == "background" ? "(background push)" : "")
        return .object([
            ("title", .string(title)), ("body", .string(alert?["body"]?.stringValue ?? "")), ("pushType", .string(notification.pushType)),
            ("at", .int(notification.deliveredAtMilliseconds)), ("time", .string(Self.clock(notification.deliveredAtMilliseconds))),
            ("apnsId", .string(notification.apnsID)),
        ])
    }

    /// What the virtual device receives, as server-sent events.
    func phoneStream(token: String) throws -> Response {
        guard let emulator = self.emulator, emulator.state.device(token: token) != nil else { throw HeraldError.notFound("virtual device") }
        let events = self.api.events
        return EventStream.response { writer in
            // Registered here, where the body is written: a client gone before this holds nothing.
            let (stream, feed) = AsyncStream<StreamItem>.makeStream(bufferingPolicy: .bufferingNewest(1000))
            let listener = emulator.state.addListener(
                token: token, onRemoved: { feed.finish() },
                { notification in
                    feed.yield(.event(DeliveryEvent(id: notification.apnsID, type: .sent, appID: "", json: Self.phoneJSON(notification))))
                }
            )
            if listener == nil { feed.finish() }
            // An app-less subscription, finished with every other stream at shutdown: then this one ends too.
            let subscription = events.subscribe(appID: "")
            defer {
                if let listener { emulator.state.removeListener(listener) }
                events.unsubscribe(subscription.id)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in subscription.items {}
                    feed.finish()
                }
                try await EventStream.write(&writer, preamble: "", items: stream, feed: feed) { event in
                    "event: push\ndata: \(String(decoding: event.json.serialized(), as: UTF8.self))\n\n"
                }
                group.cancelAll()
            }
        }
    }

    // MARK: HTML

    static func html(_ content: String, title: String?, session: Session?, status: HTTPResponse.Status = .ok) -> Response {
        let nav =
            session.map { session in
                """
                <nav class="top" aria-label="Main">
                  <a href="/dashboard" class="brand">Herald</a>
                  <a href="/dashboard">Overview</a><a href="/dashboard/apps">Apps</a><a href="/dashboard/emulator">Emulator</a>
                  <form method="post" action="/dashboard/logout" class="logout">\(Self.csrfField(session))<button type="submit" class="link">Sign out (\(Self.escape(session.key.name ?? session.key.id)))</button></form>
                </nav>
                """
            } ?? "<nav class=\"top\" aria-label=\"Main\"><span class=\"brand\">Herald</span></nav>"
        let page = """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(Self.escape(title ?? "Herald"))</title>
            <link rel="stylesheet" href="/dashboard/static/dashboard.css">
            <script src="/dashboard/static/dashboard.js" defer></script>
            </head>
            <body>
            \(nav)
            <main>
            \(content)
            </main>
            </body>
            </html>
            """
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Content-Security-Policy")!] = "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
    }

    static func redirect(_ location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        return Response(status: .seeOther, headers: headers)
    }

    static func csrfField(_ session: Session) -> String {
        "<input type=\"hidden\" name=\"csrf\" value=\"\(session.csrf)\">"
    }

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// A path segment: percent-encoded, then safe in an attribute.
    static func path(_ segment: String) -> String {
        Self.escape(segment.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? segment)
    }

    static func time(_ milliseconds: Int64) -> String {
        // A format style, not a formatter made per call: a delivery log renders up to 1000 of these.
        let text = Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
        return String(text.replacingOccurrences(of: "T", with: " ").dropLast())
    }

    static func clock(_ milliseconds: Int64) -> String {
        String(Self.time(milliseconds).suffix(8).prefix(5))
    }

    static func number(_ value: Double) -> String { String(format: "%.1f", value) }

    static func pretty(_ value: JSONValue, indent: String = "") -> String {
        let inner = indent + "  "
        switch value {
        case .object(let members):
            guard !members.isEmpty else { return "{}" }
            return "{\n" + members.map { inner + String(decoding: JSONValue.string($0.0).serialized(), as: UTF8.self) + ": " + Self.pretty($0.1, indent: inner) }.joined(separator: ",\n") + "\n" + indent + "}"
        case .array(let items):
            guard !items.isEmpty else { return "[]" }
            return "[\n" + items.map { inner + Self.pretty($0, indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        default:
            return String(decoding: value.serialized(), as: UTF8.self)
        }
    }

    static func environmentName(_ raw: String) -> String {
        raw == APNSEnvironment.development.rawValue ? "sandbox" : raw == APNSEnvironment.production.rawValue ? "production" : raw
    }

    /// A failure reason in plain words, with the usual fix.
    static func explain(_ reason: String) -> String {
        let code = reason.split(separator: " ").first.map(String.init) ?? reason
        switch code {
        case "BadDeviceToken":
            return "Wrong environment, or not a token: a sandbox (development) token sent to production or the reverse. Register the device with the environment its build uses."
        case "DeviceTokenNotForTopic":
            return "Wrong topic: the token belongs to another app (bundle id) or another kind of token. Check the app's bundle id and the token's kind."
        case "Unregistered":
            return "Uninstalled: the app was removed or its token is no longer active. The device was marked inactive."
        case "ExpiredToken":
            return "The token expired: the app must register again for a new one."
        case "TopicDisallowed", "BadTopic", "MissingTopic":
            return "Wrong topic for these credentials: the key's team or the certificate does not cover this bundle id and push type."
        case "InvalidProviderToken", "ExpiredProviderToken", "MissingProviderToken":
            return "The signing key is not accepted: check the key id, team id and .p8 key of this app and environment, and that the key is not revoked."
        case "BadCertificate", "BadCertificateEnvironment":
            return "The certificate is for the other environment or not accepted: upload the certificate for this environment."
        case "PayloadTooLarge":
            return "The payload is over APNs's limit for this push type: shorten it."
        case "TooManyProviderTokenUpdates":
            return "The signing token was renewed too often: Herald renews it every 50 minutes; another sender may share the key."
        case "TooManyRequests":
            return "Too many pushes to this one device in a short time: APNs throttles; Herald retried later."
        case "InternalServerError", "ServiceUnavailable", "Shutdown":
            return "APNs had trouble: Herald retried with back-off."
        case "NoEncryptionKey":
            return "End-to-end encrypted, but the device registered no public key: register it with publicKey."
        case "Forbidden":
            return "APNs refused this credential for this request."
        default:
            return "APNs refused it (\(reason))."
        }
    }

    /// `application/x-www-form-urlencoded` fields (up to 256 KiB).
    static func form(_ request: Request) async throws -> [String: String] {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: 256 * 1024)
        } catch {
            throw HeraldError.tooLarge
        }
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String { String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            guard let name = parts.first else { continue }
            fields[decode(name)] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }
}

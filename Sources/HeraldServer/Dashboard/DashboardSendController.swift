// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// Send a test: the form, its live preview (the exact payload and headers), and the send.
struct DashboardSendController: Sendable {
    let dashboard: Dashboard

    struct Model: Sendable {
        struct Field: Sendable {
            var target: String
            var title: String
            var subtitle: String
            var body: String
            var badge: String
            var sound: String
            var collapseId: String
            var custom: String
            var ignoreQuietHours: Bool
            var throttlePerMinute: String
            var contentState: String
            var staleDate: String
            var dismissalDate: String
        }
        /// A variable of the chosen template: its input.
        struct Variable: Sendable {
            var name: String
            var field: String
            var inputID: String
            var value: String
        }
        /// One variant of the chosen template as its devices would show it.
        struct Locale: Sendable {
            var locale: String
            var title: String
            var subtitle: String
            var body: String
        }
        var id: String
        var upperID: String
        var appPath: String
        var outcome: String?
        var form: Field
        var audiences: [DashboardOption]
        var pushTypes: [DashboardOption]
        var priorities: [DashboardOption]
        var capModes: [DashboardOption]
        var transports: [DashboardOption]
        var previewTitle: String
        var previewSubtitle: String
        var previewBody: String
        var previewError: String
        var headerLines: String
        var bytes: String
        var payload: String
        /// The Android (FCM) request body for one device, or why no Android device gets it.
        var android: String
        var androidNote: String
        /// The Declarative Web Push message each browser decrypts, or why no browser gets it.
        var web: String
        var webNote: String
        var reach: String
        var templates: [DashboardOption]
        var hasTemplates: Bool
        var variables: [Variable]
        var locales: [Locale]
        /// The app's broadcast channels, for the channel audience.
        var channels: [DashboardOption]
        var hasChannels: Bool
        var events: [DashboardOption]
    }

    /// The form field of a template variable's value.
    static func variableField(_ name: String) -> String { "var-" + name }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("apps/:app/send") { request, context in
            try await self.dashboard.page(request) { _ in
                let query = request.uri.queryParameters
                var form: [String: String] = [:]
                for key in ["to", "target", "title", "body", "template", "channel"] {
                    if let value = query[Substring(key)] { form[key] = String(value) }
                }
                return try await self.sendPage(app: try await self.dashboard.app(context.parameters.get("app")), form: form, outcome: nil)
            }
        }
        group.post("apps/:app/send") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            let now = self.dashboard.backend.nowMilliseconds
            do {
                let spec = try await self.dashboard.backend.notification(try Self.notificationBody(form, now: now), app: app, now: now)
                if form["action"] == "preview" {
                    let view = try await self.sendPage(app: app, form: form, outcome: nil)
                    return self.dashboard.views.response(view, session: session)
                }
                // A channel: one broadcast, sent now and recorded, as the API sends it.
                let id: String
                if case .channel = spec.audience {
                    id = try await self.dashboard.backend.broadcast(spec, app: app)
                } else {
                    id = try await self.dashboard.backend.send(spec, app: app, now: now)
                }
                return DashboardViews.redirect("/dashboard/apps/\(DashboardFormat.path(app.id))/notifications/\(DashboardFormat.path(id))")
            } catch let error as HeraldError {
                let view = try await self.sendPage(app: app, form: form, outcome: error.message)
                return self.dashboard.views.response(view, session: session, status: .unprocessableContent)
            }
        }
        group.post("apps/:app/preview") { request, context in
            let form = try await DashboardForm.read(request)
            _ = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            return DashboardBackend.json(await self.preview(form, app: app, now: self.dashboard.backend.nowMilliseconds))
        }
    }

    /// The API's notification body from the form's fields; `now` (ms) is a broadcast's timestamp.
    static func notificationBody(_ form: [String: String], now: Int64) throws -> JSONValue {
        func field(_ name: String) -> String? { DashboardForm.field(form, name) }
        if form["to"] == "channel" { return try Self.broadcastBody(form, now: now) }
        guard let target = field("target") else {
            throw HeraldError.invalid("name a device token, user id or tag to send to", code: "missing_audience")
        }
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
        if let transport = field("transports") { members.append(("transports", .array([.string(transport)]))) }
        if form["ignoreQuietHours"] != nil { members.append(("ignoreQuietHours", true)) }
        if let mode = field("frequencyCap") { members.append(("frequencyCap", .string(mode))) }
        if let throttle = field("throttlePerMinute") {
            guard let number = Int64(throttle) else { throw HeraldError.invalid("throttle must be a whole number", code: "bad_throttlePerMinute") }
            members.append(("throttlePerMinute", .int(number)))
        }
        var data: [(String, JSONValue)]?
        if let custom = field("custom") {
            guard let value = try? JSONValue.parse(Array(custom.utf8)), let object = value.objectMembers else {
                throw HeraldError.invalid("custom data must be a JSON object", code: "bad_data")
            }
            data = object
        }
        // A template: its variables' values (as text) go in `data` beside the custom keys.
        if let template = field("template") {
            members.append(("template", .string(template)))
            let prefix = Self.variableField("")
            for (key, value) in form.sorted(by: { $0.key < $1.key }) where key.hasPrefix(prefix) && !value.isEmpty {
                let name = String(key.dropFirst(prefix.count))
                data = (data ?? []).filter { $0.0 != name } + [(name, .string(value))]
            }
        }
        if let data { members.append(("data", .object(data))) }
        return .object(members)
    }

    /// A Live Activity broadcast's body, `audience: {"channel"}`: the chosen channel, the event
    /// (update or end), the content state (a JSON object), the stale and dismissal dates (UTC, as
    /// a `datetime-local` input gives them), the optional alert, and the priority; the timestamp
    /// is `now`. What the API would refuse is left to it (the same codes).
    static func broadcastBody(_ form: [String: String], now: Int64) throws -> JSONValue {
        func field(_ name: String) -> String? { DashboardForm.field(form, name) }
        guard let channel = field("channel") else {
            throw HeraldError.invalid("choose one of the app's channels to broadcast on (make one on the channels page)", code: "missing_audience")
        }
        let event = field("event") ?? "update"
        guard event == "update" || event == "end" else {
            throw HeraldError.invalid("a channel carries update and end events (an activity is not started by broadcast)", code: "bad_event")
        }
        var aps: [(String, JSONValue)] = [("timestamp", .int(now / 1000)), ("event", .string(event))]
        if let text = field("contentState") {
            guard let value = try? JSONValue.parse(Array(text.utf8)), value.objectMembers != nil else {
                throw HeraldError.invalid("the content state must be a JSON object, the activity's ContentState", code: "bad_content_state")
            }
            aps.append(("content-state", value))
        } else if event == "update" {
            throw HeraldError.invalid("an update needs its content state (a JSON object, the activity's ContentState)", code: "bad_content_state")
        }
        for (name, key) in [("staleDate", "stale-date"), ("dismissalDate", "dismissal-date")] {
            guard let text = field(name) else { continue }
            guard let seconds = Self.utcSeconds(text) else {
                throw HeraldError.invalid("\(key) must be a date and time (UTC), like 2026-11-24T21:30", code: "bad_" + name)
            }
            aps.append((key, .int(seconds)))
        }
        var members: [(String, JSONValue)] = [("audience", .object([("channel", .string(channel))])), ("aps", .object(aps))]
        for name in ["title", "subtitle", "body", "sound", "pushType", "collapseId"] {
            if let value = field(name) { members.append((name, .string(value))) }
        }
        if let priority = field("priority") {
            guard let number = Int64(priority) else { throw HeraldError.invalid("priority must be 1, 5 or 10", code: "bad_priority") }
            members.append(("priority", .int(number)))
        }
        return .object(members)
    }

    /// UNIX seconds of a `datetime-local` value read as UTC (`2026-11-24T21:30`, seconds optional).
    static func utcSeconds(_ text: String) -> Int64? {
        let full = text.count == 16 ? text + ":00" : text
        guard let date = try? Date(full + "Z", strategy: .iso8601) else { return nil }
        return Int64(date.timeIntervalSince1970)
    }

    /// What would be sent: the payload and the APNs headers, the Android (FCM) message, the
    /// browsers' (Web Push) message, or the error the form would get.
    func preview(_ form: [String: String], app: App, now: Int64) async -> JSONValue {
        do {
            let body = try Self.notificationBody(form, now: now)
            let spec = try await self.dashboard.backend.notification(body, app: app, now: now)
            if case .channel = spec.audience { return try await self.broadcastPreview(spec, form: form, app: app) }
            let pushType = spec.pushType ?? .alert
            var headers: [(String, JSONValue)] = [
                ("apns-push-type", .string(pushType.rawValue)), ("apns-topic", .string(pushType.topic(forBundleID: app.bundleID))),
            ]
            if let priority = spec.priority { headers.append(("apns-priority", .string("\(priority.rawValue)"))) }
            if let expiration = spec.expiration { headers.append(("apns-expiration", .string("\(expiration)"))) }
            headers.append(("apns-collapse-id", .string(self.dashboard.backend.collapseID(spec))))
            // Sent by template: the default variant is the payload shown, and each locale is listed.
            let variants = try self.dashboard.backend.variants(spec)
            let bytes = self.dashboard.backend.sentPayload(variants?.first?.payload ?? spec.payload, pushType: pushType, app: app)
            let payload = (try? JSONValue.parse(bytes)) ?? .null
            let alert = payload["aps"]?["alert"]
            let locales = (variants ?? []).map { variant -> JSONValue in
                let alert = (try? JSONValue.parse(variant.payload))?["aps"]?["alert"]
                return .object([
                    ("locale", .string(variant.locale ?? "default")), ("title", alert?["title"] ?? .string("")),
                    ("subtitle", alert?["subtitle"] ?? .string("")), ("body", alert?["body"] ?? .string("")),
                ])
            }
            // Who it would reach now: the API's dry run.
            let reach = (try? await self.dashboard.backend.dryRun(spec, app: app)).map(Self.reach) ?? ""
            // What an Android device gets: the FCM message for one device (the form's when it
            // names one), or why FCM gets nothing.
            let target: String? = (form["to"] ?? "token") == "token" ? form["target"] : nil
            let fcm = self.dashboard.backend.fcmMessage(spec, body: body, app: app, target: target)
            let android: String = fcm.message.flatMap { try? JSONValue.parse($0) }.map { DashboardFormat.pretty($0) } ?? ""
            // What a browser decrypts, exactly (the bytes encrypted to each subscription), or why
            // no browser gets it (the web's refusal in its own words: no title, too large).
            let web = self.dashboard.backend.webPushMessage(spec, body: body, app: app)
            let onlyAPNs = spec.parts[.webpush] == nil && (spec.transports.isEmpty || spec.transports.contains(.apns))
            let androidNote: String = Self.androidNote(fcm.message, reason: fcm.reason, onlyAPNs: onlyAPNs)
            let webText: String = web.message.map { String(decoding: $0, as: UTF8.self) } ?? ""
            let webNote: String = Self.webNote(web.message, reason: web.reason)
            return .object([
                ("reach", .string(reach)), ("android", .string(android)), ("androidNote", .string(androidNote)),
                ("web", .string(webText)), ("webNote", .string(webNote)),
                ("ok", true), ("payload", .string(DashboardFormat.pretty(payload))), ("bytes", .int(Int64(bytes.count))),
                ("locales", .array(locales)),
                ("headers", .object(headers)),
                ("title", alert?["title"] ?? alert ?? .null), ("subtitle", alert?["subtitle"] ?? .null), ("body", alert?["body"] ?? .null),
                ("derivedPushType", .bool(spec.pushType == nil)),
            ])
        } catch let error as HeraldError {
            return .object([("ok", false), ("error", .string(error.message))])
        } catch {
            return .object([("ok", false), ("error", .string("This cannot be previewed."))])
        }
    }

    /// A broadcast's preview: the payload and the headers of the one request to APNs, on the
    /// channel's environment; who gets it is APNs's to know (every subscribed activity).
    func broadcastPreview(_ spec: NotificationSpec, form: [String: String], app: App) async throws -> JSONValue {
        let channel = try await self.dashboard.backend.channel(app, id: form["channel"] ?? "")
        let headers: [(String, JSONValue)] = [
            ("apns-push-type", "liveactivity"), ("apns-topic", .string(PushType.liveactivity.topic(forBundleID: app.bundleID))),
            ("apns-channel-id", .string(channel.channelID)), ("apns-priority", .string("\((spec.priority ?? .throttled).rawValue)")),
            ("apns-expiration", .string("\(try self.dashboard.backend.broadcastExpiration(channel, spec))")),
        ]
        let payload = (try? JSONValue.parse(spec.payload)) ?? .null
        let alert = payload["aps"]?["alert"]
        let reach =
            "One broadcast on channel \(channel.channelID) (\(DashboardFormat.environmentName(channel.environment))): "
            + "APNs delivers it to every Live Activity subscribed."
        return .object([
            ("reach", .string(reach)), ("ok", true), ("payload", .string(DashboardFormat.pretty(payload))),
            ("android", ""), ("androidNote", .string(Self.androidNote(nil, reason: "a broadcast channel is APNs's alone", onlyAPNs: true))),
            ("web", ""), ("webNote", .string(Self.webNote(nil, reason: "a broadcast channel is APNs's alone"))),
            ("bytes", .int(Int64(spec.payload.count))),
            ("locales", .array([])), ("headers", .object(headers)),
            ("title", alert?["title"] ?? .null), ("subtitle", alert?["subtitle"] ?? .null), ("body", alert?["body"] ?? .null),
            ("derivedPushType", false),
        ])
    }

    /// Above the Android message: its size, or why there is none ("APNs only" when no other
    /// platform gets the notification either).
    static func androidNote(_ message: [UInt8]?, reason: String?, onlyAPNs: Bool) -> String {
        if let message { return "\(message.count) bytes: the request to FCM's messages:send for one Android device." }
        return "\(onlyAPNs ? "APNs only" : "Not for Android"): \(reason ?? "FCM cannot carry it")."
    }

    /// Above the browsers' message: its size, or why no browser gets it.
    static func webNote(_ message: [UInt8]?, reason: String?) -> String {
        if let message {
            return "\(message.count) bytes: the Declarative Web Push message each browser decrypts (encrypted to each subscription, RFC 8291)."
        }
        return "Not for browsers: \(reason ?? "Web Push cannot carry it")."
    }

    /// "Would reach 3 devices (2 alert, 1 voip)", or why nobody.
    static func reach(_ dryRun: DryRunResponse) -> String {
        guard dryRun.audienceSize > 0 else {
            return "Would reach nobody: no active device matches this audience now."
        }
        let parts = dryRun.pushTypes.map { "\($0.devices) \($0.pushType)" }.joined(separator: ", ")
        return "Would reach \(dryRun.audienceSize) device\(dryRun.audienceSize == 1 ? "" : "s") (\(parts))."
    }

    func sendPage(app: App, form: [String: String], outcome: String?) async throws -> DashboardView {
        let preview = await self.preview(form, app: app, now: self.dashboard.backend.nowMilliseconds)
        func options(_ field: String, _ choices: [(String, String)]) -> [DashboardOption] {
            choices.map { DashboardOption(value: $0.0, label: $0.1, selected: (form[field] ?? "") == $0.0) }
        }
        let ok = preview["ok"]?.boolValue == true
        // The app's templates; the chosen one's variables get an input each (shown after a
        // preview, so the form needs no JavaScript).
        let templates = try await self.dashboard.store.templates(appID: app.id)
        let chosen = templates.first { $0.id == form["template"] }
        // The app's channels; the one a link names (base64url) or the form chose.
        let channels = try await self.dashboard.backend.channels(app)
        let chosenChannel = form["channel"].flatMap { id in
            channels.first { DashboardChannelsController.pathID($0.channelID) == DashboardChannelsController.pathID(id) }
        }?.channelID
        let variables = (chosen.flatMap { try? CompiledTemplate($0) }?.dataVariables ?? []).enumerated().map { index, name in
            Model.Variable(name: name, field: Self.variableField(name), inputID: "f-var-\(index)", value: form[Self.variableField(name)] ?? "")
        }
        let locales = (ok ? preview["locales"]?.arrayValue ?? [] : []).map { row in
            Model.Locale(
                locale: row["locale"]?.stringValue ?? "", title: row["title"]?.stringValue ?? "", subtitle: row["subtitle"]?.stringValue ?? "",
                body: row["body"]?.stringValue ?? "")
        }
        let model = Model(
            id: app.id, upperID: app.id.uppercased(), appPath: DashboardFormat.path(app.id), outcome: outcome,
            form: Model.Field(
                target: form["target"] ?? "", title: form["title"] ?? "", subtitle: form["subtitle"] ?? "", body: form["body"] ?? "",
                badge: form["badge"] ?? "", sound: form["sound"] ?? "", collapseId: form["collapseId"] ?? "", custom: form["custom"] ?? "",
                ignoreQuietHours: form["ignoreQuietHours"] != nil, throttlePerMinute: form["throttlePerMinute"] ?? "",
                contentState: form["contentState"] ?? "", staleDate: form["staleDate"] ?? "", dismissalDate: form["dismissalDate"] ?? ""
            ),
            audiences: options(
                "to", [("token", "a device token"), ("user", "a user id"), ("tag", "a tag"), ("channel", "a broadcast channel (Live Activity)")]),
            pushTypes: options(
                "pushType",
                [
                    ("", "from each device's kind"), ("alert", "alert"), ("background", "background"), ("voip", "voip"),
                    ("liveactivity", "liveactivity"),
                ]),
            priorities: options("priority", [("", "APNs default"), ("10", "10 (immediately)"), ("5", "5 (power-considerate)"), ("1", "1 (low)")]),
            capModes: options("frequencyCap", [("", "not sent (failed)"), ("defer", "sent when there is room")]),
            transports: options(
                "transports",
                [
                    ("", "every platform it can go to"), ("apns", "APNs (Apple) devices only"), ("fcm", "FCM (Android) devices only"),
                    ("webpush", "Web Push (browsers) only"),
                ]),
            previewTitle: ok ? (preview["title"]?.stringValue ?? "") : "",
            previewSubtitle: ok ? (preview["subtitle"]?.stringValue ?? "") : "", previewBody: ok ? (preview["body"]?.stringValue ?? "") : "",
            previewError: ok ? "" : preview["error"]?.stringValue ?? "",
            headerLines: !ok ? "" : preview["headers"]?.objectMembers?.map { "\($0.0): \($0.1.stringValue ?? "")" }.joined(separator: "\n") ?? "",
            bytes: ok ? "\(preview["bytes"]?.intValue ?? 0) bytes" : "", payload: ok ? preview["payload"]?.stringValue ?? "" : "",
            android: ok ? preview["android"]?.stringValue ?? "" : "", androidNote: ok ? preview["androidNote"]?.stringValue ?? "" : "",
            web: ok ? preview["web"]?.stringValue ?? "" : "", webNote: ok ? preview["webNote"]?.stringValue ?? "" : "",
            reach: ok ? preview["reach"]?.stringValue ?? "" : "",
            templates: [DashboardOption(value: "", label: "none: write the alert below", selected: chosen == nil)]
                + templates.map { DashboardOption(value: $0.id, label: $0.name, selected: $0.id == chosen?.id) },
            hasTemplates: !templates.isEmpty, variables: variables, locales: locales,
            channels: channels.map {
                let policy = $0.messageStoragePolicy == 1 ? "most recent kept" : "none kept"
                return DashboardOption(
                    value: $0.channelID, label: "\($0.channelID) (\(DashboardFormat.environmentName($0.environment)), \(policy))",
                    selected: chosenChannel == $0.channelID)
            },
            hasChannels: !channels.isEmpty,
            events: options("event", [("update", "update"), ("end", "end")])
        )
        return DashboardView(template: .send, title: "Send — \(app.id)", model: model, section: .apps)
    }
}

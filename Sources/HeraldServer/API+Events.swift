// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Foundation
import HeraldCore
import Hummingbird
import HTTPTypes
import NIOCore

/// Delivery events: a server-sent-events stream per app, and webhooks (admin).
extension API {
    func registerEvents(on v1: RouterGroup<BasicRequestContext>) {
        v1.get("apps/:app/events") { request, context in
            let app = try await self.app(request, context, scope: .send)
            return self.eventStream(appID: app.id, types: try Self.eventTypes(query: request.uri.queryParameters["types"].map(String.init)))
        }
        v1.post("apps/:app/webhooks") { request, context in
            let app = try await self.app(request, context, scope: .admin)
            let body = try await Self.body(request, context)
            let (webhook, secret) = try self.newWebhook(appID: app.id, url: body["url"]?.stringValue, types: try Self.eventTypes(json: body["events"]))
            try await self.store.createWebhook(webhook)
            self.events.webhooksChanged()
            var json = Self.webhookMembers(webhook)
            json.append(("secret", .string(secret)))
            return Self.json(.created, .object(json))
        }
        v1.get("apps/:app/webhooks") { request, context in
            let app = try await self.app(request, context, scope: .admin)
            return Self.json(.ok, .object([("webhooks", .array(try await self.store.webhooks(appID: app.id).map { .object(Self.webhookMembers($0)) }))]))
        }
        v1.delete("apps/:app/webhooks/:id") { request, context in
            let app = try await self.app(request, context, scope: .admin)
            guard try await self.store.deleteWebhook(appID: app.id, id: context.parameters.get("id") ?? "") else { throw HeraldError.notFound("webhook") }
            self.events.webhooksChanged()
            return Response(status: .noContent)
        }
        v1.get("apps/:app/webhooks/:id/messages") { request, context in
            let app = try await self.app(request, context, scope: .admin)
            let id = context.parameters.get("id") ?? ""
            guard try await self.store.webhooks(appID: app.id).contains(where: { $0.id == id }) else { throw HeraldError.notFound("webhook") }
            let limit = try Self.limit(request, fallback: 50, maximum: 500)
            let messages = try await self.store.webhookMessages(webhookID: id, limit: limit)
            return Self.json(.ok, .object([("messages", .array(messages.map(Self.webhookMessageJSON)))]))
        }
    }

    /// A webhook for `appID` with a new secret (returned once, stored sealed).
    func newWebhook(appID: String, url: String?, types: Set<DeliveryEventType>) throws -> (Webhook, String) {
        guard let url, url.utf8.count <= 2048, let parsed = URLComponents(string: url), let scheme = parsed.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = parsed.host, !host.isEmpty, parsed.user == nil
        else {
            throw HeraldError.invalid("url must be an http or https URL with a host (and no user name), at most 2048 bytes", code: "bad_url")
        }
        let bare = WebhookPoster.bareHost(host)
        if WebhookPoster.isAddressLiteral(bare), !self.webhookAllowInternal, WebhookPoster.isInternal(bare) {
            throw HeraldError.invalid(
                "url points at an internal address (loopback, private or link-local); start herald serve with --webhook-allow-internal to allow it",
                code: "bad_url"
            )
        }
        let secret = "whsec_" + Base64URL.encode(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
        let sealed: [UInt8]
        do {
            sealed = try self.secrets.seal(Array(secret.utf8))
        } catch {
            throw HeraldError(status: 500, code: "seal_failed", "cannot encrypt the webhook secret")
        }
        let webhook = Webhook(
            id: "wh_" + UUIDText.random().replacingOccurrences(of: "-", with: "").prefix(16), appID: appID, url: url, sealedSecret: sealed,
            types: types, createdAt: self.clock.nowMilliseconds
        )
        return (webhook, secret)
    }

    /// `types` of the query string: comma-separated names; absent means every event.
    static func eventTypes(query: String?) throws -> Set<DeliveryEventType> {
        guard let query else { return Set(DeliveryEventType.allCases) }
        return try Self.eventTypes(names: query.split(separator: ",").map(String.init))
    }

    /// A webhook's `events`: an array of names; absent means failures and invalidations.
    static func eventTypes(json: JSONValue?) throws -> Set<DeliveryEventType> {
        guard let json, !json.isNull else { return [.failed, .invalidated] }
        guard let array = json.arrayValue, array.allSatisfy({ $0.stringValue != nil }) else {
            throw HeraldError.invalid("events must be an array of event names", code: "bad_events")
        }
        return try Self.eventTypes(names: array.compactMap(\.stringValue))
    }

    static func eventTypes(names: [String]) throws -> Set<DeliveryEventType> {
        var types = Set<DeliveryEventType>()
        for name in names {
            guard let type = DeliveryEventType(rawValue: name) else {
                throw HeraldError.invalid(
                    "unknown event '\(name)': use \(DeliveryEventType.allCases.map(\.rawValue).joined(separator: ", "))", code: "bad_events"
                )
            }
            types.insert(type)
        }
        guard !types.isEmpty else { throw HeraldError.invalid("name at least one event", code: "bad_events") }
        return types
    }

    static func webhookMembers(_ webhook: Webhook) -> [(String, JSONValue)] {
        [
            ("id", .string(webhook.id)), ("url", .string(webhook.url)),
            ("events", .array(DeliveryEventType.allCases.filter(webhook.types.contains).map { .string($0.rawValue) })),
            ("createdAt", .int(webhook.createdAt)),
        ]
    }

    static func webhookMessageJSON(_ message: WebhookMessageRecord) -> JSONValue {
        .object([
            ("id", .int(message.id)), ("events", .int(Int64(message.events))), ("state", .string(message.state.rawValue)),
            ("attempts", .int(Int64(message.attempts))), ("createdAt", .int(message.createdAt)), ("expiresAt", .int(message.expiresAt)),
            ("nextAttemptAt", message.nextAttemptAt.map(JSONValue.int) ?? .null), ("deliveredAt", message.deliveredAt.map(JSONValue.int) ?? .null),
            ("lastStatus", message.lastStatus.map { .int(Int64($0)) } ?? .null), ("lastError", message.lastError.map(JSONValue.string) ?? .null),
        ])
    }

    /// `text/event-stream` of the app's events of `types`; ends when the client goes or the server stops.
    func eventStream(appID: String, types: Set<DeliveryEventType>) -> Response {
        let hub = self.events
        return Self.eventStreamResponse { writer in
            // Subscribed here, where the body is written: a client gone before this holds nothing.
            let (subscription, items, feed) = hub.subscribe(appID: appID)
            defer { hub.unsubscribe(subscription) }
            try await Self.writeEvents(&writer, preamble: ": herald delivery events\n", items: items, feed: feed) { event in
                guard types.contains(event.type) else { return nil }
                return "id: \(event.id)\nevent: \(event.type.rawValue)\ndata: \(String(decoding: event.json.serialized(), as: UTF8.self))\n\n"
            }
        }
    }

    /// A `text/event-stream` answer whose body `write` produces.
    static func eventStreamResponse(_ write: @escaping @Sendable (inout any ResponseBodyWriter) async throws -> Void) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            try await write(&writer)
            try await writer.finish(nil)
        })
    }

    /// Writes `items` as server-sent events (`render` gives each one's text, nil to skip it),
    /// with a comment every 15 s to keep proxies from closing an idle stream, until `items` ends
    /// or the client goes. `feed` is `items`' continuation (the keep-alive ticks go through it).
    static func writeEvents(
        _ writer: inout any ResponseBodyWriter, preamble: String, items: AsyncStream<StreamItem>, feed: AsyncStream<StreamItem>.Continuation,
        render: @Sendable (DeliveryEvent) -> String?
    ) async throws {
        try await writer.write(ByteBuffer(string: preamble + "retry: 2000\n\n"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(15))
                    feed.yield(.keepAlive)
                }
            }
            for await item in items {
                switch item {
                case .event(let event):
                    guard let text = render(event) else { continue }
                    try await writer.write(ByteBuffer(string: text))
                case .keepAlive:
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                }
            }
            group.cancelAll()
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/apps/{app}/webhooks` (admin keys): where delivery events are POSTed, signed.
struct WebhooksController {
    let store: any HeraldStore
    let secrets: SecretBox
    let clock: any EpochClock
    let events: DeliveryEvents
    /// Webhooks may point at loopback and private addresses.
    let allowInternal: Bool

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let admin = v1.group("apps/:app/webhooks").add(middleware: RequireScope(.admin, store: self.store, clock: self.clock))
        admin.post(use: self.create)
        admin.get(use: self.list)
        admin.delete(":id", use: self.delete)
        admin.get(":id/messages", use: self.messages)
    }

    /// 201 with the signing secret, shown this once.
    @Sendable func create(_ request: Request, context: APIRequestContext) async throws -> Answer<WebhookResponse> {
        let app = try context.requireApp()
        let body = try await request.decode(as: CreateWebhookRequest.self, context: context)
        let (webhook, secret) = try self.newWebhook(appID: app.id, url: body.url, types: try EventTypes.parse(body.events))
        try await self.store.createWebhook(webhook)
        self.events.webhooksChanged()
        return Answer(.created, WebhookResponse(webhook, secret: secret))
    }

    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> WebhookList {
        WebhookList(webhooks: try await self.store.webhooks(appID: try context.requireApp().id).map { WebhookResponse($0) })
    }

    @Sendable func delete(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        guard try await self.store.deleteWebhook(appID: app.id, id: context.parameters.get("id") ?? "") else { throw HeraldError.notFound("webhook") }
        self.events.webhooksChanged()
        return Response(status: .noContent)
    }

    @Sendable func messages(_ request: Request, context: APIRequestContext) async throws -> WebhookMessageList {
        let app = try context.requireApp()
        let id = context.parameters.get("id") ?? ""
        guard try await self.store.webhooks(appID: app.id).contains(where: { $0.id == id }) else { throw HeraldError.notFound("webhook") }
        let limit = try Validate.limit(request, fallback: 50, maximum: 500)
        let messages = try await self.store.webhookMessages(webhookID: id, limit: limit + 1, beforeID: try PageCursor.id(request, .webhookMessages))
        let page = PageCursor.page(messages, limit: limit) { PageCursor.next(.webhookMessages, id: $0.id) }
        return WebhookMessageList(messages: page.items.map(WebhookMessageResponse.init), next: page.next)
    }

    /// A webhook for `appID` with a new secret (returned once, stored sealed).
    func newWebhook(appID: String, url: String?, types: Set<DeliveryEventType>) throws -> (Webhook, String) {
        guard let url, url.utf8.count <= 2048, let parsed = URLComponents(string: url), let scheme = parsed.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = parsed.host, !host.isEmpty, parsed.user == nil
        else {
            throw HeraldError.invalid("url must be an http or https URL with a host (and no user name), at most 2048 bytes", code: "bad_url")
        }
        let bare = WebhookPoster.bareHost(host)
        if WebhookPoster.isAddressLiteral(bare), !self.allowInternal, WebhookPoster.isInternal(bare) {
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
            throw HeraldError(code: "seal_failed", "cannot encrypt the webhook secret")
        }
        let webhook = Webhook(
            id: "wh_" + UUIDText.random().replacingOccurrences(of: "-", with: "").prefix(16), appID: appID, url: url, sealedSecret: sealed,
            types: types, createdAt: self.clock.nowMilliseconds
        )
        return (webhook, secret)
    }
}

/// Event names, as the API takes them (`bad_events` for one Herald does not have).
enum EventTypes {
    /// `types` of the query string: comma-separated names; absent means every event.
    static func parse(query: String?) throws -> Set<DeliveryEventType> {
        guard let query else { return Set(DeliveryEventType.allCases) }
        return try Self.parse(names: query.split(separator: ",").map(String.init))
    }

    /// What a webhook gets when it names no events.
    static let defaultWebhookTypes: Set<DeliveryEventType> = [.failed, .invalidated]

    /// A webhook's `events`: absent means failures and invalidations.
    static func parse(_ names: [String]?) throws -> Set<DeliveryEventType> {
        guard let names else { return Self.defaultWebhookTypes }
        return try Self.parse(names: names)
    }

    static func parse(names: [String]) throws -> Set<DeliveryEventType> {
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
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HTTPTypes
import HeraldAPI
import HeraldCore
import Hummingbird

/// The dashboard's only door into the API layer: `API`, `NotificationRequest` and the HTTP
/// status of a `HeraldError` are used here and nowhere else in `Dashboard/`, so a change to the
/// API's shape is answered in this one file.
struct DashboardBackend: Sendable {
    private let api: API

    init(api: API) {
        self.api = api
    }

    var store: any HeraldStore { self.api.store }
    var events: DeliveryEvents { self.api.events }
    var nowMilliseconds: Int64 { self.api.clock.nowMilliseconds }

    /// A hex HMAC of `text` under the dashboard's key (derived from the master key).
    func authenticationCode(_ text: String) -> String {
        APIKeySecret.hex(self.api.secrets.authenticationCode(Array(text.utf8), purpose: "herald dashboard"))
    }

    /// Stored credential material, or nil when it cannot be opened (another master key?).
    func openCredential(_ sealed: [UInt8]) -> CredentialMaterial? {
        guard let opened = try? self.api.secrets.open(sealed) else { return nil }
        return try? CredentialCoding.decode(opened)
    }

    /// A new webhook, stored and announced: its id and its signing secret (shown once).
    func createWebhook(appID: String, url: String?, types: Set<DeliveryEventType>) async throws -> (id: String, secret: String) {
        let (webhook, secret) = try self.api.webhooks.newWebhook(appID: appID, url: url, types: types)
        try await self.store.createWebhook(webhook)
        self.api.events.webhooksChanged()
        return (webhook.id, secret)
    }

    func deleteWebhook(appID: String, id: String) async throws {
        _ = try await self.store.deleteWebhook(appID: appID, id: id)
        self.api.events.webhooksChanged()
    }

    /// The API's validation of a notification body, as `POST /v1/apps/{app}/notifications` does it.
    func notification(_ body: JSONValue, now: Int64) throws -> NotificationSpec {
        try NotificationRequest.parse(body, now: now)
    }

    /// Stores a notification and wakes the delivery engine: its id.
    func send(_ spec: NotificationSpec, app: App, now: Int64) async throws -> String {
        let created = try await self.store.createNotification(appID: app.id, id: UUIDText.random(), bundleID: app.bundleID, spec, now: now)
        self.api.engine.ring()
        return created.id
    }

    /// A device token as the API parses one (a 400 for what is not one).
    func token(_ text: String) throws -> DeviceToken {
        try Validate.token(text)
    }

    /// Registers a device from an API registration body, as the app would.
    func register(appID: String, body: JSONValue, token: String, now: Int64) async throws {
        let request = try APIRequestDecoder.decode(DeviceRegistrationRequest.self, json: body)
        let registration = try DevicesController.registration(request, token: try Validate.token(token))
        _ = try await self.store.register(appID: appID, registration, now: now)
    }

    /// The API keys as `GET /v1/keys` lists them (never a secret or a hash).
    func keys() async throws -> [APIKeyResponse] {
        try await self.store.apiKeys().map(APIKeyResponse.init)
    }

    static func isNotFound(_ error: HeraldError) -> Bool {
        error.status == .notFound
    }

    /// The HTTP status the API gives `error`.
    static func status(of error: HeraldError) -> HTTPResponse.Status {
        error.status
    }

    static func json(_ value: JSONValue) -> Response {
        API.json(.ok, value)
    }

    static func eventStreamResponse(_ write: @escaping @Sendable (inout any ResponseBodyWriter) async throws -> Void) -> Response {
        EventStream.response(write)
    }

    static func writeEvents(
        _ writer: inout any ResponseBodyWriter, items: AsyncStream<StreamItem>, feed: AsyncStream<StreamItem>.Continuation,
        render: @Sendable (DeliveryEvent) -> String?
    ) async throws {
        try await EventStream.write(&writer, preamble: "", items: items, feed: feed, render: render)
    }
}

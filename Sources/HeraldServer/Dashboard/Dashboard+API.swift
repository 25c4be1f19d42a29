// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import FCMClient
import Foundation
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
    /// The API's authenticator: the dashboard's sign-in checks keys and counts failures with it.
    var authenticator: APIKeyAuthenticator { self.api.authenticator }

    /// The client a request counts against, as the API's rate limits name it.
    func clientAddress(_ request: Request, peer context: some RequestContext) -> String? {
        let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress?.ipAddress
        return self.authenticator.limits.clientAddress(peer: peer, forwardedFor: request.headers[values: .forwardedFor])
    }

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

    /// As `POST /v1/apps/{app}/notifications` accepts a body: validated, and with a `template`,
    /// the app's template checked against `data` (every variable of every variant).
    func notification(_ body: JSONValue, app: App, now: Int64) async throws -> NotificationSpec {
        let request = try APIRequestDecoder.decode(SendRequest.self, json: body)
        var spec = try NotificationRequest.spec(request, now: now)
        try await NotificationRequest.applyTemplate(request, to: &spec, appID: app.id, store: self.store)
        try await NotificationRequest.requireContent(spec, appID: app.id, store: self.store)
        return spec
    }

    /// A new template of the app, checked and stored as `POST /v1/apps/{app}/templates` does it.
    func createTemplate(_ body: SaveTemplateRequest, appID: String) async throws {
        let (template, _) = try TemplatesController.template(body, appID: appID, id: TemplatesController.newID(), now: self.nowMilliseconds)
        _ = try await self.store.saveTemplate(template)
    }

    /// The `apns-expiration` a broadcast of `spec` on `channel` goes with, as the send would use it.
    func broadcastExpiration(_ channel: StoredChannel, _ spec: NotificationSpec) throws -> Int64 {
        try channel.broadcastExpiration(spec.expiration, nowSeconds: self.nowMilliseconds / 1000)
    }

    /// The collapse id a push of `spec` carries (a placeholder for the notification's id when the
    /// sender gives none), as a dry run shows it.
    func collapseID(_ spec: NotificationSpec) -> String { SentForm.collapseID(spec) }

    /// `payload` as the engine sends it to a device: with its receipt id's placeholder where the app's pushes carry one.
    func sentPayload(_ payload: [UInt8], pushType: PushType, app: App) -> [UInt8] { SentForm.payload(payload, pushType: pushType, app: app) }

    /// A templated notification's payload per variant (the default first, then by locale); nil
    /// for one without a template.
    func variants(_ spec: NotificationSpec) throws -> [(locale: String?, payload: [UInt8])]? {
        try NotificationRequest.rendering(spec)?.allPayloads()
    }

    /// What a send would do now, as `"dryRun": true` answers it: the audience and, per push type,
    /// the headers and payload.
    func dryRun(_ spec: NotificationSpec, app: App) async throws -> DryRunResponse {
        try await NotificationsController.dryRun(spec, app: app, store: self.store)
    }

    /// The Android (FCM) request body a send of `body` (`spec`, as ``notification(_:app:now:)``
    /// made it) would post for one device — to `target` (`fcm:…` or `fid:…`) when it names one,
    /// else a stand-in for each device's token — or, when no Android device would get it, why.
    func fcmMessage(_ spec: NotificationSpec, body: JSONValue, app: App, target: String?) -> (message: [UInt8]?, reason: String?) {
        guard var part = spec.parts[.fcm] else { return (nil, Self.notCarriedReason(spec, body: body, transport: .fcm)) }
        // Sent by template: the default variant, as a device without a locale gets it.
        if let template = spec.template, let rendering = TemplateRendering(stored: template.stored, payload: spec.payload, parts: spec.parts),
            let rendered = try? rendering.payload(for: TemplateDevice(), transport: .fcm)
        {
            part = rendered
        }
        let nowSeconds = self.nowMilliseconds / 1000
        let ttl = spec.expiration.map { $0 == 0 ? 0 : max(0, $0 - nowSeconds) }
        guard let frame = FCMPart.Frame(part: part, ttl: ttl, priority: spec.priority, collapseKey: spec.collapseID) else {
            return (nil, "the FCM part cannot be read")
        }
        let address = target.flatMap(PushAddress.storedIdentifier).flatMap { PushAddress.fcmTarget(stored: $0) }
        let pushType = spec.pushType ?? .alert
        let extra = app.security.receipts && (pushType == .alert || pushType == .background) ? [("hr", SentForm.receiptPlaceholder)] : []
        return (frame.body(field: address?.field ?? "token", target: address?.value ?? "<each device's registration token>", extra: extra), nil)
    }

    /// The Declarative Web Push message a browser would decrypt for a send of `body` (`spec`, as
    /// ``notification(_:app:now:)`` made it): the web part built as the API builds it
    /// (`NotificationRequest.webPushPart`; a template's default variant), with the receipt id's
    /// placeholder where the app's pushes carry one — or, when no browser would get it, why.
    func webPushMessage(_ spec: NotificationSpec, body: JSONValue, app: App) -> (message: [UInt8]?, reason: String?) {
        guard var part = spec.parts[.webpush] else { return (nil, Self.notCarriedReason(spec, body: body, transport: .webpush)) }
        if let template = spec.template, let rendering = TemplateRendering(stored: template.stored, payload: spec.payload, parts: spec.parts),
            let rendered = try? rendering.payload(for: TemplateDevice(), transport: .webpush)
        {
            part = rendered
        }
        let pushType = spec.pushType ?? .alert
        let receipts = app.security.receipts && (pushType == .alert || pushType == .background)
        return (WebPushPart.message(part, extra: receipts ? [(ReceiptID.payloadKey, SentForm.receiptPlaceholder)] : []), nil)
    }

    /// The name a transport's service goes by in the dashboard's sentences.
    static func serviceName(_ transport: Transport) -> String {
        switch transport {
        case .apns: "APNs"
        case .fcm: "FCM"
        case .webpush: "Web Push"
        }
    }

    /// Why a notification has no part for `transport` (FCM or Web Push): what only APNs carries,
    /// the transports asked for, or — in the refusal's own words — what that service would refuse
    /// of its content (the web: no title, too large, a link that is not http(s)).
    static func notCarriedReason(_ spec: NotificationSpec, body: JSONValue, transport: Transport) -> String {
        if let pushType = spec.pushType, pushType != .alert, pushType != .background {
            return "push type \(pushType.rawValue) is APNs's alone"
        }
        switch spec.audience {
        case .activity: return "a Live Activity is APNs's alone"
        case .channel: return "a broadcast channel is APNs's alone"
        default: break
        }
        if spec.placeholder != nil { return "end-to-end encryption is APNs's alone" }
        if !spec.kinds.isEmpty, !spec.kinds.contains(.device) { return "the kinds asked for are Apple tokens only" }
        // The transports the sender named (the spec's are those that can carry it too).
        let request = try? APIRequestDecoder.decode(SendRequest.self, json: body)
        let asked = Set((request?.transports ?? []).compactMap(Transport.init(rawValue:)))
        if !asked.isEmpty, !asked.contains(transport) {
            return "sent to \(asked.sorted().map(Self.serviceName).joined(separator: " and ")) devices only, as asked"
        }
        let refuser = transport == .webpush ? "browsers" : Self.serviceName(transport)
        if let request {
            do {
                switch transport {
                case .fcm:
                    _ = try NotificationRequest.fcmPart(
                        request, json: try NotificationRequest.payloadJSON(request), templated: request.template != nil)
                case .webpush: _ = try NotificationRequest.webPushPart(request, templated: request.template != nil)
                case .apns: break
                }
            } catch let error as HeraldError {
                return "\(refuser) would refuse it (\(error.code)): \(error.message)"
            } catch {
                return "\(refuser) would refuse it"
            }
        }
        return "\(Self.serviceName(transport)) cannot carry it"
    }

    /// Stores a notification and wakes the delivery engine: its id.
    func send(_ spec: NotificationSpec, app: App, now: Int64) async throws -> String {
        var spec = spec
        try NotificationRequest.admit(&spec, app: app)
        let created = try await self.store.createNotification(appID: app.id, id: UUIDText.random(), bundleID: app.bundleID, spec, now: now)
        self.api.engine.ring()
        return created.id
    }

    // MARK: channels (as `/v1/apps/{app}/channels` and `audience: {"channel"}` do it)

    private var channels: ChannelsController {
        ChannelsController(store: self.api.store, clients: self.api.clients, clock: self.api.clock)
    }

    /// The app's channels, sandbox's then production's, each oldest first (as `GET …/channels`).
    func channels(_ app: App) async throws -> [StoredChannel] {
        var channels: [StoredChannel] = []
        for environment in APNSEnvironment.allCases { channels += try await self.store.channels(appID: app.id, environment: environment) }
        return channels
    }

    /// The app's channel with this id (base64, or base64url); 404 `channel_not_found`.
    func channel(_ app: App, id: String) async throws -> StoredChannel {
        try await ChannelsController.stored(self.store, appID: app.id, channelID: try ChannelsController.channelID(id).rawValue)
    }

    /// A new channel at APNs (or the emulator), kept here: `environment` is `sandbox` or
    /// `production`, `policy` `0` or `1`; Apple's refusals come as the API's codes.
    func createChannel(_ app: App, environment: String, policy: String) async throws -> StoredChannel {
        let environment = try ChannelsController.environment(environment)
        guard let policy = Int(policy).flatMap(APNSMessageStoragePolicy.init(rawValue:)) else {
            throw HeraldError.invalid("messageStoragePolicy is 0 (no message stored) or 1 (the most recent)", code: "bad_message_storage_policy")
        }
        return try await self.channels.create(app: app, environment: environment, policy: policy)
    }

    /// Deletes the app's channel at APNs, then here.
    func deleteChannel(_ app: App, id: String) async throws {
        try await self.channels.delete(try await self.channel(app, id: id), app: app)
    }

    /// The channel ids APNs holds for the app in `environment`.
    func channelsAtAPNs(_ app: App, environment: APNSEnvironment) async throws -> Set<String> {
        try await self.channels.atAPNs(app: app, environment: environment, timeout: .seconds(5))
    }

    /// Sends a notification whose audience is a channel as the API does: one broadcast, sent now,
    /// then recorded; its id.
    func broadcast(_ spec: NotificationSpec, app: App) async throws -> String {
        guard case .channel(let channelID) = spec.audience else { throw ChannelsController.notFound }
        var spec = spec
        try NotificationRequest.admit(&spec, app: app)
        let controller = NotificationsController(store: self.api.store, engine: self.api.engine, clients: self.api.clients, clock: self.api.clock)
        return try await controller.broadcast(spec, channelID: channelID, app: app).body.id
    }

    // MARK: Live Activities (as `/v1/apps/{app}/live-activities` does them)

    private var liveActivities: LiveActivitiesController {
        LiveActivitiesController(store: self.api.store, engine: self.api.engine, clients: self.api.clients, clock: self.api.clock)
    }

    /// The app's activities, newest first, each brought up to date as `GET …/live-activities` does.
    func liveActivities(_ app: App, activeOnly: Bool) async throws -> [LiveActivityResponse] {
        try await self.liveActivities.list(app: app, activeOnly: activeOnly, limit: 500)
    }

    /// The app's activity `id` as `GET …/live-activities/{id}` answers it, and its newest content
    /// state (JSON text); 404 `activity_not_found`.
    func liveActivity(_ app: App, id: String) async throws -> (activity: LiveActivityResponse, contentState: String) {
        try await self.liveActivities.readWithState(id: id, app: app)
    }

    /// Starts an activity from a `POST …/live-activities` body, checked as the API checks it.
    func startLiveActivity(_ app: App, body: JSONValue) async throws -> LiveActivityResponse {
        try await self.liveActivities.start(try APIRequestDecoder.decode(StartLiveActivityRequest.self, json: body), app: app)
    }

    /// Sends an update from a `PATCH …/live-activities/{id}` body.
    func updateLiveActivity(_ app: App, id: String, body: JSONValue) async throws -> LiveActivityResponse {
        try await self.liveActivities.update(id: id, try APIRequestDecoder.decode(UpdateLiveActivityRequest.self, json: body), app: app)
    }

    /// Ends the activity as `DELETE …/live-activities/{id}?dismissalDate=` does (UNIX seconds).
    func endLiveActivity(_ app: App, id: String, dismissalDate: Int64?) async throws -> LiveActivityResponse {
        try await self.liveActivities.end(id: id, dismissalDate: dismissalDate.map(String.init), app: app)
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

    // MARK: setup (as the admin API does it)

    /// A new app, validated as `POST /v1/apps` validates it.
    func createApp(id: String, bundleID: String) async throws -> App {
        let app = App(
            id: try Validate.string(id, "id", pattern: .identifier), bundleID: try Validate.string(bundleID, "bundleId", pattern: .bundleID),
            createdAt: self.nowMilliseconds
        )
        try await self.store.createApp(app)
        return app
    }

    /// Begins the app's deletion, as `DELETE /v1/apps/{app}` does (audited): its keys and
    /// credentials go at once, its rows in the background (``AppDeletions``).
    func deleteApp(_ app: App, by keyID: String) async throws {
        let now = self.nowMilliseconds
        if app.deletion == nil {
            try await self.store.addAudit(AuditRecord(at: now, keyID: keyID, action: "app.delete", appID: app.id, subject: nil))
        }
        _ = try await self.store.beginAppDeletion(appID: app.id, now: now)
        self.api.appDeletions.ring()
    }

    /// Changes the app's user verification, protected tags, quiet hours (`HH:MM` start and end,
    /// both empty for none), frequency cap (limit and window in seconds, both empty for none) and
    /// default throttle (empty for none), as `PATCH /v1/apps/{app}` does.
    func updateApp(
        _ app: App, userVerification: Bool, protectedTags: [String], quietHours: (start: String, end: String),
        frequencyCap: (limit: String, window: String, perCategory: Bool), throttlePerMinute: String, unboundAssertions: Bool,
        rateLimits: [String: String?]
    ) async throws {
        var security = app.security
        security.unboundAssertions = unboundAssertions
        security.rateLimits = try AppsController.rateLimits(security.rateLimits, rateLimits)
        guard protectedTags.count <= 100, protectedTags.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 64 }) else {
            throw HeraldError.invalid("protected tags: up to 100 tags of 1 to 64 bytes", code: "bad_protectedTags")
        }
        security.userVerification = userVerification
        security.protectedTags = Array(Set(protectedTags)).sorted()
        let (start, end) = (quietHours.start.trimmingCharacters(in: .whitespaces), quietHours.end.trimmingCharacters(in: .whitespaces))
        if start.isEmpty, end.isEmpty {
            security.quietHours = nil
        } else {
            // A browser's time input may add seconds ("22:00:00").
            guard let parsed = QuietHours(start: String(start.prefix(5)), end: String(end.prefix(5))) else {
                throw HeraldError.invalid("quiet hours: a start and an end as HH:MM (they differ), or neither", code: "bad_quietHours")
            }
            security.quietHours = parsed
        }
        let (limit, window) = (frequencyCap.limit.trimmingCharacters(in: .whitespaces), frequencyCap.window.trimmingCharacters(in: .whitespaces))
        if limit.isEmpty, window.isEmpty {
            security.frequencyCap = nil
        } else {
            guard let limit = Int(limit), let window = Int64(window),
                let parsed = FrequencyCap(limit: limit, windowSeconds: window, perCategory: frequencyCap.perCategory)
            else {
                throw HeraldError.invalid(
                    "frequency cap: 1 to 1000 alerts in a window of 60 to 2592000 seconds, or neither", code: "bad_frequencyCap")
            }
            security.frequencyCap = parsed
        }
        let throttle = throttlePerMinute.trimmingCharacters(in: .whitespaces)
        if throttle.isEmpty || throttle == "0" {
            security.throttlePerMinute = nil
        } else {
            guard let value = Int(throttle), Throttle.limits.contains(value) else {
                throw HeraldError.invalid("throttle: 1 to 100000 deliveries a minute, or empty for none", code: "bad_throttlePerMinute")
            }
            security.throttlePerMinute = value
        }
        guard try await self.store.setAppSecurity(appID: app.id, security) else { throw HeraldError.notFound("app '\(app.id)'") }
    }

    /// Checks and stores (sealed) an environment's credentials, as `PUT /v1/apps/{app}/credentials/{environment}` does.
    func setCredential(_ app: App, environment: APNSEnvironment, _ body: CredentialRequest) async throws {
        let material = try AppsController.credential(body)
        let sealed: [UInt8]
        do {
            sealed = try self.api.secrets.seal(CredentialCoding.encode(material))
        } catch {
            throw HeraldError(code: "seal_failed", "cannot encrypt the credentials")
        }
        try await self.store.setCredential(appID: app.id, environment: .apns(environment), sealed: sealed, now: self.nowMilliseconds)
    }

    /// Checks and stores (sealed) the app's FCM service account from its key file's text, as
    /// `PUT /v1/apps/{app}/credentials/fcm` does it (`missing_serviceAccount`, `invalid_json`,
    /// `bad_service_account`; a message never quotes the key).
    func setFCMCredential(_ app: App, json text: String?) async throws {
        guard let text else {
            throw HeraldError.invalid("choose the service account's key file (JSON), or paste its text", code: "missing_serviceAccount")
        }
        guard let account = try? JSONValue.parse(Array(text.utf8)) else {
            throw HeraldError.invalid(
                "the service account is not JSON: give the key file as the Firebase console downloads it", code: "invalid_json")
        }
        let body = try APIRequestDecoder.decode(CredentialRequest.self, json: .object([("serviceAccount", account)]))
        let plain = try AppsController.fcmCredential(body)
        let sealed: [UInt8]
        do {
            sealed = try self.api.secrets.seal(plain)
        } catch {
            throw HeraldError(code: "seal_failed", "cannot encrypt the credentials")
        }
        try await self.store.setCredential(appID: app.id, environment: .fcm, sealed: sealed, now: self.nowMilliseconds)
    }

    /// The stored FCM service account, opened (its project, email and key id; never shown: the
    /// key), or why it cannot be.
    func openFCMCredential(_ sealed: [UInt8]) -> Result<FCMServiceAccountKey, HeraldError> {
        do {
            return .success(try FCMClientProvider.open(sealed, secrets: self.api.secrets))
        } catch {
            return .failure(error)
        }
    }

    /// Deletes a route's credentials, as `DELETE /v1/apps/{app}/credentials/{environment}` does
    /// (audited); false when there were none.
    func deleteCredential(_ app: App, route: Route, by keyID: String) async throws -> Bool {
        guard try await self.store.deleteCredential(appID: app.id, environment: route) else { return false }
        try await self.store.addAudit(
            AuditRecord(at: self.nowMilliseconds, keyID: keyID, action: "credentials.delete", appID: app.id, subject: route.apiName))
        return true
    }

    /// The stored form of a device's identifier as the API takes it in a path (an APNs token in
    /// hex, `fcm:<token>`, `fid:<FID>`, a browser's `wp:<hash>`; `bad_device_token`).
    func deviceIdentifier(_ text: String) throws -> String {
        guard let stored = PushAddress.storedIdentifier(text) else {
            throw HeraldError.invalid(
                "the device is named by its APNs token (hex), fcm:<token>, fid:<FID> or wp:<its endpoint's hash>", code: "bad_device_token")
        }
        return stored
    }

    // MARK: Web Push (as `/v1/apps/{app}/webpush/key` does it, through the same functions)

    private var webPush: WebPushController {
        WebPushController(store: self.api.store, keys: self.api.vapidKeys, clock: self.api.clock)
    }

    /// The app's VAPID public key (the `applicationServerKey`), made now if it has none, as
    /// `GET …/webpush/key` makes it. The private key never leaves ``VAPIDKeys``.
    func webPushPublicKey(_ app: App) async throws -> String {
        try await self.webPush.applicationServerKey(appID: app.id)
    }

    /// A new VAPID key for the app, as `POST …/webpush/key` makes it (audited `webpush.rotate`
    /// by `keyID`): its public key.
    func rotateWebPushKey(_ app: App, by keyID: String) async throws -> String {
        try await self.webPush.newKey(appID: app.id, by: keyID)
    }

    /// The active devices of the app reached through `transport` (one count query).
    func activeDevices(_ app: App, transport: Transport) async throws -> Int {
        try await self.store.audienceKinds(appID: app.id, targeting: Targeting(audience: .all, transports: [transport])).values.reduce(0, +)
    }

    /// A new API key, as `POST /v1/keys` makes it: its id and its secret (shown once).
    func createKey(scope: APIScope, appID: String?, name: String?, expiresAt: Int64? = nil) async throws -> (id: String, secret: String) {
        if let appID, try await self.store.app(appID) == nil { throw HeraldError.notFound("app '\(appID)'") }
        if scope == .register, appID == nil {
            throw HeraldError.invalid("a register key belongs to one app: choose the app", code: "app_required")
        }
        let secret = APIKeySecret.generate()
        try await self.store.createAPIKey(
            id: secret.id, hash: secret.hash, scope: scope, appID: appID, name: name, expiresAt: expiresAt, now: self.nowMilliseconds)
        return (secret.id, secret.token)
    }

    /// A key's successor, as `POST /v1/keys/{id}/rotate` makes it (the old one works on for a day).
    func rotateKey(id: String) async throws -> (id: String, secret: String) {
        let now = self.nowMilliseconds
        let secret = APIKeySecret.generate()
        guard
            try await self.store.rotateAPIKey(
                replacing: id, id: secret.id, hash: secret.hash, expiresAt: nil, overlapUntil: now + 86_400_000, now: now)
                != nil
        else { throw HeraldError.notFound("API key '\(id)'") }
        return (secret.id, secret.token)
    }

    func revokeKey(id: String) async throws {
        guard try await self.store.revokeAPIKey(id: id, now: self.nowMilliseconds) else { throw HeraldError.notFound("API key '\(id)'") }
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
        watch: EventStream.Watch?, render: @Sendable (DeliveryEvent) -> String?
    ) async throws {
        try await EventStream.write(&writer, preamble: "", items: items, feed: feed, watch: watch, render: render)
    }

    var clock: any EpochClock { self.api.clock }
}

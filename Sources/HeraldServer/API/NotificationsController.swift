// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/apps/{app}/notifications` (send keys): send, list, read with deliveries, cancel.
struct NotificationsController {
    let store: any HeraldStore
    let engine: DeliveryEngine
    let clients: ClientProvider
    let clock: any EpochClock
    var rateLimit: RateLimitGate?

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        v1.group("apps/:app/notifications").add(middleware: RateLimit(operation: .send, gate: self.rateLimit))
            .add(middleware: RequireScope(.send, store: self.store, clock: self.clock))
            .post(use: self.send)
        let send = v1.group("apps/:app/notifications").add(middleware: RequireScope(.send, store: self.store, clock: self.clock))
        send.get(use: self.list)
        send.get(":id", use: self.show)
        send.delete(":id", use: self.cancel)
    }

    /// 202 once the notification and its audience are committed (200 for a repeated idempotency key).
    /// With `"dryRun": true`, 200 with what would be sent (``dryRun(_:app:)``): nothing is written.
    @Sendable func send(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let now = self.clock.nowMilliseconds
        let body = try await request.decode(as: SendRequest.self, context: context)
        var spec = try NotificationRequest.spec(body, now: now)
        try await NotificationRequest.applyTemplate(body, to: &spec, appID: app.id, store: self.store)
        try await NotificationRequest.requireContent(spec, appID: app.id, store: self.store)
        try NotificationRequest.admit(&spec, app: app)
        if case .channel(let channelID) = spec.audience {
            return try await self.broadcast(spec, channelID: channelID, app: app).response(from: request, context: context)
        }
        if body.dryRun == true {
            return try Answer(.ok, try await Self.dryRun(spec, app: app, store: self.store)).response(from: request, context: context)
        }
        let created = try await self.store.createNotification(appID: app.id, id: UUIDText.random(), bundleID: app.bundleID, spec, now: now)
        if !created.existing { self.engine.ring() }
        return try Answer(
            created.existing ? .ok : .accepted,
            SendResponse(
                id: created.id, deliveries: created.deliveries, duplicate: created.existing, unknownTokens: created.unknownTokens,
                inactiveTokens: created.inactiveTokens,
                transports: created.existing ? nil : (spec.transports.isEmpty ? Transport.allCases : spec.transports.sorted()).map(\.rawValue)
            )
        ).response(from: request, context: context)
    }

    /// `audience: {"channel"}`: one broadcast, sent now through the app's client for the
    /// channel's environment, and recorded once APNs accepted it as one notification with one
    /// delivery (the channel's), never one per subscriber. A refusal is answered with its code
    /// (``ChannelsController/heraldError(_:)``) and nothing is recorded.
    func broadcast(_ spec: NotificationSpec, channelID: String, app: App) async throws -> Answer<SendResponse> {
        let channel = try await ChannelsController.stored(self.store, appID: app.id, channelID: channelID)
        guard let id = APNSChannelID(rawValue: channel.channelID) else { throw ChannelsController.notFound }
        let expiration = try channel.broadcastExpiration(spec.expiration, nowSeconds: self.clock.nowMilliseconds / 1000)
        let client = try await self.clients.client(appID: app.id, environment: channel.environment)
        let started = ContinuousClock.now
        let delivery: APNSBroadcastDelivery
        do {
            delivery = try await client.broadcast(
                APNSBroadcastRequest(
                    channelID: id, bundleID: app.bundleID, payload: spec.payload, priority: spec.priority ?? .throttled,
                    expiration: expiration))
        } catch {
            throw ChannelsController.heraldError(error)
        }
        let now = self.clock.nowMilliseconds
        let notificationID = UUIDText.random()
        try await self.store.recordBroadcast(
            BroadcastRecord(
                appID: app.id, id: notificationID, bundleID: app.bundleID, spec: spec, environment: channel.environment, channelID: channel.channelID,
                requestID: delivery.requestID, latencyMilliseconds: (ContinuousClock.now - started).wholeMilliseconds, now: now))
        return Answer(.accepted, SendResponse(id: notificationID, deliveries: 1, duplicate: false, unknownTokens: nil, inactiveTokens: nil))
    }

    /// The audience a notification would reach now and, per push type its devices would get,
    /// the exact APNs headers and payload (as the delivery engine builds them).
    static func dryRun(_ spec: NotificationSpec, app: App, store: any HeraldStore) async throws -> DryRunResponse {
        // Each transport's devices counted apart: APNs's by kind (their push types), FCM's as one message.
        func narrowed(to transport: Transport) -> Targeting? {
            guard spec.transports.isEmpty || spec.transports.contains(transport) else { return nil }
            guard transport == .apns || spec.parts[transport] != nil else { return nil }
            var targeting = spec.targeting
            targeting.transports = [transport]
            return targeting
        }
        var kinds: [DeviceKind: Int] = [:]
        if let targeting = narrowed(to: .apns) { kinds = try await store.audienceKinds(appID: app.id, targeting: targeting) }
        var fcm: DryRunFCM?
        if let targeting = narrowed(to: .fcm), let part = spec.parts[.fcm] {
            let devices = try await store.audienceKinds(appID: app.id, targeting: targeting).values.reduce(0, +)
            let ttl = spec.expiration.map { $0 == 0 ? 0 : max(0, $0 - Int64(Date().timeIntervalSince1970)) }
            if devices > 0, let frame = FCMPart.Frame(part: part, ttl: ttl, priority: spec.priority, collapseKey: spec.collapseID) {
                let receipt: [(String, String)] = app.security.receipts ? [("hr", "<receipt id>")] : []
                fcm = DryRunFCM(
                    devices: devices, message: String(decoding: frame.body(field: "token", target: "<token>", extra: receipt), as: UTF8.self))
            }
        }
        var devices: [PushType: Int] = [:]
        for (kind, count) in kinds where count > 0 { devices[spec.pushType ?? kind.defaultPushType, default: 0] += count }
        let rendered = try NotificationRequest.rendering(spec)?.allPayloads()
        let pushes = devices.keys.sorted { $0.rawValue < $1.rawValue }.map { pushType in
            // As the engine sends it: the collapse id every push carries, the receipt id spliced in.
            func sent(_ bytes: [UInt8]) -> String { String(decoding: SentForm.payload(bytes, pushType: pushType, app: app), as: UTF8.self) }
            let variants = rendered?.map { DryRunVariant(locale: $0.locale, payload: sent($0.payload)) }
            var headers = ["apns-push-type": pushType.rawValue, "apns-topic": pushType.topic(forBundleID: app.bundleID)]
            if let priority = spec.priority { headers["apns-priority"] = "\(priority.rawValue)" }
            if let expiration = spec.expiration { headers["apns-expiration"] = "\(expiration)" }
            headers["apns-collapse-id"] = SentForm.collapseID(spec)
            return DryRunPush(
                pushType: pushType.rawValue, devices: devices[pushType] ?? 0, headers: headers,
                payload: variants?.first?.payload ?? sent(spec.payload),
                variants: variants)
        }
        return DryRunResponse(audienceSize: kinds.values.reduce(0, +) + (fcm?.devices ?? 0), pushTypes: pushes, fcm: fcm)
    }

    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> NotificationList {
        let app = try context.requireApp()
        let limit = try Validate.limit(request, fallback: 50, maximum: 500)
        var before: Int64?
        if let text = request.uri.queryParameters["before"] {
            guard let value = Int64(String(text)), value > 0 else {
                throw HeraldError.invalid("before must be a time in milliseconds since 1970", code: "bad_before")
            }
            before = value
        }
        // `before` (a time) still works; a page's `next` cursor goes on from its last notification,
        // among those created in the same millisecond too.
        let after = try PageCursor.notification(request)
        let summaries = try await self.store.notifications(appID: app.id, limit: limit + 1, before: before, after: after)
        let page = PageCursor.page(summaries, limit: limit) { PageCursor.next(NotificationPosition(createdAt: $0.createdAt, id: $0.id)) }
        return NotificationList(notifications: page.items.map(NotificationSummaryResponse.init), next: page.next)
    }

    @Sendable func show(_ request: Request, context: APIRequestContext) async throws -> NotificationDetail {
        let app = try context.requireApp()
        guard let status = try await self.store.notification(appID: app.id, id: context.parameters.get("id") ?? "", deliveryLimit: 1000) else {
            throw HeraldError.notFound("notification")
        }
        return NotificationDetail(status, receipts: try await self.store.receiptCounts(appID: app.id, notificationID: status.id))
    }

    @Sendable func cancel(_ request: Request, context: APIRequestContext) async throws -> CancelResponse {
        let app = try context.requireApp()
        let id = context.parameters.get("id") ?? ""
        guard try await self.store.notification(appID: app.id, id: id, deliveryLimit: 0) != nil else { throw HeraldError.notFound("notification") }
        return CancelResponse(cancelled: try await self.store.cancelNotification(appID: app.id, id: id, now: self.clock.nowMilliseconds))
    }
}

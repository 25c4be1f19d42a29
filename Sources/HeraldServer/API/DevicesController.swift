// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird
import WebPush

/// `/v1/apps/{app}/devices`: register and unregister (register keys, the ones inside apps), and
/// read the registry with each token's deliveries (send keys).
struct DevicesController {
    let store: any HeraldStore
    let secrets: SecretBox
    let clock: any EpochClock
    var rateLimit: RateLimitGate?
    /// Which Web Push endpoints a subscription may name (no request to an address a caller chose).
    var webPushEndpoints = WebPushEndpointPolicy()

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let register = v1.group("apps/:app/devices").add(middleware: RateLimit(operation: .register, gate: self.rateLimit))
            .add(middleware: RequireScope(.register, store: self.store, clock: self.clock))
        register.put(":token", use: self.register)
        register.delete(":token", use: self.unregister)
        v1.group("apps/:app/registrations").add(middleware: RateLimit(operation: .register, gate: self.rateLimit))
            .add(middleware: RequireScope(.register, store: self.store, clock: self.clock))
            .post(use: self.registerByBody)
        let read = v1.group("apps/:app/devices").add(middleware: RequireScope(.send, store: self.store, clock: self.clock))
        read.get(use: self.list)
        read.get(":token", use: self.show)
        read.get(":token/deliveries", use: self.deliveries)
    }

    @Sendable func register(_ request: Request, context: APIRequestContext) async throws -> DeviceResponse {
        let app = try context.requireApp()
        let token = try Validate.token(context)
        let body = try await request.decode(as: DeviceRegistrationRequest.self, context: context)
        return try await self.commit(
            try self.registration(body, app: app, key: try context.requireKey(), address: .apns(token, environment: .production)), app: app)
    }

    /// `POST …/registrations`: a device named in the body (an FCM token or FID, or an APNs token).
    @Sendable func registerByBody(_ request: Request, context: APIRequestContext) async throws -> DeviceResponse {
        let app = try context.requireApp()
        let body = try await request.decode(as: RegistrationRequest.self, context: context)
        if body.transport == Transport.webpush.rawValue {
            let subscription = try self.webSubscription(body)
            var checked = try self.registration(
                body.common, app: app, key: try context.requireKey(), address: .webPush(endpoint: subscription.endpoint))
            checked.registration = subscription.registration(checked.registration)
            return try await self.commit(checked, app: app)
        }
        let address = try Self.address(body)
        return try await self.commit(try self.registration(body.common, app: app, key: try context.requireKey(), address: address), app: app)
    }

    /// A Web Push registration's subscription, checked: an endpoint on an allowed push service
    /// (`endpoint_not_allowed`, `bad_endpoint`), `p256dh` an uncompressed P-256 point
    /// (`bad_p256dh`), `auth` 16 octets (`bad_auth`); no token or fid beside it.
    func webSubscription(_ body: RegistrationRequest) throws -> WebSubscription {
        guard let subscription = body.subscription else {
            throw HeraldError.invalid(
                "a webpush registration names its subscription: {endpoint, keys: {p256dh, auth}}", code: "missing_subscription")
        }
        guard body.token == nil, body.fid == nil else {
            throw HeraldError.invalid("a webpush registration names its subscription, not a token or fid", code: "bad_registration")
        }
        let endpoint = subscription.endpoint
        guard !endpoint.isEmpty, endpoint.utf8.count <= WebSubscription.maximumEndpointLength, VAPID.origin(of: endpoint) != nil else {
            throw HeraldError.invalid(
                "subscription.endpoint is not an http(s) URL of at most \(WebSubscription.maximumEndpointLength) bytes", code: "bad_endpoint")
        }
        guard self.webPushEndpoints.allowedOrigin(endpoint) != nil else {
            throw HeraldError.invalid(
                "subscription.endpoint is not on a push service this server sends to (https on a browser's push service, or one the operator allowed)",
                code: "endpoint_not_allowed")
        }
        let keys: WebPushSubscriptionKeys
        do {
            keys = try WebPushSubscriptionKeys(p256dh: subscription.keys.p256dh, auth: subscription.keys.auth)
        } catch .badP256DH {
            throw HeraldError.invalid("subscription.keys.p256dh is not an uncompressed P-256 public key (65 octets, base64url)", code: "bad_p256dh")
        } catch {
            throw HeraldError.invalid("subscription.keys.auth is not a 16-octet secret (base64url)", code: "bad_auth")
        }
        return WebSubscription(endpoint: endpoint, p256dh: keys.p256dh, auth: keys.auth)
    }

    /// The device a registration body names: `transport` (fcm by default) and exactly one of
    /// `token` and `fid` (`missing_token`, `bad_fcm_token`, `bad_fid`, `bad_device_token`).
    static func address(_ body: RegistrationRequest) throws -> PushAddress {
        switch body.transport ?? "fcm" {
        case "fcm":
            switch (body.token, body.fid) {
            case (let token?, nil): return try PushAddress.fcmToken(token)
            case (nil, let fid?): return try PushAddress.fcmInstallation(fid)
            case (nil, nil): throw HeraldError.invalid("an FCM registration names its token or its fid", code: "missing_token")
            case (_?, _?): throw HeraldError.invalid("an FCM registration names its token or its fid, not both", code: "bad_registration")
            }
        case "apns":
            guard let token = body.token, body.fid == nil else {
                throw HeraldError.invalid("an APNs registration names its token (hex)", code: "missing_token")
            }
            // The environment is the body's, checked with the rest (``registration(_:address:)``).
            return .apns(try Validate.token(token), environment: .production)
        default:
            throw HeraldError.invalid("transport is fcm, webpush or apns", code: "bad_transport")
        }
    }

    /// A registration body checked for `key` on `app`. With a register key, what the
    /// registration may change is limited (``RegistrationPolicy``): binding a user needs the
    /// backend's assertion for that user, and protected tags stay as they are. The route and the
    /// registration lane (``RegistrationLane``) both check a registration here.
    /// A registration checked, with what its caller may change.
    typealias Checked = (registration: DeviceRegistration, authority: RegistrationAuthority, byRegisterKey: Bool)

    func registration(_ body: DeviceRegistrationRequest, app: App, key: StoredAPIKey, address: PushAddress) throws -> Checked {
        var body = body
        var authority = RegistrationAuthority.backend
        if key.scope == .register {
            authority = RegistrationAuthority(mayBindUser: !app.security.userVerification, protectedTags: Set(app.security.protectedTags))
        }
        if let text = body.userAssertion {
            let secret = try UserSecrets.open(app, secrets: self.secrets)
            let assertion = try UserAssertion.verify(
                text, secret: secret, appID: app.id, now: self.clock.nowMilliseconds / 1000, device: address.appIdentifier,
                allowUnbound: app.security.unboundAssertions)
            guard body.userId == nil || body.userId == assertion.userID else {
                throw HeraldError(code: "user_assertion_wrong_user", "the user assertion is for another user than userId")
            }
            body.userId = assertion.userID
            authority.mayBindUser = true
        }
        return (try Self.registration(body, address: address), authority, key.scope == .register)
    }

    /// A checked registration written: the device as it now is — for a register key (which reads
    /// nothing of the registry), only what it registered: no protected tags, no history (its
    /// `createdAt` is this registration's time), no invalidation.
    func commit(_ asked: Checked, app: App) async throws -> DeviceResponse {
        let device = try await self.store.register(appID: app.id, asked.registration, authority: asked.authority, now: self.clock.nowMilliseconds)
        var answer = DeviceResponse(device)
        if asked.byRegisterKey {
            answer.tags = device.registration.tags.filter { !asked.authority.protectedTags.contains($0) }
            answer.createdAt = device.lastRegisteredAt
            answer.invalidatedAt = nil
            answer.invalidationReason = nil
        }
        return answer
    }

    @Sendable func unregister(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        guard try await self.store.unregister(appID: app.id, token: try Validate.identifier(context)) else { throw HeraldError.notFound("device") }
        return Response(status: .noContent)
    }

    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> DeviceList {
        let app = try context.requireApp()
        let query = request.uri.queryParameters
        let limit = try Validate.limit(request, fallback: 100, maximum: 1000)
        // In id order; `next` walks them all, page by page (the filters are given again with it).
        let devices = try await self.store.devices(
            appID: app.id,
            DeviceQuery(
                userID: query["userId"].map(String.init), tag: query["tag"].map(String.init),
                tokenPrefix: query["prefix"].map { String($0).lowercased() }, limit: limit + 1, afterID: try PageCursor.id(request, .devices)
            )
        )
        let page = PageCursor.page(devices, limit: limit) { PageCursor.next(.devices, id: $0.id) }
        return DeviceList(devices: page.items.map { DeviceResponse($0) }, next: page.next)
    }

    @Sendable func show(_ request: Request, context: APIRequestContext) async throws -> DeviceResponse {
        let app = try context.requireApp()
        guard let device = try await self.store.device(appID: app.id, token: try Validate.identifier(context)) else {
            throw HeraldError.notFound("device")
        }
        return DeviceResponse(device, invalidations: try await self.store.invalidations(appID: app.id, deviceID: device.id))
    }

    @Sendable func deliveries(_ request: Request, context: APIRequestContext) async throws -> DeliveryList {
        let app = try context.requireApp()
        let token = try Validate.identifier(context)
        let limit = try Validate.limit(request, fallback: 50, maximum: 1000)
        let beforeID = try PageCursor.id(request, .deliveries)
        guard try await self.store.device(appID: app.id, token: token) != nil else { throw HeraldError.notFound("device") }
        let deliveries = try await self.store.deliveries(appID: app.id, token: token, limit: limit + 1, beforeID: beforeID)
        let page = PageCursor.page(deliveries, limit: limit) { PageCursor.next(.deliveries, id: $0.id) }
        return DeliveryList(deliveries: page.items.map { DeliveryResponse($0, withNotification: true) }, next: page.next)
    }

    /// A registration body, checked: kinds, environments, sizes, the encryption key, and what
    /// each kind needs (an activity id, an attributes type).
    static func registration(_ body: DeviceRegistrationRequest, token: DeviceToken) throws -> DeviceRegistration {
        try Self.registration(body, address: .apns(token, environment: .production))
    }

    /// `address`'s registration: an APNs address takes its environment from the body; FCM has
    /// none, one kind (`device`), and none of what only Apple's tokens have (Live Activity ids,
    /// end-to-end encryption keys).
    static func registration(_ body: DeviceRegistrationRequest, address: PushAddress) throws -> DeviceRegistration {
        var address = address
        let transport = address.route.transport
        if transport != .apns {
            let appleOnly: [(String, Bool)] = [
                ("environment", body.environment != nil), ("activityId", body.activityId != nil), ("attributesType", body.attributesType != nil),
                ("publicKey", body.publicKey != nil || body.publicKeyType != nil),
            ]
            if let field = appleOnly.first(where: \.1)?.0 {
                throw HeraldError.invalid("\(field) is for APNs tokens; a \(transport.rawValue) registration has none", code: "bad_\(field)")
            }
            if let kind = body.kind, kind != DeviceKind.device.rawValue {
                throw HeraldError.invalid("a \(transport.rawValue) registration is of kind device", code: "bad_kind")
            }
        }
        var kind = DeviceKind.device
        if let name = body.kind {
            guard let parsed = DeviceKind(rawValue: name) else {
                throw HeraldError.invalid("kind must be one of \(DeviceKind.allCases.map(\.rawValue).joined(separator: ", "))", code: "bad_kind")
            }
            kind = parsed
        }
        if let name = body.environment, address.route.transport == .apns {
            guard let parsed = APNSEnvironment(name: name) else {
                throw HeraldError.invalid("environment must be sandbox (development) or production", code: "bad_environment")
            }
            address = .apns(try Validate.token(address.stored), environment: parsed)
        }
        let tags = body.tags ?? []
        guard tags.count <= 100, tags.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 64 }) else {
            throw HeraldError.invalid("tags must be an array of up to 100 strings of 1 to 64 bytes", code: "bad_tags")
        }
        var publicKey: [UInt8]?
        let publicKeyType = try Validate.text(body.publicKeyType, "publicKeyType", limit: 16)
        if let encoded = body.publicKey {
            guard encoded.utf8.count <= 200, let type = publicKeyType, let bytes = Data(base64Encoded: encoded) else {
                throw HeraldError.invalid("publicKey is base64, with publicKeyType x25519 or p256", code: "bad_public_key")
            }
            do {
                try EncryptedPayload.validate(EncryptedPayload.PublicKey(type: type, data: bytes))
            } catch {
                throw HeraldError.invalid(
                    "publicKey is not a valid \(type) public key (x25519: 32 raw bytes; p256: 65 bytes X9.63)", code: "bad_public_key")
            }
            publicKey = Array(bytes)
        } else if publicKeyType != nil {
            throw HeraldError.invalid("publicKeyType without publicKey", code: "bad_public_key")
        }
        let registration = DeviceRegistration(
            address: address, kind: kind, userID: try Validate.text(body.userId, "userId"), tags: tags,
            locale: try Validate.text(body.locale, "locale", limit: 35), timeZone: try Validate.text(body.timeZone, "timeZone", limit: 64),
            appVersion: try Validate.text(body.appVersion, "appVersion", limit: 64),
            platform: try Validate.text(body.platform, "platform", limit: 32),
            activityID: try Validate.text(body.activityId, "activityId"), attributesType: try Validate.text(body.attributesType, "attributesType"),
            publicKey: publicKey, publicKeyType: publicKey == nil ? nil : publicKeyType
        )
        if kind == .liveActivity, registration.activityID == nil {
            throw HeraldError.invalid("a liveactivity token needs its activityId", code: "missing_activityId")
        }
        if kind == .pushToStart, registration.attributesType == nil {
            throw HeraldError.invalid("a push-to-start token needs its attributesType", code: "missing_attributesType")
        }
        return registration
    }
}

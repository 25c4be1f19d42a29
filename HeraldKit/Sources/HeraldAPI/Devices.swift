// SPDX-License-Identifier: Apache-2.0

/// `PUT /v1/apps/{app}/devices/{token}`: registers (or refreshes) a token. Every field is optional;
/// `kind` defaults to `device` and `environment` to `production`.
public struct DeviceRegistrationRequest: Sendable, Hashable, Codable {
    public var kind: String?
    public var environment: String?
    public var userId: String?
    public var tags: [String]?
    public var locale: String?
    public var timeZone: String?
    public var appVersion: String?
    public var platform: String?
    /// A Live Activity update token's activity.
    public var activityId: String?
    /// A push-to-start token's attributes type.
    public var attributesType: String?
    /// Base64 of the device's public key for end-to-end encryption, with `publicKeyType` x25519 or p256.
    public var publicKey: String?
    public var publicKeyType: String?
    /// With a register key: the app's backend's assertion that this device's user is `userId`
    /// (a JWT, HS256 under the app's user secret), needed to bind the device to a user or move it
    /// to another. `userId` may be left out: the assertion names it.
    public var userAssertion: String?

    public init(
        kind: String? = nil, environment: String? = nil, userId: String? = nil, tags: [String]? = nil, locale: String? = nil,
        timeZone: String? = nil, appVersion: String? = nil, platform: String? = nil, activityId: String? = nil,
        attributesType: String? = nil, publicKey: String? = nil, publicKeyType: String? = nil, userAssertion: String? = nil
    ) {
        self.userAssertion = userAssertion
        self.kind = kind
        self.environment = environment
        self.userId = userId
        self.tags = tags
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.platform = platform
        self.activityId = activityId
        self.attributesType = attributesType
        self.publicKey = publicKey
        self.publicKeyType = publicKeyType
    }
}

/// A registered device, as Herald holds it.
public struct DeviceResponse: Sendable, Hashable, Codable {
    /// The device's address as Herald names it: an APNs token in hex, `fcm:<token>`, `fid:<FID>`
    /// or `wp:<hash of a Web Push endpoint>`.
    public var token: String
    public var kind: String
    /// Its route: `sandbox` or `production` (APNs), `fcm` or `webpush`.
    public var environment: String
    /// The push service it is reached through: `apns`, `fcm` or `webpush` (absent from older servers).
    public var transport: String?
    /// A Web Push subscription's endpoint, masked (its origin and the start of its path): the
    /// whole endpoint is a capability and is never shown.
    public var endpoint: String?
    public var userId: String?
    public var tags: [String]
    public var locale: String?
    public var timeZone: String?
    public var appVersion: String?
    public var platform: String?
    public var activityId: String?
    public var attributesType: String?
    public var active: Bool
    public var createdAt: Int64
    public var lastRegisteredAt: Int64
    public var invalidatedAt: Int64?
    public var invalidationReason: String?
    public var publicKeyType: String?
    public var publicKey: String?
    /// Only in `GET …/devices/{token}`: what APNs said of this token.
    public var invalidations: [Invalidation]?

    /// One time APNs called the token dead, and whether Herald acted on it (a 410 older than the
    /// token's last registration is not applied).
    public struct Invalidation: Sendable, Hashable, Codable {
        public var reason: String
        public var apnsTimestamp: Int64?
        public var at: Int64
        public var applied: Bool

        public init(reason: String, apnsTimestamp: Int64?, at: Int64, applied: Bool) {
            self.reason = reason
            self.apnsTimestamp = apnsTimestamp
            self.at = at
            self.applied = applied
        }
    }

    public init(
        token: String, kind: String, environment: String, userId: String?, tags: [String], locale: String?, timeZone: String?,
        appVersion: String?, platform: String?, activityId: String?, attributesType: String?, active: Bool, createdAt: Int64,
        lastRegisteredAt: Int64, invalidatedAt: Int64?, invalidationReason: String?, publicKeyType: String?, publicKey: String?,
        invalidations: [Invalidation]? = nil, transport: String? = nil, endpoint: String? = nil
    ) {
        self.transport = transport
        self.endpoint = endpoint
        self.token = token
        self.kind = kind
        self.environment = environment
        self.userId = userId
        self.tags = tags
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.platform = platform
        self.activityId = activityId
        self.attributesType = attributesType
        self.active = active
        self.createdAt = createdAt
        self.lastRegisteredAt = lastRegisteredAt
        self.invalidatedAt = invalidatedAt
        self.invalidationReason = invalidationReason
        self.publicKeyType = publicKeyType
        self.publicKey = publicKey
        self.invalidations = invalidations
    }
}

/// `GET /v1/apps/{app}/devices`: in registration order; `next` is the opaque `cursor` of the
/// next page (with the same filters), null at the end.
public struct DeviceList: Sendable, Hashable, Codable {
    public var devices: [DeviceResponse]
    public var next: String?

    public init(devices: [DeviceResponse], next: String? = nil) {
        self.devices = devices
        self.next = next
    }
}

/// One push to one device.
public struct DeliveryResponse: Sendable, Hashable, Codable {
    /// Only when listed per device.
    public var notificationId: String?
    public var token: String
    public var kind: String?
    /// Its device's route: `sandbox`, `production` or `fcm`.
    public var environment: String
    /// `apns` or `fcm` (absent from older servers).
    public var transport: String?
    public var pushType: String
    /// `pending`, `sent` or `failed`.
    public var state: String
    public var attempts: Int
    /// The push service's id for the message: APNs's apns-id, FCM's message id.
    public var apnsId: String?
    public var status: Int?
    public var reason: String?
    public var latencyMs: Int64?
    public var updatedAt: Int64
    /// Whether a send of it had an unknown outcome: written to APNs, and no answer came. APNs may
    /// have delivered it (and a resend after it then a second time).
    public var outcomeUncertain: Bool
    /// When the device reported it received, and opened (ms since 1970), and the action chosen
    /// (receipts: `POST /v1/apps/{app}/receipts`); absent until reported.
    public var receivedAt: Int64?
    public var openedAt: Int64?
    public var action: String?

    public init(
        notificationId: String?, token: String, kind: String?, environment: String, pushType: String, state: String, attempts: Int,
        apnsId: String?, status: Int?, reason: String?, latencyMs: Int64?, updatedAt: Int64, outcomeUncertain: Bool = false,
        receivedAt: Int64? = nil, openedAt: Int64? = nil, action: String? = nil, transport: String? = nil
    ) {
        self.transport = transport
        self.receivedAt = receivedAt
        self.openedAt = openedAt
        self.action = action
        self.outcomeUncertain = outcomeUncertain
        self.notificationId = notificationId
        self.token = token
        self.kind = kind
        self.environment = environment
        self.pushType = pushType
        self.state = state
        self.attempts = attempts
        self.apnsId = apnsId
        self.status = status
        self.reason = reason
        self.latencyMs = latencyMs
        self.updatedAt = updatedAt
    }
}

/// `GET /v1/apps/{app}/devices/{token}/deliveries`: newest first; `next` is the opaque `cursor`
/// of the next page, null at the end.
public struct DeliveryList: Sendable, Hashable, Codable {
    public var deliveries: [DeliveryResponse]
    public var next: String?

    public init(deliveries: [DeliveryResponse], next: String? = nil) {
        self.deliveries = deliveries
        self.next = next
    }
}

/// `POST /v1/apps/{app}/registrations`: registers a device whose identifier is not an APNs hex
/// token, by a body rather than a path segment — an FCM registration token (`token`) or a
/// Firebase Installation ID (`fid`), with `transport: "fcm"`; a browser's push subscription
/// (`subscription`, as `PushSubscription.toJSON()` gives it) with `transport: "webpush"`; or an
/// APNs token with `transport: "apns"` (as `PUT …/devices/{token}` does). The other fields are
/// those of ``DeviceRegistrationRequest``; the answer is the device, named as Herald names it
/// (`fcm:<token>`, `fid:<FID>`, `wp:<hash of the endpoint>`, or the hex token).
public struct RegistrationRequest: Sendable, Hashable, Codable {
    /// `fcm` (the default), `webpush` or `apns`.
    public var transport: String?
    public var token: String?
    public var fid: String?
    /// A Web Push subscription.
    public var subscription: WebPushSubscription?
    public var kind: String?
    public var environment: String?
    public var userId: String?
    public var tags: [String]?
    public var locale: String?
    public var timeZone: String?
    public var appVersion: String?
    public var platform: String?
    public var activityId: String?
    public var attributesType: String?
    public var publicKey: String?
    public var publicKeyType: String?
    public var userAssertion: String?

    public init(
        transport: String? = nil, token: String? = nil, fid: String? = nil, userId: String? = nil, tags: [String]? = nil, locale: String? = nil,
        timeZone: String? = nil, appVersion: String? = nil, platform: String? = nil, userAssertion: String? = nil
    ) {
        self.transport = transport
        self.token = token
        self.fid = fid
        self.userId = userId
        self.tags = tags
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.platform = platform
        self.userAssertion = userAssertion
    }

    /// A browser's push subscription: `PushSubscription.toJSON()` (`expirationTime` is ignored).
    public struct WebPushSubscription: Sendable, Hashable, Codable {
        public var endpoint: String
        /// When the browser says the subscription ends (ms), as `toJSON()` gives it: accepted and
        /// ignored (browsers renew it through `pushsubscriptionchange`).
        public var expirationTime: Double?
        public var keys: Keys

        public struct Keys: Sendable, Hashable, Codable {
            /// The browser's P-256 public key, base64url (65 octets, uncompressed).
            public var p256dh: String
            /// Its 16-octet authentication secret, base64url.
            public var auth: String

            public init(p256dh: String, auth: String) {
                self.p256dh = p256dh
                self.auth = auth
            }
        }

        public init(endpoint: String, p256dh: String, auth: String) {
            self.endpoint = endpoint
            self.keys = Keys(p256dh: p256dh, auth: auth)
        }
    }

    /// The fields every platform shares, as ``DeviceRegistrationRequest`` holds them.
    public var common: DeviceRegistrationRequest {
        DeviceRegistrationRequest(
            kind: self.kind, environment: self.environment, userId: self.userId, tags: self.tags, locale: self.locale, timeZone: self.timeZone,
            appVersion: self.appVersion, platform: self.platform, activityId: self.activityId, attributesType: self.attributesType,
            publicKey: self.publicKey, publicKeyType: self.publicKeyType, userAssertion: self.userAssertion)
    }
}

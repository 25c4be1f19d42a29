// SPDX-License-Identifier: Apache-2.0

/// Who a notification goes to: `"all"`, or an object with exactly one of `tokens`, `users`,
/// `tags` (with `match` any or all) or `activityId`.
public struct AudienceSelector: Sendable, Hashable, Codable {
    public var all: Bool
    public var tokens: [String]?
    public var users: [String]?
    public var tags: [String]?
    /// `any` (the default) or `all`, with `tags`.
    public var match: String?
    public var activityId: String?
    /// A broadcast channel's id (Apple's, as `POST /v1/apps/{app}/channels` answered): one
    /// Live Activity broadcast to its subscribers.
    public var channel: String?

    public static let everyone = AudienceSelector(all: true)
    public static func tokens(_ tokens: [String]) -> AudienceSelector { AudienceSelector(tokens: tokens) }
    public static func users(_ users: [String]) -> AudienceSelector { AudienceSelector(users: users) }
    public static func tags(_ tags: [String], matchAll: Bool = false) -> AudienceSelector {
        AudienceSelector(tags: tags, match: matchAll ? "all" : "any")
    }
    public static func activity(_ id: String) -> AudienceSelector { AudienceSelector(activityId: id) }
    public static func channel(_ id: String) -> AudienceSelector {
        var selector = AudienceSelector()
        selector.channel = id
        return selector
    }

    public init(
        all: Bool = false, tokens: [String]? = nil, users: [String]? = nil, tags: [String]? = nil, match: String? = nil, activityId: String? = nil
    ) {
        self.all = all
        self.tokens = tokens
        self.users = users
        self.tags = tags
        self.match = match
        self.activityId = activityId
    }

    private enum CodingKeys: String, CodingKey {
        case tokens, users, tags, match, activityId, channel
    }

    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let word = try? single.decode(String.self) {
            guard word == "all" else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "the only audience word is \"all\""))
            }
            self.init(all: true)
            return
        }
        let object = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            tokens: try object.decodeIfPresent([String].self, forKey: .tokens), users: try object.decodeIfPresent([String].self, forKey: .users),
            tags: try object.decodeIfPresent([String].self, forKey: .tags), match: try object.decodeIfPresent(String.self, forKey: .match),
            activityId: try object.decodeIfPresent(String.self, forKey: .activityId)
        )
        self.channel = try object.decodeIfPresent(String.self, forKey: .channel)
    }

    public func encode(to encoder: any Encoder) throws {
        if self.all {
            var single = encoder.singleValueContainer()
            try single.encode("all")
            return
        }
        var object = encoder.container(keyedBy: CodingKeys.self)
        try object.encodeIfPresent(self.tokens, forKey: .tokens)
        try object.encodeIfPresent(self.users, forKey: .users)
        try object.encodeIfPresent(self.tags, forKey: .tags)
        try object.encodeIfPresent(self.match, forKey: .match)
        try object.encodeIfPresent(self.activityId, forKey: .activityId)
        try object.encodeIfPresent(self.channel, forKey: .channel)
    }
}

/// `POST /v1/apps/{app}/notifications`: the audience, what to show (typed fields laid over a raw
/// `aps`), custom `data`, and how to send it. A field Herald does not know is refused
/// (`unknown_field`), and so is a notification with nothing to show and no `contentAvailable`.
public struct SendRequest: Sendable, Hashable, Codable {
    public var audience: AudienceSelector?
    /// Device kinds to reach (default: ordinary device tokens for users, tags and everyone).
    public var kinds: [String]?
    /// `sandbox` or `production`: only that environment's tokens.
    public var environment: String?
    public var pushType: String?
    /// 10, 5 or 1.
    public var priority: Int?
    /// UNIX seconds after which APNs stops trying (0 = one attempt); or `ttl` seconds from now.
    public var expiration: Int64?
    public var ttl: Int64?
    public var collapseId: String?
    /// Milliseconds since 1970: not before.
    public var scheduledAt: Int64?
    /// A wall-clock time (2026-11-23T09:00) at each device's time zone.
    public var localTime: String?
    /// A repeat with the same key answers the first notification (200, `duplicate: true`).
    public var idempotencyKey: String?
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var badge: Int64?
    public var sound: String?
    public var threadId: String?
    public var category: String?
    public var interruptionLevel: String?
    public var relevanceScore: Double?
    public var mutableContent: Bool?
    public var contentAvailable: Bool?
    /// Raw `aps` keys; the typed fields above win over them.
    public var aps: JSON?
    /// Custom keys beside `aps`; with a `template`, also the values of its variables.
    public var data: JSON?
    /// Sends by the app's template of this id: each device gets the variant of its locale (with
    /// the fallback `pt-BR` → `pt` → default), filled from `data` and its attributes.
    public var template: String?
    /// End-to-end encryption to each device's registered public key.
    public var encrypt: Bool?
    /// What APNs carries around an encrypted payload: `{"title", "body"}`.
    public var placeholder: Placeholder?
    /// A push APNs may or may not have delivered (written, no answer: the connection was lost or
    /// the deadline passed): `resend` (the default) sends it once more, at most once per device
    /// (at-least-once; without a `collapseId`, the device replaces rather than adds); `drop`
    /// never sends it again (at-most-once).
    public var onUnknownOutcome: String?
    /// True: never held for the app's quiet hours (`time-sensitive` and `critical` alerts never are).
    public var ignoreQuietHours: Bool?
    /// Over the app's frequency cap: `fail` (the default: not sent, failed `FrequencyCapped`) or
    /// `defer` (held until the person has room again).
    public var frequencyCap: String?
    /// At most this many of its deliveries in any minute (1 to 100000), spread over as many minutes
    /// as it takes; 0: none, even if the app has a default.
    public var throttlePerMinute: Int?
    /// Checked and answered (200, ``DryRunResponse``) but neither stored nor sent: the audience
    /// that would be reached and, per push type, the exact headers and payload.
    public var dryRun: Bool?
    /// Only devices reached through these push services: `apns`, `fcm`, `webpush` (default: every
    /// one the notification can go to).
    public var transports: [String]?
    /// An image shown with the notification: FCM's `notification.image`; for APNs, the payload's
    /// `image` key with `mutable-content` set, for the app's service extension to fetch.
    public var image: String?
    /// A deep link the app opens when the notification is tapped: `link` in the payload (APNs)
    /// and in the data (FCM).
    public var link: String?
    /// FCM's own fields, laid over what Herald makes of the common ones: `notification`,
    /// `android` (`priority`, `ttl`, `collapse_key`, `notification.channel_id`, `direct_boot_ok`,
    /// …), `data` (strings only) and `fcm_options`, as in FCM HTTP v1's `message`.
    public var fcm: JSON?
    /// The web's own fields, laid over the Declarative Web Push message Herald makes of the
    /// common ones: `notification` (`icon`, `badge`, `tag`, `actions`, `requireInteraction`,
    /// `lang`, `dir`, `silent`, `navigate`, …), `app_badge`, `mutable`.
    public var webpush: JSON?

    public struct Placeholder: Sendable, Hashable, Codable {
        public var title: String?
        public var body: String?

        public init(title: String? = nil, body: String? = nil) {
            self.title = title
            self.body = body
        }
    }

    public init(audience: AudienceSelector?) {
        self.audience = audience
    }
}

/// The answer to a send: 202 when accepted, 200 when `idempotencyKey` named an earlier one.
public struct SendResponse: Sendable, Hashable, Codable {
    public var id: String
    /// Deliveries created now (an expanding audience grows later).
    public var deliveries: Int
    public var duplicate: Bool
    /// For a token audience (202 only): distinct listed tokens with no device in the app.
    public var unknownTokens: Int?
    /// For a token audience (202 only): distinct listed tokens whose device is inactive (APNs
    /// called it dead).
    public var inactiveTokens: Int?
    /// The push services it goes through (202 only): those asked for, narrowed to those that
    /// can carry it (data that FCM cannot carry keeps it to `apns` when `fcm` was not asked for).
    public var transports: [String]?

    public init(
        id: String, deliveries: Int, duplicate: Bool, unknownTokens: Int? = nil, inactiveTokens: Int? = nil, transports: [String]? = nil
    ) {
        self.transports = transports
        self.id = id
        self.deliveries = deliveries
        self.duplicate = duplicate
        self.unknownTokens = unknownTokens
        self.inactiveTokens = inactiveTokens
    }
}

/// A notification in a list.
public struct NotificationSummaryResponse: Sendable, Hashable, Codable {
    public var id: String
    public var createdAt: Int64
    public var scheduledAt: Int64
    /// How many devices it reaches.
    public var audience: Int
    /// Still being fanned out to its audience.
    public var expanding: Bool
    public var cancelledAt: Int64?

    public init(id: String, createdAt: Int64, scheduledAt: Int64, audience: Int, expanding: Bool, cancelledAt: Int64?) {
        self.id = id
        self.createdAt = createdAt
        self.scheduledAt = scheduledAt
        self.audience = audience
        self.expanding = expanding
        self.cancelledAt = cancelledAt
    }
}

/// `GET /v1/apps/{app}/notifications`: newest first; `next` is the opaque `cursor` of the next
/// page, null at the end.
public struct NotificationList: Sendable, Hashable, Codable {
    public var notifications: [NotificationSummaryResponse]
    public var next: String?

    public init(notifications: [NotificationSummaryResponse], next: String? = nil) {
        self.notifications = notifications
        self.next = next
    }
}

/// `GET /v1/apps/{app}/notifications/{id}`: the summary, counts by state and (up to 1000) deliveries.
public struct NotificationDetail: Sendable, Hashable, Codable {
    public var id: String
    public var createdAt: Int64
    public var scheduledAt: Int64
    public var audience: Int
    public var expanding: Bool
    public var cancelledAt: Int64?
    public var counts: DeliveryCounts
    public var deliveries: [DeliveryResponse]
    /// Sent → received → opened, as devices reported them (receipts).
    public var funnel: NotificationFunnel?

    public init(summary: NotificationSummaryResponse, counts: DeliveryCounts, deliveries: [DeliveryResponse], funnel: NotificationFunnel? = nil) {
        self.funnel = funnel
        self.id = summary.id
        self.createdAt = summary.createdAt
        self.scheduledAt = summary.scheduledAt
        self.audience = summary.audience
        self.expanding = summary.expanding
        self.cancelledAt = summary.cancelledAt
        self.counts = counts
        self.deliveries = deliveries
    }
}

/// A notification's deliveries by state.
public struct DeliveryCounts: Sendable, Hashable, Codable {
    public var pending: Int
    public var sent: Int
    public var failed: Int

    public init(pending: Int, sent: Int, failed: Int) {
        self.pending = pending
        self.sent = sent
        self.failed = failed
    }
}

/// `DELETE /v1/apps/{app}/notifications/{id}`.
public struct CancelResponse: Sendable, Hashable, Codable {
    /// Whether anything was still pending to cancel.
    public var cancelled: Bool

    public init(cancelled: Bool) { self.cancelled = cancelled }
}

/// `POST /v1/apps/{app}/notifications` with `"dryRun": true`: what would be sent, and to how many;
/// nothing is written or sent.
public struct DryRunResponse: Sendable, Hashable, Codable {
    public var dryRun: Bool
    /// The active devices the audience matches now.
    public var audienceSize: Int
    /// One per push type the audience's APNs devices would get (by their kind, or the one given).
    public var pushTypes: [DryRunPush]
    /// What its FCM devices would get; nil when it goes to none.
    public var fcm: DryRunFCM?

    public init(audienceSize: Int, pushTypes: [DryRunPush], fcm: DryRunFCM? = nil) {
        self.dryRun = true
        self.audienceSize = audienceSize
        self.pushTypes = pushTypes
        self.fcm = fcm
    }
}

/// The FCM message a dry run's Android devices would get.
public struct DryRunFCM: Sendable, Hashable, Codable {
    public var devices: Int
    /// The exact body of `messages:send` (JSON text), with `<token>` for each device's target and
    /// a placeholder receipt id.
    public var message: String

    public init(devices: Int, message: String) {
        self.devices = devices
        self.message = message
    }
}

/// The push one push type's devices would get.
public struct DryRunPush: Sendable, Hashable, Codable {
    public var pushType: String
    public var devices: Int
    /// The APNs request headers (`apns-push-type`, `apns-topic`, and `apns-priority`,
    /// `apns-expiration`, `apns-collapse-id` when set).
    public var headers: [String: String]
    /// The exact payload (JSON text); for an encrypted notification, the plaintext each device's
    /// copy is sealed from.
    public var payload: String
    /// Sent by template: each variant's exact payload, the default (no locale) first, then by
    /// locale. Nil otherwise.
    public var variants: [DryRunVariant]?

    public init(pushType: String, devices: Int, headers: [String: String], payload: String, variants: [DryRunVariant]? = nil) {
        self.pushType = pushType
        self.devices = devices
        self.headers = headers
        self.payload = payload
        self.variants = variants
    }
}

/// One variant of a templated dry run: its locale (nil for the default) and its payload.
public struct DryRunVariant: Sendable, Hashable, Codable {
    public var locale: String?
    public var payload: String

    public init(locale: String?, payload: String) {
        self.locale = locale
        self.payload = payload
    }
}

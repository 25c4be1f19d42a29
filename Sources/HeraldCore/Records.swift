// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// An app: a bundle id with APNs credentials per environment.
package struct App: Sendable, Hashable {
    package var id: String
    package var bundleID: String
    package var createdAt: Int64
    /// Who may bind devices to users and set which tags.
    package var security: AppSecurity
    /// Set once its deletion began: it is deleted in the background, chunk by chunk, and takes
    /// no more writes.
    package var deletion: AppDeletion?

    package init(id: String, bundleID: String, createdAt: Int64, security: AppSecurity = AppSecurity(), deletion: AppDeletion? = nil) {
        self.id = id
        self.bundleID = bundleID
        self.createdAt = createdAt
        self.security = security
        self.deletion = deletion
    }
}

/// An app's deletion under way: since when, and how many of its rows are gone so far.
package struct AppDeletion: Sendable, Hashable {
    package var since: Int64
    package var deletedRows: Int64

    package init(since: Int64, deletedRows: Int64) {
        self.since = since
        self.deletedRows = deletedRows
    }
}

/// How Herald authenticates to APNs for one app and environment.
package enum CredentialMaterial: Sendable, Hashable {
    /// A `.p8` key; `restrictedTo` for Apple's environment-restricted keys.
    case token(keyID: String, teamID: String, privateKeyPEM: String, restrictedTo: APNSEnvironment?)
    /// A client certificate (chain) and its key, both PEM.
    case certificate(certificatePEM: String, privateKeyPEM: String)
}

/// What an app or SDK sends to register a token.
package struct DeviceRegistration: Sendable, Hashable {
    /// Its platform's identifier and route (APNs and its environment, or FCM).
    package var address: PushAddress
    package var kind: DeviceKind
    package var userID: String?
    package var tags: [String]
    package var locale: String?
    package var timeZone: String?
    package var appVersion: String?
    package var platform: String?
    /// Live Activity update tokens: the activity they update.
    package var activityID: String?
    /// Push-to-start tokens: the ActivityAttributes type they start.
    package var attributesType: String?
    /// End-to-end encryption: the device's public key (`x25519` raw or `p256` X9.63) and its type.
    package var publicKey: [UInt8]?
    package var publicKeyType: String?

    /// An APNs token's registration.
    package init(
        token: DeviceToken, kind: DeviceKind = .device, environment: APNSEnvironment = .production, userID: String? = nil,
        tags: [String] = [], locale: String? = nil, timeZone: String? = nil, appVersion: String? = nil,
        platform: String? = nil, activityID: String? = nil, attributesType: String? = nil, publicKey: [UInt8]? = nil, publicKeyType: String? = nil
    ) {
        self.init(
            address: .apns(token, environment: environment), kind: kind, userID: userID, tags: tags, locale: locale, timeZone: timeZone,
            appVersion: appVersion, platform: platform, activityID: activityID, attributesType: attributesType, publicKey: publicKey,
            publicKeyType: publicKeyType)
    }

    package init(
        address: PushAddress, kind: DeviceKind = .device, userID: String? = nil, tags: [String] = [], locale: String? = nil,
        timeZone: String? = nil, appVersion: String? = nil, platform: String? = nil, activityID: String? = nil, attributesType: String? = nil,
        publicKey: [UInt8]? = nil, publicKeyType: String? = nil
    ) {
        self.publicKey = publicKey
        self.publicKeyType = publicKeyType
        self.address = address
        self.kind = kind
        self.userID = userID
        self.tags = tags
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.platform = platform
        self.activityID = activityID
        self.attributesType = attributesType
    }

    /// The identifier as stored and as the API names the device.
    package var token: String { self.address.stored }
    package var route: Route { self.address.route }
}

/// A registered token.
package struct Device: Sendable, Hashable {
    package var id: Int64
    package var appID: String
    package var registration: DeviceRegistration
    package var active: Bool
    package var createdAt: Int64
    package var lastRegisteredAt: Int64
    package var invalidatedAt: Int64?
    package var invalidationReason: String?

    package init(
        id: Int64, appID: String, registration: DeviceRegistration, active: Bool, createdAt: Int64, lastRegisteredAt: Int64, invalidatedAt: Int64?,
        invalidationReason: String?
    ) {
        self.id = id
        self.appID = appID
        self.registration = registration
        self.active = active
        self.createdAt = createdAt
        self.lastRegisteredAt = lastRegisteredAt
        self.invalidatedAt = invalidatedAt
        self.invalidationReason = invalidationReason
    }
}

/// Who a notification goes to.
package enum Audience: Sendable, Hashable {
    case tokens([String])
    case users([String])
    case tags([String], matchAll: Bool)
    /// Every update token of one Live Activity.
    case activity(String)
    case all
    /// A broadcast channel (Apple's id): one broadcast to its subscribers, no devices of Herald's.
    case channel(String)

    /// A list (tokens, users, one activity): resolved to its device ids once, at acceptance. The
    /// others ("all", tags, a channel) are counted then and walked when expanded.
    package var isList: Bool {
        switch self {
        case .tokens, .users, .activity: true
        case .all, .tags, .channel: false
        }
    }
}

/// A notification as accepted: what to send and to whom.
package struct NotificationSpec: Sendable, Hashable {
    package var audience: Audience
    /// Only devices of these kinds (all kinds when empty).
    package var kinds: Set<DeviceKind>
    /// Only devices in this environment (both when nil).
    package var environment: APNSEnvironment?
    /// The push type; derived from each device's kind when nil.
    package var pushType: PushType?
    package var priority: Priority?
    /// Absolute UNIX seconds; 0 = one attempt only; nil = APNs's storage policy.
    package var expiration: Int64?
    package var collapseID: String?
    package var payload: [UInt8]
    /// When to send (ms since 1970); now when nil.
    package var scheduledAt: Int64?
    /// Send at this wall-clock time in each device's time zone (UTC when it has none); devices
    /// for which it has passed get it at once.
    package var localTime: LocalTime?
    package var idempotencyKey: String?
    /// End-to-end encryption: sent only to devices with a public key, each sealed for its
    /// device, APNs carrying this placeholder payload (JSON, `mutable-content` set) beside the
    /// envelope; `payload` is then the plaintext, forgotten once the deliveries are done.
    package var placeholder: [UInt8]?
    /// What to do with a push APNs may or may not have delivered.
    package var onUnknownOutcome: UnknownOutcomeAction = .default
    /// At accept only, never stored: the kinds of token this payload would show nothing on, when
    /// the audience's kinds are known only once its tokens are looked up (a list of tokens, no
    /// push type named). The API refuses the notification if its audience holds one.
    package var showsNothingOn: Set<DeviceKind> = []
    /// Sent by template: each device's alert is rendered from it, laid over `payload`.
    package var template: NotificationTemplate?
    /// The app's quiet hours its alerts wait for (``QuietHours``), as taken when accepted; nil
    /// when the app has none or the send is exempt.
    package var quietHours: QuietHours?
    /// `time-sensitive` or `critical`, or `ignoreQuietHours`: never held for quiet hours.
    package var ignoresQuietHours = false
    /// The app's frequency cap as taken when accepted (``NotificationCap``); nil when none.
    package var frequencyCap: NotificationCap?
    /// Over the app's frequency cap, wait for room rather than fail (`"frequencyCap": "defer"`).
    package var deferOverCap = false
    /// `aps.category`, for a cap counted per category.
    package var category: String?
    /// `throttlePerMinute` as the send gave it (0: none; nil: the app's default).
    package var throttleRequested: Int?
    /// At most this many of its deliveries per minute (``Throttle``); nil: no throttle.
    package var throttlePerMinute: Int?
    /// A Live Activity start: only push-to-start tokens registered for this attributes type.
    package var attributesType: String?
    /// Only devices of these transports (every one when empty): those the sender named, and
    /// those the notification has something to send to.
    package var transports: Set<Transport> = []
    /// What it sends through transports other than APNs (``NotificationParts``): for FCM, the
    /// message without its target (``FCMPart``). `payload` is what APNs gets.
    package var parts: [Transport: [UInt8]] = [:]

    package init(
        audience: Audience, kinds: Set<DeviceKind> = [], environment: APNSEnvironment? = nil, pushType: PushType? = nil,
        priority: Priority? = nil, expiration: Int64? = nil, collapseID: String? = nil, payload: [UInt8],
        scheduledAt: Int64? = nil, localTime: LocalTime? = nil, idempotencyKey: String? = nil
    ) {
        self.localTime = localTime
        self.audience = audience
        self.kinds = kinds
        self.environment = environment
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
        self.scheduledAt = scheduledAt
        self.idempotencyKey = idempotencyKey
    }
}

/// Where a delivery stands.
package enum DeliveryState: String, Sendable, Hashable, CaseIterable {
    /// Waiting to be sent (or to be retried).
    case pending
    /// Accepted by APNs.
    case sent
    /// Refused for good, or out of attempts / past expiration.
    case failed
}

/// One notification to one device, as claimed for sending.
package struct ClaimedDelivery: Sendable, Hashable {
    package var id: Int64
    package var notificationID: String
    package var appID: String
    package var deviceID: Int64
    package var token: String
    /// Its device's route: which transport sends it, and for APNs, to which environment.
    package var route: Route
    package var pushType: PushType
    package var topic: String
    package var priority: Priority?
    package var expiration: Int64?
    package var collapseID: String?
    package var payload: [UInt8]
    package var attempts: Int
    /// Set for an end-to-end encrypted notification: what APNs carries around the envelope.
    package var placeholder: [UInt8]?
    /// The device's public key, for an encrypted notification; a Web Push subscription's keys
    /// and endpoint (``WebSubscription``).
    package var publicKey: DevicePublicKey?
    /// Set when the delivery was claimed as part of an audience chunk: it has no row yet, and
    /// recording its outcome creates one (each delivery of a broadcast is written once). If the
    /// process dies first, the chunk's lease runs out and its devices are claimed again.
    package var chunk: Int64?
    /// Unknown outcomes recorded for it before this claim (0 for a chunk's delivery).
    package var unknownOutcomes = 0
    /// What its notification wants done with an unknown outcome.
    package var onUnknownOutcome: UnknownOutcomeAction = .default
    /// Set while its payload is still to be rendered from its notification's template (the
    /// claim renders it for the device and clears this).
    package var template: TemplateRendering?
    /// Its notification's quiet hours (an alert is held while its device is inside them).
    package var quietHours: QuietHours?
    /// Its notification's frequency cap (an alert over it is failed or deferred).
    package var frequencyCap: NotificationCap?
    /// Its notification's throttle (``Throttle``), and whether it has its slot already (it was
    /// set aside until it).
    package var throttlePerMinute: Int?
    package var throttleSlotted = false

    package init(
        id: Int64, notificationID: String, appID: String, deviceID: Int64, token: String, route: Route, pushType: PushType,
        topic: String,
        priority: Priority?, expiration: Int64?, collapseID: String?, payload: [UInt8], attempts: Int, placeholder: [UInt8]? = nil,
        chunk: Int64? = nil
    ) {
        self.chunk = chunk
        self.placeholder = placeholder
        self.id = id
        self.notificationID = notificationID
        self.appID = appID
        self.deviceID = deviceID
        self.token = token
        self.route = route
        self.pushType = pushType
        self.topic = topic
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
        self.attempts = attempts
    }
}

/// A device's end-to-end public key: `x25519` (raw) or `p256` (X9.63).
package struct DevicePublicKey: Sendable, Hashable {
    package var type: String
    package var key: [UInt8]

    package init(type: String, key: [UInt8]) {
        self.type = type
        self.key = key
    }
}

/// What became of one send.
package struct DeliveryResult: Sendable, Hashable {
    package enum Outcome: Sendable, Hashable {
        case sent(apnsID: String?)
        /// Try again at `retryAt` (ms), unless out of attempts or past expiration.
        case retry(status: Int?, reason: String, retryAt: Int64)
        /// Final; `invalidate` also deactivates the device (after `timestamp` for 410).
        case failed(status: Int?, reason: String, invalidate: Bool, timestamp: Int64?)
    }

    package var deliveryID: Int64
    package var outcome: Outcome
    package var latencyMilliseconds: Int64
    /// The claim this answers (its `attempts`): recorded only if the delivery has not been claimed
    /// again since — a batch that outlived its lease cannot overwrite the newer claim. Nil: unfenced.
    package var attempt: Int?
    /// For a delivery claimed in an audience chunk, the row its outcome creates.
    package var created: NewDelivery?
    /// APNs may or may not have delivered this send (it was written, no answer came): the
    /// delivery counts one more unknown outcome, whatever `outcome` decides.
    package var outcomeUncertain = false

    package init(deliveryID: Int64, outcome: Outcome, latencyMilliseconds: Int64, attempt: Int? = nil) {
        self.deliveryID = deliveryID
        self.outcome = outcome
        self.latencyMilliseconds = latencyMilliseconds
        self.attempt = attempt
    }

    /// The outcome of `claimed`, answering that claim (fenced by its attempt; created if the
    /// claim came from an audience chunk).
    package init(_ claimed: ClaimedDelivery, outcome: Outcome, latencyMilliseconds: Int64) {
        self.init(deliveryID: claimed.id, outcome: outcome, latencyMilliseconds: latencyMilliseconds, attempt: claimed.attempts)
        self.created = NewDelivery(claimed)
    }
}

/// What a delivery claimed in an audience chunk is made of, to create its row with its outcome.
package struct NewDelivery: Sendable, Hashable {
    package var chunk: Int64
    package var notificationID: String
    package var deviceID: Int64
    package var token: String
    package var route: Route
    package var pushType: PushType
    package var topic: String

    /// Nil unless `claimed` came from an audience chunk.
    package init?(_ claimed: ClaimedDelivery) {
        guard let chunk = claimed.chunk else { return nil }
        self.chunk = chunk
        self.notificationID = claimed.notificationID
        self.deviceID = claimed.deviceID
        self.token = claimed.token
        self.route = claimed.route
        self.pushType = claimed.pushType
        self.topic = claimed.topic
    }
}

/// What `record` applied: the deliveries whose outcome was written (not fenced out), and those
/// whose failure deactivated their device.
package struct RecordedOutcomes: Sendable, Hashable {
    package var applied: Set<Int64>
    package var invalidated: Set<Int64>

    package init(applied: Set<Int64> = [], invalidated: Set<Int64> = []) {
        self.applied = applied
        self.invalidated = invalidated
    }
}

/// One delivery as reported by the API.
package struct DeliveryRecord: Sendable, Hashable {
    package var id: Int64
    package var notificationID: String
    package var token: String
    package var kind: DeviceKind?
    package var route: Route
    package var pushType: PushType
    package var state: DeliveryState
    package var attempts: Int
    package var apnsID: String?
    package var status: Int?
    package var reason: String?
    package var latencyMilliseconds: Int64?
    /// When its state last changed (ms).
    package var updatedAt: Int64
    /// How many of its sends had an unknown outcome (written, unanswered).
    package var unknownOutcomes = 0
    /// When the device reported it received, and opened (ms), and the action chosen.
    package var receivedAt: Int64?
    package var openedAt: Int64?
    package var action: String?

    package init(
        id: Int64, notificationID: String, token: String, kind: DeviceKind?, route: Route, pushType: PushType, state: DeliveryState,
        attempts: Int, apnsID: String?, status: Int?, reason: String?, latencyMilliseconds: Int64?, updatedAt: Int64
    ) {
        self.id = id
        self.notificationID = notificationID
        self.token = token
        self.kind = kind
        self.route = route
        self.pushType = pushType
        self.state = state
        self.attempts = attempts
        self.apnsID = apnsID
        self.status = status
        self.reason = reason
        self.latencyMilliseconds = latencyMilliseconds
        self.updatedAt = updatedAt
    }
}

/// A notification as listed: when, to how many, and whether it is still being expanded.
package struct NotificationSummary: Sendable, Hashable {
    package var id: String
    package var appID: String
    package var createdAt: Int64
    package var scheduledAt: Int64
    /// The active devices its audience matched when it was accepted.
    package var audienceSize: Int
    /// Deliveries not created yet (the rest of the audience is still to be expanded).
    package var expanding: Bool
    package var cancelledAt: Int64?
    /// What it sends and to whom, as stored (nil where a store does not read it).
    package var content: NotificationContent?

    package init(id: String, appID: String, createdAt: Int64, scheduledAt: Int64, audienceSize: Int, expanding: Bool, cancelledAt: Int64?) {
        self.id = id
        self.appID = appID
        self.createdAt = createdAt
        self.scheduledAt = scheduledAt
        self.audienceSize = audienceSize
        self.expanding = expanding
        self.cancelledAt = cancelledAt
    }
}

/// A notification's content and headers as stored: the history shows them.
package struct NotificationContent: Sendable, Hashable {
    /// The payload; nil for an end-to-end encrypted notification.
    package var payload: [UInt8]?
    package var encrypted: Bool
    /// Fixed by the sender, or nil: each device's kind decides.
    package var pushType: PushType?
    package var priority: Int64?
    package var collapseID: String?
    package var expiration: Int64?
    /// The stored targeting (``Targeting/jsonString(listsAsCounts:)``): to whom, in words.
    package var targetingJSON: String?

    package init(
        payload: [UInt8]?, encrypted: Bool, pushType: PushType?, priority: Int64?, collapseID: String?, expiration: Int64?, targetingJSON: String?
    ) {
        self.payload = payload
        self.encrypted = encrypted
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.expiration = expiration
        self.targetingJSON = targetingJSON
    }
}

/// Where a page of an app's notifications ended: the next page holds those that sort after it
/// (newest first: an earlier creation, or the same millisecond and a smaller id).
package struct NotificationPosition: Sendable, Hashable {
    package var createdAt: Int64
    package var id: String

    package init(createdAt: Int64, id: String) {
        self.createdAt = createdAt
        self.id = id
    }

    /// The one bound a page's query needs, `(created_at, id) < (bound.createdAt, bound.id)`:
    /// the tighter of "created before `before`" — `(before, "")`, the empty id sorting first in
    /// every collation — and "after the previous page's last". One row-value bound lets SQLite
    /// seek the index to it (with a separate `created_at <` it scanned from the newest).
    package static func bound(before: Int64?, after: NotificationPosition?) -> NotificationPosition {
        let time = NotificationPosition(createdAt: before ?? Int64.max, id: "")
        guard let after else { return time }
        return after.createdAt < time.createdAt ? after : time
    }
}

/// What a send committed: the notification (or the first one with its idempotency key), and
/// for a new notification to a token audience how many distinct listed tokens have no device in
/// the app (`unknownTokens`) or only an inactive one (`inactiveTokens`).
package struct CreatedNotification: Sendable, Hashable {
    package var id: String
    package var deliveries: Int
    package var existing: Bool
    package var unknownTokens: Int?
    package var inactiveTokens: Int?

    package init(id: String, deliveries: Int, existing: Bool, unknownTokens: Int? = nil, inactiveTokens: Int? = nil) {
        self.id = id
        self.deliveries = deliveries
        self.existing = existing
        self.unknownTokens = unknownTokens
        self.inactiveTokens = inactiveTokens
    }
}

/// A notification and its deliveries' states.
package struct NotificationStatus: Sendable, Hashable {
    package var summary: NotificationSummary
    /// Deliveries per state; audience members not expanded yet count as pending.
    package var counts: [DeliveryState: Int]
    package var deliveries: [DeliveryRecord]

    package var id: String { self.summary.id }

    package init(summary: NotificationSummary, counts: [DeliveryState: Int], deliveries: [DeliveryRecord]) {
        self.summary = summary
        self.counts = counts
        self.deliveries = deliveries
    }
}

/// An invalidation as recorded (audit trail).
package struct Invalidation: Sendable, Hashable {
    package var deviceID: Int64
    package var reason: String
    package var apnsTimestamp: Int64?
    package var at: Int64
    /// False when the device was re-registered after APNs's timestamp and so kept.
    package var applied: Bool

    package init(deviceID: Int64, reason: String, apnsTimestamp: Int64?, at: Int64, applied: Bool) {
        self.deviceID = deviceID
        self.reason = reason
        self.apnsTimestamp = apnsTimestamp
        self.at = at
        self.applied = applied
    }
}

extension DeliveryResult.Outcome {
    /// What the delivery's row says after this outcome: its state, next attempt (a retry's
    /// time; otherwise `now`), apns-id, status and reason.
    package func row(now: Int64) -> (state: DeliveryState, nextAttemptAt: Int64, apnsID: String?, status: Int?, reason: String?) {
        switch self {
        case .sent(let apnsID): (.sent, now, apnsID, 200, nil)
        case .retry(let status, let reason, let retryAt): (.pending, retryAt, nil, status, reason)
        case .failed(let status, let reason, _, _): (.failed, now, nil, status, reason)
        }
    }
}

/// Rows of deliveries to create, as a driver binds them.
package protocol NewDeliveryRows {
    mutating func add(
        id: Int64, notificationID: String, deviceID: Int64, token: String, environment: String, pushType: String, topic: String,
        state: DeliveryState, attempts: Int, nextAttemptAt: Int64, apnsID: String?, status: Int?, reason: String?, latency: Int64?, chunk: Int64?
    )
}

extension NewDeliveryRows {
    /// Adds the row of `device`'s delivery `id`, with no answer from APNs behind it (created
    /// pending for later, or failed without being sent).
    package mutating func add(
        id: Int64, device: ChunkDevice, notificationID: String, state: DeliveryState, attempts: Int, nextAttemptAt: Int64, reason: String?
    ) {
        self.add(
            id: id, notificationID: notificationID, deviceID: device.id, token: device.token, environment: device.environment,
            pushType: device.pushType, topic: device.topic, state: state, attempts: attempts, nextAttemptAt: nextAttemptAt, apnsID: nil,
            status: nil, reason: reason, latency: nil, chunk: nil
        )
    }

    /// Adds the row each chunk delivery among `results` creates; returns each chunk with the
    /// attempt answered, and each row's chunk.
    package mutating func addCreated(_ results: [DeliveryResult], now: Int64) -> (chunks: [Int64: Int], chunkOfRow: [Int64: Int64]) {
        var chunks: [Int64: Int] = [:]
        var chunkOfRow: [Int64: Int64] = [:]
        for result in results {
            guard let new = result.created else { continue }
            let (state, nextAttemptAt, apnsID, status, reason) = result.outcome.row(now: now)
            self.add(
                id: result.deliveryID, notificationID: new.notificationID, deviceID: new.deviceID, token: new.token,
                environment: new.route.stored, pushType: new.pushType.rawValue, topic: new.topic, state: state,
                attempts: result.attempt ?? 1, nextAttemptAt: nextAttemptAt, apnsID: apnsID, status: status, reason: reason,
                latency: result.latencyMilliseconds, chunk: new.chunk
            )
            chunks[new.chunk] = result.attempt ?? 1
            chunkOfRow[result.deliveryID] = new.chunk
        }
        return (chunks, chunkOfRow)
    }
}

extension [DeliveryResult] {
    /// The chunk deliveries among these told to retry: their rows are created pending, unless
    /// their notification was cancelled meanwhile.
    package var retriedChunkDeliveries: [Int64] {
        self.compactMap { result in
            guard result.created != nil, case .retry = result.outcome else { return nil }
            return result.deliveryID
        }
    }
}

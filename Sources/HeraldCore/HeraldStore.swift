// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// A stored API key, as needed to check a presented one.
package struct StoredAPIKey: Sendable, Hashable {
    package var id: String
    package var hash: [UInt8]
    package var scope: APIScope
    /// The one app a `register`/`send` key is bound to; nil for keys valid for every app.
    package var appID: String?
    package var name: String?
    package var createdAt: Int64
    /// When it was revoked; a revoked key authorizes nothing.
    package var revokedAt: Int64?
    /// When it stops working (ms); nil for never. Rotation sets it on the key it replaces.
    package var expiresAt: Int64?
    /// When it last authorized a request (ms), to the minute.
    package var lastUsedAt: Int64?

    package init(
        id: String, hash: [UInt8], scope: APIScope, appID: String?, name: String?, createdAt: Int64 = 0, revokedAt: Int64? = nil,
        expiresAt: Int64? = nil, lastUsedAt: Int64? = nil
    ) {
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.expiresAt = expiresAt
        self.lastUsedAt = lastUsedAt
        self.id = id
        self.hash = hash
        self.scope = scope
        self.appID = appID
        self.name = name
    }
}

/// Filters for listing devices.
package struct DeviceQuery: Sendable, Hashable {
    package var userID: String?
    package var tag: String?
    package var tokenPrefix: String?
    package var limit: Int
    /// Paging: only devices with a larger id (the list is in id order, ids are unique).
    package var afterID: Int64?

    package init(userID: String? = nil, tag: String? = nil, tokenPrefix: String? = nil, limit: Int = 100, afterID: Int64? = nil) {
        self.userID = userID
        self.tag = tag
        self.tokenPrefix = tokenPrefix
        self.limit = limit
        self.afterID = afterID
    }
}

/// Everything Herald keeps: apps and their sealed credentials, API keys, the device registry,
/// notifications and their deliveries (the durable outbox), and the invalidation audit trail.
/// SQLite is the embedded driver; PostgreSQL shares this contract.
package protocol HeraldStore: WebhookStore, GovernanceStore, ReceiptStore, TemplateStore, ChannelStore, LiveActivityStore {
    func createApp(_ app: App) async throws
    func app(_ id: String) async throws -> App?
    func apps() async throws -> [App]
    /// Every secret stored sealed (APNs credentials, webhook secrets, apps' user secrets) passed
    /// through `reseal` and written back, in one transaction: how many. For a change of master key.
    func resealSecrets(_ reseal: @escaping @Sendable ([UInt8]) throws -> [UInt8]) async throws -> Int
    /// Replaces an app's security settings; false when there is no such app.
    func setAppSecurity(appID: String, _ security: AppSecurity) async throws -> Bool

    /// Stores sealed (encrypted) credential material for one environment, replacing any before.
    func setCredential(appID: String, environment: Route, sealed: [UInt8], now: Int64) async throws
    func credentials(appID: String) async throws -> [Route: [UInt8]]

    func createAPIKey(id: String, hash: [UInt8], scope: APIScope, appID: String?, name: String?, expiresAt: Int64?, now: Int64) async throws
    /// A new key (`id`, `hash`) with the scope, app and name of the active key `replacing`, which
    /// stays valid until `overlapUntil` (or its own earlier expiry): the key replaced, as it is now;
    /// nil when there is no such active key.
    func rotateAPIKey(replacing: String, id: String, hash: [UInt8], expiresAt: Int64?, overlapUntil: Int64, now: Int64) async throws -> StoredAPIKey?
    /// Notes that the key authorized a request at `now`.
    func touchAPIKey(id: String, now: Int64) async throws
    /// An active (not revoked) key.
    func apiKey(id: String) async throws -> StoredAPIKey?
    /// Every key, revoked ones included.
    func apiKeys() async throws -> [StoredAPIKey]
    /// Revokes an active key; false when there is none. Refuses (409) to revoke the last admin key.
    func revokeAPIKey(id: String, now: Int64) async throws -> Bool
    func hasAPIKeys() async throws -> Bool
    /// Creates an admin key only if there is no key at all, atomically; false when there was one.
    func createFirstAPIKey(id: String, hash: [UInt8], name: String?, now: Int64) async throws -> Bool

    /// Idempotent upsert by token; moves the token to the new user; reactivates it. What the
    /// device holds now and `authority` decide what may change (``RegistrationPolicy``), in the
    /// same transaction.
    func register(appID: String, _ registration: DeviceRegistration, authority: RegistrationAuthority, now: Int64) async throws -> Device
    func unregister(appID: String, token: String) async throws -> Bool
    /// Devices in id order, up to `query.limit`, after `query.afterID` when given.
    func devices(appID: String, _ query: DeviceQuery) async throws -> [Device]
    func device(appID: String, token: String) async throws -> Device?
    func invalidations(appID: String, deviceID: Int64) async throws -> [Invalidation]

    /// Commits the notification with its targeting and the size of its audience (the active
    /// devices that match it now); deliveries are created chunk by chunk by `claimDeliveries`,
    /// from the devices that existed at acceptance. An idempotency key already used returns the
    /// first notification instead. For a token audience, the listed tokens that are unknown or
    /// inactive are counted in the same transaction (one set-based query).
    func createNotification(
        appID: String, id: String, bundleID: String, _ spec: NotificationSpec, now: Int64
    ) async throws
        -> CreatedNotification
    func notification(appID: String, id: String, deliveryLimit: Int) async throws -> NotificationStatus?
    /// The active devices a targeting matches now, per kind; reads only (a dry run).
    func audienceKinds(appID: String, targeting: Targeting) async throws -> [DeviceKind: Int]
    /// The app's notifications, newest first (by creation, then id: a total order), created
    /// before `before` (ms) when given, and coming after `after` (a previous page's last) when given.
    func notifications(appID: String, limit: Int, before: Int64?, after: NotificationPosition?) async throws -> [NotificationSummary]
    /// A device's deliveries, newest first (by id), among the app's 1000 most recent
    /// notifications; only those with an id below `beforeID` when given.
    func deliveries(appID: String, token: String, limit: Int, beforeID: Int64?) async throws -> [DeliveryRecord]
    /// A webhook's messages, newest first (by id); only those with an id below `beforeID` when given.
    func webhookMessages(webhookID: String, limit: Int, beforeID: Int64?) async throws -> [WebhookMessageRecord]
    /// Cancels a notification's pending deliveries; false when nothing was pending.
    func cancelNotification(appID: String, id: String, now: Int64) async throws -> Bool

    /// Leases up to `limit` due deliveries until `now + leaseMilliseconds`: first those already
    /// created (retries, expired leases, local-time ones now due), then the devices of audience
    /// chunks whose lease ran out (those without a delivery yet), then the next chunks of due
    /// notifications' audiences. A chunk is leased as a whole and its deliveries get their rows
    /// when recorded (``ClaimedDelivery/chunk``). Deliveries the policies set aside are not
    /// handed out; a batch they set aside whole is followed by the next
    /// (``ClaimPolicy/claimPastSetAside(_:)``), so an empty answer means nothing was due.
    func claimDeliveries(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedDelivery]
    /// Records outcomes, and invalidates devices where told to (unless re-registered after APNs's
    /// timestamp); a fenced result (its claim was superseded) changes nothing. A chunk's
    /// deliveries are created with their outcome (``DeliveryResult/created``), and the chunk's
    /// lease ends once all of them are recorded. Returns what was applied.
    @discardableResult
    func record(_ results: [DeliveryResult], now: Int64) async throws -> RecordedOutcomes
    /// Empties the payload (the plaintext) of these end-to-end encrypted notifications once
    /// nothing of theirs is left to send.
    func forgetPlaintext(notificationIDs: [String]) async throws
    /// Retention: deletes up to `limit` finished (sent or failed) deliveries last changed before
    /// `before` (ms), then the notifications created before it that have none left and nothing to
    /// expand; returns the deliveries deleted.
    func prune(before: Int64, limit: Int) async throws -> Int
    /// Deliveries per state (a scan of them all).
    func deliveryCounts() async throws -> [DeliveryState: Int]
    /// Pending deliveries, from the due index, for the queue-depth gauge.
    func pendingDeliveries() async throws -> Int
    /// The newest migration applied.
    func schemaVersion() async throws -> Int
    /// One round trip to the database; throws when it cannot be reached (`/health`).
    func check() async throws
}

extension HeraldStore {
    /// A key that never expires.
    package func createAPIKey(id: String, hash: [UInt8], scope: APIScope, appID: String?, name: String?, now: Int64) async throws {
        try await self.createAPIKey(id: id, hash: hash, scope: scope, appID: appID, name: name, expiresAt: nil, now: now)
    }

    /// A registration by the app's backend (send and admin keys): it may bind any user and tag.
    package func register(appID: String, _ registration: DeviceRegistration, now: Int64) async throws -> Device {
        try await self.register(appID: appID, registration, authority: .backend, now: now)
    }

    /// The first page of the app's notifications (created before `before` when given).
    package func notifications(appID: String, limit: Int, before: Int64?) async throws -> [NotificationSummary] {
        try await self.notifications(appID: appID, limit: limit, before: before, after: nil)
    }

    /// A device's most recent deliveries.
    package func deliveries(appID: String, token: String, limit: Int) async throws -> [DeliveryRecord] {
        try await self.deliveries(appID: appID, token: token, limit: limit, beforeID: nil)
    }
}

// SPDX-License-Identifier: Apache-2.0

/// What happened to a delivery, as told to SSE streams and webhooks.
package enum DeliveryEventType: String, Sendable, CaseIterable, Hashable {
    /// APNs accepted the push.
    case sent = "delivery.sent"
    /// APNs refused it for good (or it ran out of attempts or time).
    case failed = "delivery.failed"
    /// The device was deactivated: APNs called its token dead (410, BadDeviceToken, …).
    case invalidated = "token.invalidated"
    /// The device reported the push received (its notification service extension ran).
    case received = "delivery.received"
    /// The user opened the notification (or chose one of its actions).
    case opened = "delivery.opened"
}

/// A webhook: events of `types` for one app are POSTed to `url`, signed with its secret.
package struct Webhook: Sendable, Hashable {
    package var id: String
    package var appID: String
    package var url: String
    /// The HMAC secret, sealed under the master key.
    package var sealedSecret: [UInt8]
    package var types: Set<DeliveryEventType>
    package var createdAt: Int64

    package init(id: String, appID: String, url: String, sealedSecret: [UInt8], types: Set<DeliveryEventType>, createdAt: Int64) {
        self.id = id
        self.appID = appID
        self.url = url
        self.sealedSecret = sealedSecret
        self.types = types
        self.createdAt = createdAt
    }

    /// The stored form of `types`: names joined with commas, in a stable order.
    package var typeList: String { DeliveryEventType.allCases.filter(self.types.contains).map(\.rawValue).joined(separator: ",") }

    package static func types(_ list: String) -> Set<DeliveryEventType> {
        Set(list.split(separator: ",").compactMap { DeliveryEventType(rawValue: String($0)) })
    }
}

/// One POST waiting in the webhook outbox: a batch of events for one webhook.
package struct WebhookMessage: Sendable, Hashable {
    package var webhookID: String
    /// The JSON body, `{"events": [...]}`.
    package var body: [UInt8]
    package var events: Int

    package init(webhookID: String, body: [UInt8], events: Int) {
        self.webhookID = webhookID
        self.body = body
        self.events = events
    }
}

/// A webhook message claimed for sending, with what is needed to send it.
package struct ClaimedWebhookMessage: Sendable, Hashable {
    package var id: Int64
    package var webhook: Webhook
    package var body: [UInt8]
    /// This claim's attempt number (1 for the first), which fences its record.
    package var attempt: Int
    package var expiresAt: Int64

    package init(id: Int64, webhook: Webhook, body: [UInt8], attempt: Int, expiresAt: Int64) {
        self.id = id
        self.webhook = webhook
        self.body = body
        self.attempt = attempt
        self.expiresAt = expiresAt
    }
}

/// The outcome of one POST of a webhook message.
package struct WebhookAttempt: Sendable, Hashable {
    package var messageID: Int64
    /// The claim it answers: recorded only if the message was not claimed again since.
    package var attempt: Int
    /// Acknowledged (a 2xx answer): the message is done.
    package var delivered: Bool
    package var status: Int?
    package var error: String?
    /// When to try again; nil with `delivered == false` gives up (expired).
    package var retryAt: Int64?

    package init(messageID: Int64, attempt: Int, delivered: Bool, status: Int?, error: String?, retryAt: Int64?) {
        self.messageID = messageID
        self.attempt = attempt
        self.delivered = delivered
        self.status = status
        self.error = error
        self.retryAt = retryAt
    }
}

/// A webhook message as the dashboard and the API show it.
package struct WebhookMessageRecord: Sendable, Hashable {
    package enum State: String, Sendable {
        case pending, delivered, expired
    }

    package var id: Int64
    package var webhookID: String
    package var events: Int
    package var createdAt: Int64
    package var expiresAt: Int64
    package var attempts: Int
    package var state: State
    package var nextAttemptAt: Int64?
    package var deliveredAt: Int64?
    package var lastStatus: Int?
    package var lastError: String?

    package init(
        id: Int64, webhookID: String, events: Int, createdAt: Int64, expiresAt: Int64, attempts: Int, state: State, nextAttemptAt: Int64?,
        deliveredAt: Int64?, lastStatus: Int?, lastError: String?
    ) {
        self.id = id
        self.webhookID = webhookID
        self.events = events
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.attempts = attempts
        self.state = state
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
        self.lastStatus = lastStatus
        self.lastError = lastError
    }
}

/// Webhooks and their outbox; both drivers implement it beside ``HeraldStore``.
package protocol WebhookStore: Sendable {
    func createWebhook(_ webhook: Webhook) async throws
    func webhooks(appID: String) async throws -> [Webhook]
    /// Every app's webhooks (for the dispatcher's cache).
    func allWebhooks() async throws -> [Webhook]
    /// Deletes the webhook and its undelivered messages; false when there is none.
    func deleteWebhook(appID: String, id: String) async throws -> Bool
    /// Adds messages to the outbox, due at once, kept until acknowledged or `expiresAt`.
    func enqueueWebhookMessages(_ messages: [WebhookMessage], now: Int64, expiresAt: Int64) async throws
    /// Leases up to `limit` due messages until `now + leaseMilliseconds` (each process its own).
    func claimWebhookMessages(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedWebhookMessage]
    func recordWebhookAttempts(_ attempts: [WebhookAttempt], now: Int64) async throws
    /// A webhook's messages, newest first.
    func webhookMessages(webhookID: String, limit: Int) async throws -> [WebhookMessageRecord]
    /// Deletes finished messages created before `before`; returns how many.
    func pruneWebhookMessages(before: Int64) async throws -> Int
}

/// What the stores share to read a webhook message row: id, webhook_id, events, created_at,
/// expires_at, attempts, next_attempt_at, delivered_at, last_status, last_error.
extension WebhookMessageRecord {
    package static let columns = "id, webhook_id, events, created_at, expires_at, attempts, next_attempt_at, delivered_at, last_status, last_error"

    package init(row: some StoredRow) {
        let nextAttemptAt = row.int(6)
        let deliveredAt = row.int(7)
        self.init(
            id: row.int(0) ?? 0, webhookID: row.string(1) ?? "", events: Int(row.int(2) ?? 0), createdAt: row.int(3) ?? 0,
            expiresAt: row.int(4) ?? 0, attempts: Int(row.int(5) ?? 0),
            state: deliveredAt != nil ? .delivered : nextAttemptAt == nil ? .expired : .pending,
            nextAttemptAt: nextAttemptAt, deliveredAt: deliveredAt, lastStatus: row.int(8).map(Int.init), lastError: row.string(9)
        )
    }
}

extension Webhook {
    /// id, app_id, url, secret, types, created_at
    package static let columns = "id, app_id, url, secret, types, created_at"

    package init(row: some StoredRow, from start: Int = 0) {
        self.init(
            id: row.string(start) ?? "", appID: row.string(start + 1) ?? "", url: row.string(start + 2) ?? "",
            sealedSecret: row.bytes(start + 3) ?? [], types: Webhook.types(row.string(start + 4) ?? ""), createdAt: row.int(start + 5) ?? 0
        )
    }
}

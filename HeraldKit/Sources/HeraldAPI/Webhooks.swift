// SPDX-License-Identifier: Apache-2.0

/// `POST /v1/apps/{app}/webhooks`: where to POST, and which events (default: failures and invalidations).
public struct CreateWebhookRequest: Sendable, Hashable, Codable {
    public var url: String?
    public var events: [String]?

    public init(url: String, events: [String]? = nil) {
        self.url = url
        self.events = events
    }
}

/// A webhook; `secret` (for checking signatures) only in the answer that created it.
public struct WebhookResponse: Sendable, Hashable, Codable {
    public var id: String
    public var url: String
    public var events: [String]
    public var createdAt: Int64
    public var secret: String?

    public init(id: String, url: String, events: [String], createdAt: Int64, secret: String? = nil) {
        self.id = id
        self.url = url
        self.events = events
        self.createdAt = createdAt
        self.secret = secret
    }
}

/// `GET /v1/apps/{app}/webhooks`.
public struct WebhookList: Sendable, Hashable, Codable {
    public var webhooks: [WebhookResponse]

    public init(webhooks: [WebhookResponse]) { self.webhooks = webhooks }
}

/// One batch of events posted (or to be posted) to a webhook.
public struct WebhookMessageResponse: Sendable, Hashable, Codable {
    public var id: Int64
    public var events: Int
    /// `pending`, `delivered` or `failed`.
    public var state: String
    public var attempts: Int
    public var createdAt: Int64
    public var expiresAt: Int64
    public var nextAttemptAt: Int64?
    public var deliveredAt: Int64?
    public var lastStatus: Int?
    public var lastError: String?

    public init(
        id: Int64, events: Int, state: String, attempts: Int, createdAt: Int64, expiresAt: Int64, nextAttemptAt: Int64?, deliveredAt: Int64?,
        lastStatus: Int?, lastError: String?
    ) {
        self.id = id
        self.events = events
        self.state = state
        self.attempts = attempts
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
        self.lastStatus = lastStatus
        self.lastError = lastError
    }
}

/// `GET /v1/apps/{app}/webhooks/{id}/messages`: newest first; `next` is the opaque `cursor` of
/// the next page, null at the end.
public struct WebhookMessageList: Sendable, Hashable, Codable {
    public var messages: [WebhookMessageResponse]
    public var next: String?

    public init(messages: [WebhookMessageResponse], next: String? = nil) {
        self.messages = messages
        self.next = next
    }
}

// SPDX-License-Identifier: Apache-2.0

/// `POST /v1/apps/{app}/live-activities`: starts a Live Activity by push-to-start on the
/// push-to-start tokens of an audience of users, tags or tokens. Its updates reach it either
/// through the update token each device mints for it (`inputPushToken: true`) or through one of
/// the app's broadcast channels (`inputPushChannel`, Apple's channel id); exactly one of the two.
public struct StartLiveActivityRequest: Sendable, Hashable, Codable {
    /// `users`, `tags` (with `match`) or `tokens` (push-to-start tokens).
    public var audience: AudienceSelector?
    /// The name of the app's `ActivityAttributes` type.
    public var attributesType: String?
    /// The static attributes (a JSON object); Herald adds its activity id under `heraldActivityId`.
    public var attributes: JSON?
    /// The first `content-state` (a JSON object, as the app's `ContentState` decodes it).
    public var contentState: JSON?
    /// The alert the start shows (Apple requires one): a string, or an object with `title`, `body`, `sound`.
    public var alert: JSON?
    public var inputPushToken: Bool?
    public var inputPushChannel: String?
    /// UNIX seconds when the content goes stale.
    public var staleDate: Int64?
    public var relevanceScore: Double?
    /// Only tokens of this environment (`sandbox` or `production`); a channel's own environment otherwise.
    public var environment: String?

    public init(
        audience: AudienceSelector, attributesType: String, attributes: JSON, contentState: JSON, alert: JSON, inputPushToken: Bool? = nil,
        inputPushChannel: String? = nil, staleDate: Int64? = nil, relevanceScore: Double? = nil, environment: String? = nil
    ) {
        self.audience = audience
        self.attributesType = attributesType
        self.attributes = attributes
        self.contentState = contentState
        self.alert = alert
        self.inputPushToken = inputPushToken
        self.inputPushChannel = inputPushChannel
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.environment = environment
    }
}

/// `PATCH /v1/apps/{app}/live-activities/{id}`: an `update` event, to the activity's update
/// tokens or as one broadcast on its channel.
public struct UpdateLiveActivityRequest: Sendable, Hashable, Codable {
    /// The new `content-state` (required: every update carries the whole state).
    public var contentState: JSON?
    public var staleDate: Int64?
    public var relevanceScore: Double?
    public var alert: JSON?
    /// 5 (the default: no budget used) or 10 (counts against Apple's hourly budget).
    public var priority: Int?

    public init(contentState: JSON, staleDate: Int64? = nil, relevanceScore: Double? = nil, alert: JSON? = nil, priority: Int? = nil) {
        self.contentState = contentState
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.alert = alert
        self.priority = priority
    }
}

/// A Live Activity Herald started, and its state.
public struct LiveActivityResponse: Sendable, Hashable, Codable {
    public var id: String
    /// `active` or `ended`.
    public var state: String
    /// Why it ended: `ended` (through the API), `expired` (8 hours active), `user_changed`.
    public var endReason: String?
    public var attributesType: String
    /// The channel its updates are broadcast on; nil when they go to its update tokens.
    public var channel: String?
    public var environment: String?
    /// The update tokens registered with its id that receive its updates now.
    public var tokens: Int
    public var updates: Int
    public var startNotificationId: String
    public var lastNotificationId: String?
    public var startedAt: Int64
    public var updatedAt: Int64
    public var endedAt: Int64?

    public init(
        id: String, state: String, endReason: String?, attributesType: String, channel: String?, environment: String?, tokens: Int, updates: Int,
        startNotificationId: String, lastNotificationId: String?, startedAt: Int64, updatedAt: Int64, endedAt: Int64?
    ) {
        self.id = id
        self.state = state
        self.endReason = endReason
        self.attributesType = attributesType
        self.channel = channel
        self.environment = environment
        self.tokens = tokens
        self.updates = updates
        self.startNotificationId = startNotificationId
        self.lastNotificationId = lastNotificationId
        self.startedAt = startedAt
        self.updatedAt = updatedAt
        self.endedAt = endedAt
    }
}

public struct LiveActivityList: Sendable, Hashable, Codable {
    public var liveActivities: [LiveActivityResponse]
    /// The next page's `cursor`; null at the end of the list.
    public var next: String?

    public init(liveActivities: [LiveActivityResponse], next: String? = nil) {
        self.liveActivities = liveActivities
        self.next = next
    }
}

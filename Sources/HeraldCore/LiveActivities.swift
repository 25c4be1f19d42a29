// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// A Live Activity Herald started by push-to-start, and followed until it ends: what it was
/// started for, how its updates reach it (its update tokens, or one broadcast channel), and when
/// and why it ended.
package struct StoredLiveActivity: Sendable, Hashable {
    package var appID: String
    /// Herald's id; the start payload carries it in `attributes` (``LiveActivity/idKey``).
    package var id: String
    package var attributesType: String
    /// The start's audience as stored (``Targeting/jsonString``): users, tags or tokens.
    package var audienceJSON: String
    /// Started with `input-push-channel`: Apple's channel id and its environment; nil when it
    /// was started with `input-push-token` (its updates go to its update tokens).
    package var channelID: String?
    package var environment: APNSEnvironment?
    /// The newest `content-state` sent (JSON), which the end event repeats unless told otherwise.
    package var contentState: String
    package var startNotificationID: String
    package var startedAt: Int64
    package var updatedAt: Int64
    package var updates: Int
    package var lastNotificationID: String?
    package var endedAt: Int64?
    package var endReason: LiveActivity.EndReason?

    package init(
        appID: String, id: String, attributesType: String, audienceJSON: String, channelID: String?, environment: APNSEnvironment?,
        contentState: String, startNotificationID: String, startedAt: Int64, updatedAt: Int64? = nil, updates: Int = 0,
        lastNotificationID: String? = nil, endedAt: Int64? = nil, endReason: LiveActivity.EndReason? = nil
    ) {
        self.appID = appID
        self.id = id
        self.attributesType = attributesType
        self.audienceJSON = audienceJSON
        self.channelID = channelID
        self.environment = environment
        self.contentState = contentState
        self.startNotificationID = startNotificationID
        self.startedAt = startedAt
        self.updatedAt = updatedAt ?? startedAt
        self.updates = updates
        self.lastNotificationID = lastNotificationID
        self.endedAt = endedAt
        self.endReason = endReason
    }

    package var isActive: Bool { self.endedAt == nil }

    /// The users it was started for (an audience of users); nil for tags or tokens.
    package var users: [String]? {
        guard case .users(let users)? = Targeting(jsonString: self.audienceJSON)?.audience else { return nil }
        return users
    }

    package static let columns = """
        app_id, id, attributes_type, audience, channel_id, environment, content_state, start_notification_id, started_at, updated_at, \
        updates, last_notification_id, ended_at, end_reason
        """

    package init(row: some StoredRow) {
        self.init(
            appID: row.string(0) ?? "", id: row.string(1) ?? "", attributesType: row.string(2) ?? "", audienceJSON: row.string(3) ?? "{}",
            channelID: row.string(4), environment: row.string(5).flatMap(APNSEnvironment.init(rawValue:)), contentState: row.string(6) ?? "{}",
            startNotificationID: row.string(7) ?? "", startedAt: row.int(8) ?? 0, updatedAt: row.int(9) ?? 0, updates: Int(row.int(10) ?? 0),
            lastNotificationID: row.string(11), endedAt: row.int(12), endReason: row.string(13).flatMap(LiveActivity.EndReason.init(rawValue:))
        )
    }
}

/// Live Activity rules Herald keeps.
package enum LiveActivity {
    /// Why an activity ended.
    package enum EndReason: String, Sendable, Hashable, CaseIterable {
        /// Ended through the API (`DELETE`): an `end` event was sent.
        case ended
        /// Active for ``maximumActiveMilliseconds``: the system has ended it on the device.
        case expired
        /// The users it was started for no longer hold it (their tokens moved to another user,
        /// or to none: a logout).
        case userChanged = "user_changed"
    }

    /// The key of Herald's activity id in a start payload's `attributes`: the app declares it in
    /// its `ActivityAttributes` and registers the activity's update tokens with it.
    package static let idKey = "heraldActivityId"
    /// The system ends a Live Activity after 8 hours active.
    package static let maximumActiveMilliseconds: Int64 = 8 * 3_600_000
}

/// An update token registered for an activity, and whose it is.
package struct ActivityToken: Sendable, Hashable {
    package var token: String
    package var userID: String?

    package init(token: String, userID: String?) {
        self.token = token
        self.userID = userID
    }
}

/// Where the Live Activities Herald started are kept.
package protocol LiveActivityStore: Sendable {
    /// Keeps a started activity (before its start notification is created); false when the app
    /// has one with this id already, or an active one on its channel.
    func createLiveActivity(_ activity: StoredLiveActivity) async throws -> Bool
    /// Forgets an activity whose start could not be created; false when there is none.
    func deleteLiveActivity(appID: String, id: String) async throws -> Bool
    func liveActivity(appID: String, id: String) async throws -> StoredLiveActivity?
    /// The app's activities, newest first (by start, then id), up to `limit`; active ones only
    /// with `activeOnly`.
    func liveActivities(appID: String, activeOnly: Bool, limit: Int, before: LiveActivityPosition?) async throws -> [StoredLiveActivity]
    /// Ends an active activity at `at`, for `reason`, sending nothing (an end that is sent is
    /// claimed with ``claimLiveActivityEnd(appID:id:at:)``); false when it is not active.
    func endLiveActivity(appID: String, id: String, reason: LiveActivity.EndReason, at: Int64) async throws -> Bool
    /// Claims an update before it is sent: the content state, counted, only while the activity is
    /// active and has had `expectedUpdates` updates (compare-and-swap); false otherwise.
    func claimLiveActivityUpdate(appID: String, id: String, expectedUpdates: Int, contentState: String, now: Int64) async throws -> Bool
    /// Undoes a claimed update whose send failed: back to `previousContentState` and
    /// `claimedUpdates - 1` updates, only while nothing else has changed the activity since.
    func undoLiveActivityUpdate(appID: String, id: String, claimedUpdates: Int, contentState: String, previousContentState: String) async throws
    /// Claims the end (`ended`) before it is sent: ends the activity at `at` only while it is
    /// active; its newest content state, nil when it was not active.
    func claimLiveActivityEnd(appID: String, id: String, at: Int64) async throws -> String?
    /// Undoes a claimed end whose send failed: active again, only if it is still the end claimed at `at`.
    func undoLiveActivityEnd(appID: String, id: String, at: Int64) async throws
    /// Notes the notification that carried an update or end already claimed, and when.
    func setLiveActivityNotification(appID: String, id: String, notificationID: String, now: Int64) async throws
    /// The active update tokens (kind `liveactivity`) registered with this activity id, in id order.
    func activityTokens(appID: String, activityID: String) async throws -> [ActivityToken]
}

/// Where a page of an app's activities (newest first) ended: the last one's start and id.
package struct LiveActivityPosition: Sendable, Hashable {
    package var startedAt: Int64
    package var id: String

    package init(startedAt: Int64, id: String) {
        self.startedAt = startedAt
        self.id = id
    }
}

extension LiveActivityStore {
    /// The app's activities, newest first, from the start.
    package func liveActivities(appID: String, activeOnly: Bool, limit: Int) async throws -> [StoredLiveActivity] {
        try await self.liveActivities(appID: appID, activeOnly: activeOnly, limit: limit, before: nil)
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

extension SQLiteStore {
    package func createLiveActivity(_ activity: StoredLiveActivity) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                "INSERT OR IGNORE INTO live_activities (\(StoredLiveActivity.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    .text(activity.appID), .text(activity.id), .text(activity.attributesType), .text(activity.audienceJSON),
                    activity.channelID.map(SQLValue.text) ?? .null, activity.environment.map { .text($0.rawValue) } ?? .null,
                    .text(activity.contentState), .text(activity.startNotificationID), .integer(activity.startedAt), .integer(activity.updatedAt),
                    .integer(Int64(activity.updates)), activity.lastNotificationID.map(SQLValue.text) ?? .null,
                    activity.endedAt.map(SQLValue.integer) ?? .null, activity.endReason.map { .text($0.rawValue) } ?? .null,
                ]
            )
            return db.changes > 0
        }
    }

    package func liveActivity(appID: String, id: String) async throws -> StoredLiveActivity? {
        try await self.database.read { db in
            var found: StoredLiveActivity?
            try db.each("SELECT \(StoredLiveActivity.columns) FROM live_activities WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]) {
                found = StoredLiveActivity(row: $0)
            }
            return found
        }
    }

    package func liveActivities(appID: String, activeOnly: Bool, limit: Int) async throws -> [StoredLiveActivity] {
        try await self.database.read { db in
            var activities: [StoredLiveActivity] = []
            try db.each(
                """
                SELECT \(StoredLiveActivity.columns) FROM live_activities WHERE app_id = ?\(activeOnly ? " AND ended_at IS NULL" : "")
                ORDER BY started_at DESC, id DESC LIMIT ?
                """,
                [.text(appID), .integer(Int64(limit))]
            ) { activities.append(StoredLiveActivity(row: $0)) }
            return activities
        }
    }

    package func recordLiveActivityUpdate(appID: String, id: String, contentState: String, notificationID: String?, now: Int64) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                """
                UPDATE live_activities SET content_state = ?, updates = updates + 1, updated_at = ?,
                    last_notification_id = coalesce(?, last_notification_id)
                WHERE app_id = ? AND id = ? AND ended_at IS NULL
                """,
                [.text(contentState), .integer(now), notificationID.map(SQLValue.text) ?? .null, .text(appID), .text(id)]
            )
            return db.changes > 0
        }
    }

    package func endLiveActivity(appID: String, id: String, reason: LiveActivity.EndReason, notificationID: String?, at: Int64) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                """
                UPDATE live_activities SET ended_at = ?, end_reason = ?, updated_at = max(updated_at, ?),
                    last_notification_id = coalesce(?, last_notification_id)
                WHERE app_id = ? AND id = ? AND ended_at IS NULL
                """,
                [.integer(at), .text(reason.rawValue), .integer(at), notificationID.map(SQLValue.text) ?? .null, .text(appID), .text(id)]
            )
            return db.changes > 0
        }
    }

    package func activityTokens(appID: String, activityID: String) async throws -> [ActivityToken] {
        try await self.database.read { db in
            var tokens: [ActivityToken] = []
            try db.each(
                "SELECT token, user_id FROM devices WHERE app_id = ? AND activity_id = ? AND kind = 'liveactivity' AND active = 1 ORDER BY id",
                [.text(appID), .text(activityID)]
            ) { tokens.append(ActivityToken(token: $0.string(0) ?? "", userID: $0.string(1))) }
            return tokens
        }
    }
}

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

    package func deleteLiveActivity(appID: String, id: String) async throws -> Bool {
        try await self.database.write { db in
            try db.query("DELETE FROM live_activities WHERE app_id = ? AND id = ?", [.text(appID), .text(id)])
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

    package func liveActivities(appID: String, activeOnly: Bool, limit: Int, before: LiveActivityPosition?) async throws -> [StoredLiveActivity] {
        try await self.database.read { db in
            var activities: [StoredLiveActivity] = []
            try db.each(
                """
                SELECT \(StoredLiveActivity.columns) FROM live_activities WHERE app_id = ?1\(activeOnly ? " AND ended_at IS NULL" : "")
                    AND (?3 IS NULL OR started_at < ?3 OR (started_at = ?3 AND id < ?4))
                ORDER BY started_at DESC, id DESC LIMIT ?2
                """,
                [.text(appID), .integer(Int64(limit)), before.map { .integer($0.startedAt) } ?? .null, .text(before?.id ?? "")]
            ) { activities.append(StoredLiveActivity(row: $0)) }
            return activities
        }
    }

    package func endLiveActivity(appID: String, id: String, reason: LiveActivity.EndReason, at: Int64) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                """
                UPDATE live_activities SET ended_at = ?, end_reason = ?, updated_at = max(updated_at, ?)
                WHERE app_id = ? AND id = ? AND ended_at IS NULL
                """,
                [.integer(at), .text(reason.rawValue), .integer(at), .text(appID), .text(id)]
            )
            return db.changes > 0
        }
    }

    package func claimLiveActivityUpdate(appID: String, id: String, expectedUpdates: Int, contentState: String, now: Int64) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                """
                UPDATE live_activities SET content_state = ?, updates = updates + 1, updated_at = max(updated_at, ?)
                WHERE app_id = ? AND id = ? AND ended_at IS NULL AND updates = ?
                """,
                [.text(contentState), .integer(now), .text(appID), .text(id), .integer(Int64(expectedUpdates))]
            )
            return db.changes > 0
        }
    }

    package func undoLiveActivityUpdate(
        appID: String, id: String, claimedUpdates: Int, contentState: String, previousContentState: String
    ) async throws {
        try await self.database.write { db in
            try db.query(
                """
                UPDATE live_activities SET content_state = ?, updates = updates - 1
                WHERE app_id = ? AND id = ? AND ended_at IS NULL AND updates = ? AND content_state = ?
                """,
                [.text(previousContentState), .text(appID), .text(id), .integer(Int64(claimedUpdates)), .text(contentState)]
            )
        }
    }

    package func claimLiveActivityEnd(appID: String, id: String, at: Int64) async throws -> String? {
        try await self.database.write { db in
            // One write transaction at a time: the row read is the one this statement ended.
            try db.query(
                "UPDATE live_activities SET ended_at = ?, end_reason = 'ended', updated_at = max(updated_at, ?) WHERE app_id = ? AND id = ? AND ended_at IS NULL",
                [.integer(at), .integer(at), .text(appID), .text(id)]
            )
            guard db.changes > 0 else { return nil }
            var state: String?
            try db.each("SELECT content_state FROM live_activities WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]) { state = $0.string(0) }
            return state ?? "{}"
        }
    }

    package func undoLiveActivityEnd(appID: String, id: String, at: Int64) async throws {
        try await self.database.write { db in
            try db.query(
                "UPDATE live_activities SET ended_at = NULL, end_reason = NULL WHERE app_id = ? AND id = ? AND ended_at = ? AND end_reason = 'ended'",
                [.text(appID), .text(id), .integer(at)]
            )
        }
    }

    package func setLiveActivityNotification(appID: String, id: String, notificationID: String, now: Int64) async throws {
        try await self.database.write { db in
            try db.query(
                "UPDATE live_activities SET last_notification_id = ?, updated_at = max(updated_at, ?) WHERE app_id = ? AND id = ?",
                [.text(notificationID), .integer(now), .text(appID), .text(id)]
            )
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

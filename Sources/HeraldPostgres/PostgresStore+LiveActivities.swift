// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

extension PostgresStore {
    package func createLiveActivity(_ activity: StoredLiveActivity) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                """
                INSERT INTO live_activities (\(StoredLiveActivity.columns))
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                ON CONFLICT DO NOTHING RETURNING id
                """,
                [
                    .text(activity.appID), .text(activity.id), .text(activity.attributesType), .text(activity.audienceJSON),
                    .text(activity.channelID), .text(activity.environment?.rawValue), .text(activity.contentState),
                    .text(activity.startNotificationID), .int(activity.startedAt), .int(activity.updatedAt), .int(Int64(activity.updates)),
                    .text(activity.lastNotificationID), .int(activity.endedAt), .text(activity.endReason?.rawValue),
                ]
            ).isEmpty == false
        }
    }

    package func liveActivity(appID: String, id: String) async throws -> StoredLiveActivity? {
        try await self.read { db in
            try await db.query(
                "SELECT \(StoredLiveActivity.columns) FROM live_activities WHERE app_id = $1 AND id = $2", [.text(appID), .text(id)]
            ).first.map { StoredLiveActivity(row: $0) }
        }
    }

    package func liveActivities(appID: String, activeOnly: Bool, limit: Int) async throws -> [StoredLiveActivity] {
        try await self.read { db in
            try await db.query(
                """
                SELECT \(StoredLiveActivity.columns) FROM live_activities WHERE app_id = $1\(activeOnly ? " AND ended_at IS NULL" : "")
                ORDER BY started_at DESC, id COLLATE "C" DESC LIMIT $2
                """,
                [.text(appID), .int(Int64(limit))]
            ).map { StoredLiveActivity(row: $0) }
        }
    }

    package func recordLiveActivityUpdate(appID: String, id: String, contentState: String, notificationID: String?, now: Int64) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                """
                UPDATE live_activities SET content_state = $1, updates = updates + 1, updated_at = $2,
                    last_notification_id = coalesce($3, last_notification_id)
                WHERE app_id = $4 AND id = $5 AND ended_at IS NULL RETURNING id
                """,
                [.text(contentState), .int(now), .text(notificationID), .text(appID), .text(id)]
            ).isEmpty == false
        }
    }

    package func endLiveActivity(appID: String, id: String, reason: LiveActivity.EndReason, notificationID: String?, at: Int64) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                """
                UPDATE live_activities SET ended_at = $1, end_reason = $2, updated_at = greatest(updated_at, $1),
                    last_notification_id = coalesce($3, last_notification_id)
                WHERE app_id = $4 AND id = $5 AND ended_at IS NULL RETURNING id
                """,
                [.int(at), .text(reason.rawValue), .text(notificationID), .text(appID), .text(id)]
            ).isEmpty == false
        }
    }

    package func activityTokens(appID: String, activityID: String) async throws -> [ActivityToken] {
        try await self.read { db in
            try await db.query(
                "SELECT token, user_id FROM devices WHERE app_id = $1 AND activity_id = $2 AND kind = 'liveactivity' AND active ORDER BY id",
                [.text(appID), .text(activityID)]
            ).map { ActivityToken(token: $0.string(0) ?? "", userID: $0.string(1)) }
        }
    }
}

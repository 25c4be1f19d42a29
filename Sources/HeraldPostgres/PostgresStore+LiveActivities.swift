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

    package func deleteLiveActivity(appID: String, id: String) async throws -> Bool {
        try await self.write { db in
            try await db.query("DELETE FROM live_activities WHERE app_id = $1 AND id = $2 RETURNING id", [.text(appID), .text(id)]).isEmpty == false
        }
    }

    package func liveActivity(appID: String, id: String) async throws -> StoredLiveActivity? {
        try await self.read { db in
            try await db.query(
                "SELECT \(StoredLiveActivity.columns) FROM live_activities WHERE app_id = $1 AND id = $2", [.text(appID), .text(id)]
            ).first.map { StoredLiveActivity(row: $0) }
        }
    }

    package func liveActivities(appID: String, activeOnly: Bool, limit: Int, before: LiveActivityPosition?) async throws -> [StoredLiveActivity] {
        try await self.read { db in
            try await db.query(
                """
                SELECT \(StoredLiveActivity.columns) FROM live_activities WHERE app_id = $1\(activeOnly ? " AND ended_at IS NULL" : "")
                    AND ($3::bigint IS NULL OR started_at < $3 OR (started_at = $3 AND id COLLATE "C" < $4 COLLATE "C"))
                ORDER BY started_at DESC, id COLLATE "C" DESC LIMIT $2
                """,
                [.text(appID), .int(Int64(limit)), .int(before?.startedAt), .text(before?.id ?? "")]
            ).map { StoredLiveActivity(row: $0) }
        }
    }

    package func endLiveActivity(appID: String, id: String, reason: LiveActivity.EndReason, at: Int64) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                """
                UPDATE live_activities SET ended_at = $1, end_reason = $2, updated_at = greatest(updated_at, $1)
                WHERE app_id = $3 AND id = $4 AND ended_at IS NULL RETURNING id
                """,
                [.int(at), .text(reason.rawValue), .text(appID), .text(id)]
            ).isEmpty == false
        }
    }

    package func claimLiveActivityUpdate(appID: String, id: String, expectedUpdates: Int, contentState: String, now: Int64) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                """
                UPDATE live_activities SET content_state = $1, updates = updates + 1, updated_at = greatest(updated_at, $2)
                WHERE app_id = $3 AND id = $4 AND ended_at IS NULL AND updates = $5 RETURNING id
                """,
                [.text(contentState), .int(now), .text(appID), .text(id), .int(Int64(expectedUpdates))]
            ).isEmpty == false
        }
    }

    package func undoLiveActivityUpdate(
        appID: String, id: String, claimedUpdates: Int, contentState: String, previousContentState: String
    ) async throws {
        try await self.write { db in
            _ = try await db.query(
                """
                UPDATE live_activities SET content_state = $1, updates = updates - 1
                WHERE app_id = $2 AND id = $3 AND ended_at IS NULL AND updates = $4 AND content_state = $5 RETURNING id
                """,
                [.text(previousContentState), .text(appID), .text(id), .int(Int64(claimedUpdates)), .text(contentState)]
            )
        }
    }

    package func claimLiveActivityEnd(appID: String, id: String, at: Int64) async throws -> String? {
        try await self.write { db in
            try await db.query(
                """
                UPDATE live_activities SET ended_at = $1, end_reason = 'ended', updated_at = greatest(updated_at, $1)
                WHERE app_id = $2 AND id = $3 AND ended_at IS NULL RETURNING content_state
                """,
                [.int(at), .text(appID), .text(id)]
            ).first.map { $0.string(0) ?? "{}" }
        }
    }

    package func undoLiveActivityEnd(appID: String, id: String, at: Int64) async throws {
        try await self.write { db in
            _ = try await db.query(
                """
                UPDATE live_activities SET ended_at = NULL, end_reason = NULL
                WHERE app_id = $1 AND id = $2 AND ended_at = $3 AND end_reason = 'ended' RETURNING id
                """,
                [.text(appID), .text(id), .int(at)]
            )
        }
    }

    package func setLiveActivityNotification(appID: String, id: String, notificationID: String, now: Int64) async throws {
        try await self.write { db in
            _ = try await db.query(
                """
                UPDATE live_activities SET last_notification_id = $1, updated_at = greatest(updated_at, $2)
                WHERE app_id = $3 AND id = $4 RETURNING id
                """,
                [.text(notificationID), .int(now), .text(appID), .text(id)]
            )
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

// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

/// Data governance on PostgreSQL: an app deleted in short transactions, credentials as metadata,
/// a user's data exported or erased, the audit trail. A deleted or updated row stays in its
/// table's file as a dead tuple until VACUUM reclaims it (autovacuum, or the VACUUM that
/// `eraseUser`'s caller may run): see docs/server.md, "Data governance".
extension PostgresStore {
    package func credentialRecords(appID: String) async throws -> [CredentialRecord] {
        try await self.read { db in
            try await db.query(
                "SELECT environment, sealed, updated_at FROM credentials WHERE app_id = $1 ORDER BY environment COLLATE \"C\"", [.text(appID)]
            ).compactMap { row in
                guard let environment = row.string(0).flatMap(Route.init(stored:)), let sealed = row.bytes(1) else { return nil }
                return CredentialRecord(environment: environment, sealed: sealed, updatedAt: row.int(2) ?? 0)
            }
        }
    }

    package func deleteCredential(appID: String, environment: Route) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                "DELETE FROM credentials WHERE app_id = $1 AND environment = $2 RETURNING 1", [.text(appID), .text(environment.stored)]
            ).isEmpty == false
        }
    }

    /// Children first, as in SQLite's; each counts what it deleted. frequency_counts has no
    /// foreign key (migration 16): its rows are deleted here, after the deliveries that write them.
    static let appDeletionSteps = [
        "DELETE FROM deliveries WHERE id IN (SELECT x.id FROM notifications n JOIN deliveries x ON x.notification_id = n.id WHERE n.app_id = $1 LIMIT $2)",
        """
        DELETE FROM delivery_chunks WHERE id IN (
            SELECT c.id FROM notifications n JOIN delivery_chunks c ON c.notification_id = n.id WHERE n.app_id = $1 LIMIT $2)
        """,
        "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications WHERE app_id = $1 LIMIT $2)",
        """
        DELETE FROM frequency_counts WHERE (app_id, subject, category) IN (
            SELECT app_id, subject, category FROM frequency_counts WHERE app_id = $1 LIMIT $2)
        """,
        """
        DELETE FROM device_tags WHERE (device_id, tag) IN (
            SELECT t.device_id, t.tag FROM devices d JOIN device_tags t ON t.device_id = d.id WHERE d.app_id = $1 LIMIT $2)
        """,
        "DELETE FROM invalidations WHERE id IN (SELECT id FROM invalidations WHERE app_id = $1 LIMIT $2)",
        "DELETE FROM devices WHERE id IN (SELECT id FROM devices WHERE app_id = $1 LIMIT $2)",
        """
        DELETE FROM webhook_messages WHERE id IN (
            SELECT m.id FROM webhooks w JOIN webhook_messages m ON m.webhook_id = w.id WHERE w.app_id = $1 LIMIT $2)
        """,
    ]

    package func deleteAppRows(appID: String, limit: Int, now: Int64) async throws -> Int {
        defer { self.lookups.clear() }
        return try await self.write { db in
            var deleted = try await db.query(
                "UPDATE api_keys SET revoked_at = $2 WHERE app_id = $1 AND revoked_at IS NULL RETURNING 1", [.text(appID), .int(now)]
            ).count
            deleted += try await db.query("DELETE FROM credentials WHERE app_id = $1 RETURNING 1", [.text(appID)]).count
            for step in Self.appDeletionSteps where deleted < limit {
                deleted +=
                    try await db.query(
                        "WITH gone AS (\(step) RETURNING 1) SELECT count(*) FROM gone", [.text(appID), .int(Int64(limit - deleted))]
                    ).first?.int(0).map(Int.init) ?? 0
            }
            if deleted == 0 {
                deleted = try await db.query("DELETE FROM apps WHERE id = $1 RETURNING 1", [.text(appID)]).count
                // A claim that locked the app before (to write its people's frequency-cap rows,
                // which have no foreign key) has committed now: what it wrote goes too (a claim's
                // rows at most, per claim that held the lock). A later one finds no app and writes none.
                try await db.query("DELETE FROM frequency_counts WHERE app_id = $1", [.text(appID)])
            } else {
                try await db.query("UPDATE apps SET deleted_rows = deleted_rows + $2 WHERE id = $1", [.text(appID), .int(Int64(deleted))])
            }
            return deleted
        }
    }

    package func beginAppDeletion(appID: String, now: Int64) async throws -> App? {
        defer { self.lookups.clear() }
        return try await self.write { db in
            guard
                let row = try await db.query(
                    "UPDATE apps SET deleting_since = coalesce(deleting_since, $2) WHERE id = $1 RETURNING \(Self.appColumns)",
                    [.text(appID), .int(now)]
                ).first
            else { return nil }
            try await db.query("UPDATE api_keys SET revoked_at = $2 WHERE app_id = $1 AND revoked_at IS NULL", [.text(appID), .int(now)])
            try await db.query("DELETE FROM credentials WHERE app_id = $1", [.text(appID)])
            return Self.app(row)
        }
    }

    package func appsBeingDeleted() async throws -> [String] {
        try await self.read { db in
            try await db.query("SELECT id FROM apps WHERE deleting_since IS NOT NULL ORDER BY deleting_since").compactMap { $0.string(0) }
        }
    }

    package func userDevices(appID: String, userID: String) async throws -> [Device] {
        let tokens = try await self.read { db in
            try await db.query("SELECT token FROM devices WHERE app_id = $1 AND user_id = $2 ORDER BY id", [.text(appID), .text(userID)])
                .compactMap { $0.string(0) }
        }
        var devices: [Device] = []
        for token in tokens {
            if let device = try await self.device(appID: appID, token: token) { devices.append(device) }
        }
        return devices
    }

    package func deliveries(appID: String, deviceIDs: [Int64]) async throws -> [DeliveryRecord] {
        guard !deviceIDs.isEmpty else { return [] }
        return try await self.read { db in
            try await db.query(
                """
                SELECT \(StoreSQL.deliveryColumns) FROM notifications n JOIN deliveries x ON x.notification_id = n.id
                JOIN devices d ON d.id = x.device_id
                WHERE n.app_id = $1 AND x.device_id = ANY($2) ORDER BY x.id DESC
                """,
                [.text(appID), .ints(deviceIDs)]
            ).map { DeliveryRecord(row: $0) }
        }
    }

    package func eraseUser(appID: String, userID: String, audit: AuditRecord) async throws -> UserErasure {
        try await self.write { db in
            var erasure = UserErasure()
            let devices = try await db.query(
                "SELECT id, token FROM devices WHERE app_id = $1 AND user_id = $2 FOR UPDATE", [.text(appID), .text(userID)]
            )
            let ids = devices.compactMap { $0.int(0) }
            if !ids.isEmpty {
                erasure.notifications = try await db.query(
                    """
                    UPDATE notifications SET payload = ''::bytea, template = NULL WHERE length(payload) > 0 AND id IN (
                        SELECT m.id FROM (
                            SELECT x.notification_id AS id, count(*) AS mine FROM notifications n JOIN deliveries x ON x.notification_id = n.id
                            WHERE n.app_id = $1 AND x.device_id = ANY($2) GROUP BY x.notification_id
                        ) m JOIN notifications n ON n.id = m.id
                        WHERE n.expand_after IS NULL AND n.audience_size <= m.mine
                        AND NOT EXISTS (SELECT 1 FROM deliveries y WHERE y.notification_id = m.id AND NOT (y.device_id = ANY($2))))
                    RETURNING 1
                    """,
                    [.text(appID), .ints(ids)]
                ).count
                erasure.deliveries = try await db.query(
                    """
                    UPDATE deliveries SET token = '',
                        reason = CASE WHEN state = 'pending' THEN '\(GovernancePolicy.erasedReason)' ELSE reason END,
                        state = CASE WHEN state = 'pending' THEN 'failed' ELSE state END
                    WHERE id IN (
                        SELECT x.id FROM notifications n JOIN deliveries x ON x.notification_id = n.id WHERE n.app_id = $1 AND x.device_id = ANY($2))
                    RETURNING 1
                    """,
                    [.text(appID), .ints(ids)]
                ).count
                for token in devices.compactMap({ $0.string(1) }) {
                    erasure.webhookMessages += try await db.query(
                        """
                        UPDATE webhook_messages SET body = convert_to(replace(convert_from(body, 'UTF8'), $2, ''), 'UTF8')
                        WHERE webhook_id IN (SELECT id FROM webhooks WHERE app_id = $1) AND position(convert_to($2, 'UTF8') IN body) > 0
                        RETURNING 1
                        """,
                        [.text(appID), .text(token)]
                    ).count
                }
                try await db.query("DELETE FROM invalidations WHERE app_id = $1 AND device_id = ANY($2)", [.text(appID), .ints(ids)])
                erasure.devices = try await db.query(
                    "DELETE FROM devices WHERE app_id = $1 AND id = ANY($2) RETURNING 1", [.text(appID), .ints(ids)]
                ).count
            }
            // The user's frequency-cap history (the times of their recent alerts).
            try await db.query("DELETE FROM frequency_counts WHERE app_id = $1 AND subject = $2", [.text(appID), .text("u:" + userID)])
            // The Live Activities started for users among whom they are: the user leaves their
            // audience, and one started for no one else is deleted.
            try await db.query(
                """
                UPDATE live_activities SET audience = jsonb_set(audience::jsonb, '{users}', (audience::jsonb -> 'users') - $2::text)::text
                WHERE app_id = $1 AND (audience::jsonb -> 'users') @> jsonb_build_array($2::text)
                """, [.text(appID), .text(userID)])
            try await db.query(
                """
                DELETE FROM live_activities
                WHERE app_id = $1 AND jsonb_typeof(audience::jsonb -> 'users') = 'array' AND jsonb_array_length(audience::jsonb -> 'users') = 0
                """, [.text(appID)])
            try await Self.insertAudit(db, audit)
            return erasure
        }
    }

    package func addAudit(_ record: AuditRecord) async throws {
        try await self.write { db in try await Self.insertAudit(db, record) }
    }

    package func auditRecords(appID: String?, limit: Int) async throws -> [AuditRecord] {
        try await self.read { db in
            try await db.query(
                "SELECT id, at, key_id, action, app_id, subject FROM audit WHERE $1::text IS NULL OR app_id = $1 ORDER BY id DESC LIMIT $2",
                [.text(appID), .int(Int64(limit))]
            ).map { row in
                AuditRecord(
                    id: row.int(0) ?? 0, at: row.int(1) ?? 0, keyID: row.string(2), action: row.string(3) ?? "", appID: row.string(4),
                    subject: row.string(5))
            }
        }
    }

    private static func insertAudit(_ db: Connection, _ record: AuditRecord) async throws {
        try await db.query(
            "INSERT INTO audit (at, key_id, action, app_id, subject) VALUES ($1, $2, $3, $4, $5)",
            [.int(record.at), .text(record.keyID), .text(record.action), .text(record.appID), .text(record.subject)]
        )
    }
}

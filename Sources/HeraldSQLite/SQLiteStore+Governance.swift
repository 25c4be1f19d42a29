// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

/// Data governance on SQLite: an app deleted in short write transactions (SQLite has one writer,
/// so each chunk lets other apps' writes in between), credentials as metadata, a user's data
/// exported or erased, the audit trail.
extension SQLiteStore {
    package func credentialRecords(appID: String) async throws -> [CredentialRecord] {
        try await self.database.read { db in
            try db.query("SELECT environment, sealed, updated_at FROM credentials WHERE app_id = ? ORDER BY environment", [.text(appID)])
                .compactMap { row in
                    guard let environment = row[0].string.flatMap(Route.init(stored:)), let sealed = row[1].bytes else { return nil }
                    return CredentialRecord(environment: environment, sealed: sealed, updatedAt: row[2].int ?? 0)
                }
        }
    }

    package func deleteCredential(appID: String, environment: Route) async throws -> Bool {
        try await self.database.write { db in
            try db.query("DELETE FROM credentials WHERE app_id = ? AND environment = ?", [.text(appID), .text(environment.stored)])
            return db.changes > 0
        }
    }

    /// Children first, so that each statement deletes what it names and nothing cascades far.
    /// frequency_counts has no foreign key (migration 15): its rows are deleted here, after the
    /// deliveries whose claims write them (in the claim's transaction: none once they are gone).
    static let appDeletionSteps = [
        "DELETE FROM deliveries WHERE id IN (SELECT x.id FROM notifications n JOIN deliveries x ON x.notification_id = n.id WHERE n.app_id = ?1 LIMIT ?2)",
        """
        DELETE FROM delivery_chunks WHERE id IN (
            SELECT c.id FROM notifications n JOIN delivery_chunks c ON c.notification_id = n.id WHERE n.app_id = ?1 LIMIT ?2)
        """,
        "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications WHERE app_id = ?1 LIMIT ?2)",
        """
        DELETE FROM frequency_counts WHERE (app_id, subject, category) IN (
            SELECT app_id, subject, category FROM frequency_counts WHERE app_id = ?1 LIMIT ?2)
        """,
        """
        DELETE FROM device_tags WHERE (device_id, tag) IN (
            SELECT t.device_id, t.tag FROM devices d JOIN device_tags t ON t.device_id = d.id WHERE d.app_id = ?1 LIMIT ?2)
        """,
        "DELETE FROM invalidations WHERE id IN (SELECT id FROM invalidations WHERE app_id = ?1 LIMIT ?2)",
        "DELETE FROM devices WHERE id IN (SELECT id FROM devices WHERE app_id = ?1 LIMIT ?2)",
        """
        DELETE FROM webhook_messages WHERE id IN (
            SELECT m.id FROM webhooks w JOIN webhook_messages m ON m.webhook_id = w.id WHERE w.app_id = ?1 LIMIT ?2)
        """,
    ]

    package func deleteAppRows(appID: String, limit: Int, now: Int64) async throws -> Int {
        defer { self.lookups.clear() }
        return try await self.database.write { db in
            // First of all, nothing more can be sent or registered with the app's own keys or credentials.
            try db.query("UPDATE api_keys SET revoked_at = ?2 WHERE app_id = ?1 AND revoked_at IS NULL", [.text(appID), .integer(now)])
            var deleted = db.changes
            try db.query("DELETE FROM credentials WHERE app_id = ?", [.text(appID)])
            deleted += db.changes
            for step in Self.appDeletionSteps where deleted < limit {
                try db.query(step, [.text(appID), .integer(Int64(limit - deleted))])
                deleted += db.changes
            }
            if deleted == 0 {
                // Nothing left but the app, its webhooks and its (revoked) keys: a small cascade.
                try db.query("DELETE FROM apps WHERE id = ?", [.text(appID)])
                deleted = db.changes
            } else {
                try db.query("UPDATE apps SET deleted_rows = deleted_rows + ? WHERE id = ?", [.integer(Int64(deleted)), .text(appID)])
            }
            return deleted
        }
    }

    package func beginAppDeletion(appID: String, now: Int64) async throws -> App? {
        defer { self.lookups.clear() }
        return try await self.database.write { db in
            try db.query("UPDATE apps SET deleting_since = coalesce(deleting_since, ?2) WHERE id = ?1", [.text(appID), .integer(now)])
            guard db.changes > 0 else { return nil }
            try db.query("UPDATE api_keys SET revoked_at = ?2 WHERE app_id = ?1 AND revoked_at IS NULL", [.text(appID), .integer(now)])
            try db.query("DELETE FROM credentials WHERE app_id = ?", [.text(appID)])
            return try db.query("SELECT \(Self.appColumns) FROM apps WHERE id = ?", [.text(appID)]).first.map(Self.app)
        }
    }

    package func appsBeingDeleted() async throws -> [String] {
        try await self.database.read { db in
            try db.query("SELECT id FROM apps WHERE deleting_since IS NOT NULL ORDER BY deleting_since").compactMap { $0[0].string }
        }
    }

    package func userDevices(appID: String, userID: String) async throws -> [Device] {
        let tokens = try await self.database.read { db in
            try db.query("SELECT token FROM devices WHERE app_id = ? AND user_id = ? ORDER BY id", [.text(appID), .text(userID)]).compactMap {
                $0[0].string
            }
        }
        var devices: [Device] = []
        for token in tokens {
            if let device = try await self.device(appID: appID, token: token) { devices.append(device) }
        }
        return devices
    }

    package func deliveries(appID: String, deviceIDs: [Int64]) async throws -> [DeliveryRecord] {
        guard !deviceIDs.isEmpty else { return [] }
        return try await self.database.read { db in
            var result: [DeliveryRecord] = []
            try db.each(
                """
                SELECT \(StoreSQL.deliveryColumns) FROM notifications n JOIN deliveries x ON x.notification_id = n.id
                JOIN devices d ON d.id = x.device_id
                WHERE n.app_id = ?1 AND x.device_id IN (SELECT value FROM json_each(?2)) ORDER BY x.id DESC
                """,
                [.text(appID), .text(Self.jsonArray(deviceIDs))]
            ) { result.append(DeliveryRecord(row: $0)) }
            return result
        }
    }

    /// Then checkpoints, so that the WAL's older page images (which held the tokens) are gone too.
    package func eraseUser(appID: String, userID: String, audit: AuditRecord) async throws -> UserErasure {
        let erasure = try await self.erase(appID: appID, userID: userID, audit: audit)
        try await self.database.checkpoint()
        return erasure
    }

    private func erase(appID: String, userID: String, audit: AuditRecord) async throws -> UserErasure {
        try await self.database.write { db in
            // Deleted content is overwritten with zeros, freed pages included, for this transaction.
            try db.execute("PRAGMA secure_delete = ON")
            defer { try? db.execute("PRAGMA secure_delete = FAST") }
            var erasure = UserErasure()
            let devices = try db.query("SELECT id, token FROM devices WHERE app_id = ? AND user_id = ?", [.text(appID), .text(userID)])
            let ids = Self.jsonArray(devices.compactMap { $0[0].int })
            if !devices.isEmpty {
                // The plaintext of notifications no one else was to receive (their whole audience was this user's).
                try db.query(
                    """
                    UPDATE notifications SET payload = X'', template = NULL WHERE length(payload) > 0 AND id IN (
                        SELECT m.id FROM (
                            SELECT x.notification_id AS id, count(*) AS mine FROM notifications n JOIN deliveries x ON x.notification_id = n.id
                            WHERE n.app_id = ?1 AND x.device_id IN (SELECT value FROM json_each(?2)) GROUP BY x.notification_id
                        ) m JOIN notifications n ON n.id = m.id
                        WHERE n.expand_after IS NULL AND n.audience_size <= m.mine
                        AND NOT EXISTS (
                            SELECT 1 FROM deliveries y WHERE y.notification_id = m.id AND y.device_id NOT IN (SELECT value FROM json_each(?2))))
                    """,
                    [.text(appID), .text(ids)]
                )
                erasure.notifications = db.changes
                try db.query(
                    """
                    UPDATE deliveries SET token = '',
                        reason = CASE WHEN state = 'pending' THEN '\(GovernancePolicy.erasedReason)' ELSE reason END,
                        state = CASE WHEN state = 'pending' THEN 'failed' ELSE state END
                    WHERE id IN (
                        SELECT x.id FROM notifications n JOIN deliveries x ON x.notification_id = n.id
                        WHERE n.app_id = ?1 AND x.device_id IN (SELECT value FROM json_each(?2)))
                    """,
                    [.text(appID), .text(ids)]
                )
                erasure.deliveries = db.changes
                for token in devices.compactMap({ $0[1].string }) {
                    try db.query(
                        """
                        UPDATE webhook_messages SET body = CAST(replace(CAST(body AS TEXT), ?2, '') AS BLOB)
                        WHERE webhook_id IN (SELECT id FROM webhooks WHERE app_id = ?1) AND instr(body, ?3) > 0
                        """,
                        [.text(appID), .text(token), .blob(Array(token.utf8))]
                    )
                    erasure.webhookMessages += db.changes
                }
                try db.query(
                    "DELETE FROM invalidations WHERE app_id = ?1 AND device_id IN (SELECT value FROM json_each(?2))", [.text(appID), .text(ids)]
                )
                try db.query("DELETE FROM devices WHERE app_id = ? AND user_id = ?", [.text(appID), .text(userID)])
                erasure.devices = db.changes
            }
            // The user's frequency-cap history (the times of their recent alerts).
            try db.query("DELETE FROM frequency_counts WHERE app_id = ? AND subject = ?", [.text(appID), .text("u:" + userID)])
            // The Live Activities started for users among whom they are: the user leaves their
            // audience, and one started for no one else is deleted.
            try db.query(
                """
                UPDATE live_activities
                SET audience = json_set(audience, '$.users', json((SELECT json_group_array(value) FROM json_each(audience, '$.users') WHERE value != ?2)))
                WHERE app_id = ?1 AND EXISTS (SELECT 1 FROM json_each(audience, '$.users') WHERE value = ?2)
                """, [.text(appID), .text(userID)])
            try db.query(
                "DELETE FROM live_activities WHERE app_id = ? AND json_type(audience, '$.users') = 'array' AND json_array_length(audience, '$.users') = 0",
                [.text(appID)])
            try Self.insertAudit(db, audit)
            return erasure
        }
    }

    package func addAudit(_ record: AuditRecord) async throws {
        try await self.database.write { db in try Self.insertAudit(db, record) }
    }

    package func auditRecords(appID: String?, limit: Int) async throws -> [AuditRecord] {
        try await self.database.read { db in
            try db.query(
                "SELECT id, at, key_id, action, app_id, subject FROM audit WHERE ?1 IS NULL OR app_id = ?1 ORDER BY id DESC LIMIT ?2",
                [appID.map(SQLValue.text) ?? .null, .integer(Int64(limit))]
            ).map { row in
                AuditRecord(
                    id: row[0].int ?? 0, at: row[1].int ?? 0, keyID: row[2].string, action: row[3].string ?? "", appID: row[4].string,
                    subject: row[5].string)
            }
        }
    }

    private static func insertAudit(_ db: borrowing SQLiteDatabase.Connection, _ record: AuditRecord) throws {
        try db.query(
            "INSERT INTO audit (at, key_id, action, app_id, subject) VALUES (?, ?, ?, ?, ?)",
            [
                .integer(record.at), record.keyID.map(SQLValue.text) ?? .null, .text(record.action), record.appID.map(SQLValue.text) ?? .null,
                record.subject.map(SQLValue.text) ?? .null,
            ]
        )
    }

    private static func jsonArray(_ ids: [Int64]) -> String { "[" + ids.map(String.init).joined(separator: ",") + "]" }
}

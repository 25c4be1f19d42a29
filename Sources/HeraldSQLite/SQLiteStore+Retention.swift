// SPDX-License-Identifier: Apache-2.0
import APNSModels

extension SQLiteStore {
    package func forgetPlaintext(notificationIDs: [String]) async throws {
        guard !notificationIDs.isEmpty else { return }
        try await self.database.write { db in try Self.forgetPlaintext(db, notificationIDs: notificationIDs) }
    }

    /// Empties the plaintext of those encrypted notifications with nothing left to send: fully
    /// expanded, no delivery pending, no chunk in flight.
    static func forgetPlaintext(_ db: borrowing SQLiteDatabase.Connection, notificationIDs: [String]) throws {
        try db.query(
            """
            UPDATE notifications SET payload = X'', template = NULL WHERE id IN (SELECT value FROM json_each(?1)) AND placeholder IS NOT NULL
                AND expand_after IS NULL AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id AND x.state = 'pending')
                AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
            """,
            [.text(JSONValue.array(notificationIDs.map(JSONValue.string)).jsonString)]
        )
    }

    package func prune(before: Int64, limit: Int) async throws -> Int {
        try await self.database.write { db in
            try db.query(
                """
                DELETE FROM deliveries WHERE id IN (
                    SELECT id FROM deliveries WHERE state != 'pending' AND updated_at < ?1
                        AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = deliveries.notification_id)
                    ORDER BY id LIMIT ?2)
                """,
                [.integer(before), .integer(Int64(limit))]
            )
            let deleted = db.changes
            try db.query(
                """
                DELETE FROM notifications WHERE created_at < ?1 AND expand_after IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id)
                    AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
                """,
                [.integer(before)]
            )
            return deleted
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import PostgresNIO

extension PostgresStore {
    package func forgetPlaintext(notificationIDs: [String]) async throws {
        guard !notificationIDs.isEmpty else { return }
        try await self.write { db in try await Self.forgetPlaintext(db, notificationIDs: notificationIDs) }
    }

    /// Empties the plaintext of those encrypted notifications with nothing left to send: fully
    /// expanded, no delivery pending, no chunk in flight.
    static func forgetPlaintext(_ db: Connection, notificationIDs: [String]) async throws {
        try await db.query(
            """
            UPDATE notifications SET payload = ''::bytea, template = NULL WHERE id = ANY($1) AND placeholder IS NOT NULL AND expand_after IS NULL
                AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id AND x.state = 'pending')
                AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
            """,
            [.texts(notificationIDs)]
        )
    }

    package func prune(before: Int64, limit: Int) async throws -> Int {
        try await self.write { db in
            let deleted = try await db.query(
                """
                DELETE FROM deliveries WHERE id IN (
                    SELECT id FROM deliveries WHERE state != 'pending' AND updated_at < $1
                        AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = deliveries.notification_id)
                    ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
                RETURNING id
                """,
                [.int(before), .int(Int64(limit))]
            ).count
            try await db.query(
                """
                DELETE FROM notifications WHERE created_at < $1 AND expand_after IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id)
                    AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
                """,
                [.int(before)]
            )
            return deleted
        }
    }
}

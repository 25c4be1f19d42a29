// SPDX-License-Identifier: Apache-2.0
package import HeraldCore

extension SQLiteStore {
    package func createWebhook(_ webhook: Webhook) async throws {
        try await self.database.write { db in
            try db.query(
                "INSERT INTO webhooks (\(Webhook.columns)) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .text(webhook.id), .text(webhook.appID), .text(webhook.url), .blob(webhook.sealedSecret), .text(webhook.typeList),
                    .integer(webhook.createdAt),
                ]
            )
        }
    }

    package func webhooks(appID: String) async throws -> [Webhook] {
        try await self.database.read { db in
            var hooks: [Webhook] = []
            try db.each("SELECT \(Webhook.columns) FROM webhooks WHERE app_id = ? ORDER BY created_at, id", [.text(appID)]) {
                hooks.append(Webhook(row: $0))
            }
            return hooks
        }
    }

    package func allWebhooks() async throws -> [Webhook] {
        try await self.database.read { db in
            var hooks: [Webhook] = []
            try db.each("SELECT \(Webhook.columns) FROM webhooks ORDER BY app_id, created_at, id", []) { hooks.append(Webhook(row: $0)) }
            return hooks
        }
    }

    package func deleteWebhook(appID: String, id: String) async throws -> Bool {
        try await self.database.write { db in
            // Its messages go with it (ON DELETE CASCADE).
            try db.query("DELETE FROM webhooks WHERE app_id = ? AND id = ?", [.text(appID), .text(id)])
            return db.changes > 0
        }
    }

    package func enqueueWebhookMessages(_ messages: [WebhookMessage], now: Int64, expiresAt: Int64) async throws {
        guard !messages.isEmpty else { return }
        try await self.database.write { db in
            for message in messages {
                try db.query(
                    // A webhook deleted meanwhile (by another process) gets nothing; the others theirs.
                    """
                    INSERT INTO webhook_messages (webhook_id, body, events, created_at, expires_at, next_attempt_at)
                    SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?1)
                    """,
                    [
                        .text(message.webhookID), .blob(message.body), .integer(Int64(message.events)), .integer(now), .integer(expiresAt),
                        .integer(now),
                    ]
                )
            }
        }
    }

    package func claimWebhookMessages(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedWebhookMessage] {
        try await self.database.write { db in
            var leased: [(id: Int64, webhookID: String, body: [UInt8], attempt: Int, expiresAt: Int64)] = []
            try db.each(
                """
                UPDATE webhook_messages SET next_attempt_at = ?1, attempts = attempts + 1
                WHERE id IN (SELECT id FROM webhook_messages WHERE next_attempt_at <= ?2 ORDER BY next_attempt_at, id LIMIT ?3)
                RETURNING id, webhook_id, body, attempts, expires_at
                """,
                [.integer(now + leaseMilliseconds), .integer(now), .integer(Int64(limit))]
            ) { row in
                leased.append((row.int(0) ?? 0, row.string(1) ?? "", row.bytes(2) ?? [], Int(row.int(3) ?? 0), row.int(4) ?? 0))
            }
            var hooks: [String: Webhook] = [:]
            for id in Set(leased.map(\.webhookID)) {
                try db.each("SELECT \(Webhook.columns) FROM webhooks WHERE id = ?", [.text(id)]) { hooks[id] = Webhook(row: $0) }
            }
            return leased.sorted { $0.id < $1.id }.compactMap { message in
                hooks[message.webhookID].map {
                    ClaimedWebhookMessage(id: message.id, webhook: $0, body: message.body, attempt: message.attempt, expiresAt: message.expiresAt)
                }
            }
        }
    }

    package func recordWebhookAttempts(_ attempts: [WebhookAttempt], now: Int64) async throws {
        guard !attempts.isEmpty else { return }
        try await self.database.write { db in
            for attempt in attempts {
                try db.query(
                    """
                    UPDATE webhook_messages SET next_attempt_at = ?1, delivered_at = ?2, last_status = ?3, last_error = ?4
                    WHERE id = ?5 AND attempts = ?6 AND delivered_at IS NULL
                    """,
                    [
                        attempt.delivered ? .null : attempt.retryAt.map(SQLValue.integer) ?? .null, attempt.delivered ? .integer(now) : .null,
                        attempt.status.map { .integer(Int64($0)) } ?? .null, attempt.error.map(SQLValue.text) ?? .null,
                        .integer(attempt.messageID), .integer(Int64(attempt.attempt)),
                    ]
                )
            }
        }
    }

    package func webhookMessages(webhookID: String, limit: Int) async throws -> [WebhookMessageRecord] {
        try await self.webhookMessages(webhookID: webhookID, limit: limit, beforeID: nil)
    }

    package func webhookMessages(webhookID: String, limit: Int, beforeID: Int64?) async throws -> [WebhookMessageRecord] {
        try await self.database.read { db in
            var records: [WebhookMessageRecord] = []
            try db.each(
                "SELECT \(WebhookMessageRecord.columns) FROM webhook_messages WHERE webhook_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
                [.text(webhookID), .integer(beforeID ?? Int64.max), .integer(Int64(limit))]
            ) { records.append(WebhookMessageRecord(row: $0)) }
            return records
        }
    }

    package func pruneWebhookMessages(before: Int64) async throws -> Int {
        try await self.database.write { db in
            try db.query("DELETE FROM webhook_messages WHERE next_attempt_at IS NULL AND created_at < ?", [.integer(before)])
            return db.changes
        }
    }
}

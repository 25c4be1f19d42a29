// SPDX-License-Identifier: Apache-2.0
package import HeraldCore

extension PostgresStore {
    package func createWebhook(_ webhook: Webhook) async throws {
        try await self.write { db in
            try await db.query(
                "INSERT INTO webhooks (\(Webhook.columns)) VALUES ($1, $2, $3, $4, $5, $6)",
                [
                    .text(webhook.id), .text(webhook.appID), .text(webhook.url), .bytes(webhook.sealedSecret), .text(webhook.typeList),
                    .int(webhook.createdAt),
                ]
            )
        }
    }

    package func webhooks(appID: String) async throws -> [Webhook] {
        try await self.read { db in
            try await db.query("SELECT \(Webhook.columns) FROM webhooks WHERE app_id = $1 ORDER BY created_at, id COLLATE \"C\"", [.text(appID)])
                .map { Webhook(row: $0) }
        }
    }

    package func allWebhooks() async throws -> [Webhook] {
        try await self.read { db in
            try await db.query("SELECT \(Webhook.columns) FROM webhooks ORDER BY app_id COLLATE \"C\", created_at, id COLLATE \"C\"").map {
                Webhook(row: $0)
            }
        }
    }

    package func deleteWebhook(appID: String, id: String) async throws -> Bool {
        try await self.write { db in
            try await db.query("DELETE FROM webhooks WHERE app_id = $1 AND id = $2 RETURNING id", [.text(appID), .text(id)]).isEmpty == false
        }
    }

    package func enqueueWebhookMessages(_ messages: [WebhookMessage], now: Int64, expiresAt: Int64) async throws {
        guard !messages.isEmpty else { return }
        try await self.write { db in
            for message in messages {
                try await db.query(
                    // A webhook deleted meanwhile (by another process) gets nothing; the others theirs.
                    """
                    INSERT INTO webhook_messages (webhook_id, body, events, created_at, expires_at, next_attempt_at)
                    SELECT $1, $2, $3, $4, $5, $4 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = $1)
                    """,
                    [.text(message.webhookID), .bytes(message.body), .int(Int64(message.events)), .int(now), .int(expiresAt)]
                )
            }
        }
    }

    package func claimWebhookMessages(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedWebhookMessage] {
        try await self.write { db in
            // Each process claims different messages (SKIP LOCKED); the lease makes a dead one's due again.
            let rows = try await db.query(
                """
                UPDATE webhook_messages m SET next_attempt_at = $1, attempts = m.attempts + 1
                FROM (SELECT id FROM webhook_messages WHERE next_attempt_at <= $2 ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) due,
                    webhooks w
                WHERE m.id = due.id AND w.id = m.webhook_id
                RETURNING m.id, m.body, m.attempts, m.expires_at, w.id, w.app_id, w.url, w.secret, w.types, w.created_at
                """,
                [.int(now + leaseMilliseconds), .int(now), .int(Int64(limit))]
            )
            return rows.map { row in
                ClaimedWebhookMessage(
                    id: row.int(0) ?? 0, webhook: Webhook(row: row, from: 4), body: row.bytes(1) ?? [], attempt: Int(row.int(2) ?? 0),
                    expiresAt: row.int(3) ?? 0
                )
            }.sorted { $0.id < $1.id }
        }
    }

    package func recordWebhookAttempts(_ attempts: [WebhookAttempt], now: Int64) async throws {
        guard !attempts.isEmpty else { return }
        try await self.write { db in
            for attempt in attempts {
                try await db.query(
                    """
                    UPDATE webhook_messages SET next_attempt_at = $1, delivered_at = $2, last_status = $3, last_error = $4
                    WHERE id = $5 AND attempts = $6 AND delivered_at IS NULL
                    """,
                    [
                        .int(attempt.delivered ? nil : attempt.retryAt), .int(attempt.delivered ? now : nil), .int(attempt.status.map(Int64.init)),
                        .text(attempt.error), .int(attempt.messageID), .int(Int64(attempt.attempt)),
                    ]
                )
            }
        }
    }

    package func webhookMessages(webhookID: String, limit: Int) async throws -> [WebhookMessageRecord] {
        try await self.webhookMessages(webhookID: webhookID, limit: limit, beforeID: nil)
    }

    package func webhookMessages(webhookID: String, limit: Int, beforeID: Int64?) async throws -> [WebhookMessageRecord] {
        try await self.read { db in
            try await db.query(
                "SELECT \(WebhookMessageRecord.columns) FROM webhook_messages WHERE webhook_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
                [.text(webhookID), .int(beforeID ?? Int64.max), .int(Int64(limit))]
            ).map { WebhookMessageRecord(row: $0) }
        }
    }

    package func pruneWebhookMessages(before: Int64) async throws -> Int {
        try await self.write { db in
            try await db.query("DELETE FROM webhook_messages WHERE next_attempt_at IS NULL AND created_at < $1 RETURNING id", [.int(before)]).count
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
package import APNSModels
package import HeraldCore

extension PostgresStore {
    package func createChannel(_ channel: StoredChannel) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                """
                INSERT INTO channels (\(StoredChannel.columns)) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT DO NOTHING RETURNING channel_id
                """,
                [
                    .text(channel.appID), .text(channel.environment.rawValue), .text(channel.channelID),
                    .int(Int64(channel.messageStoragePolicy)), .int(channel.createdAt),
                ]
            ).isEmpty == false
        }
    }

    package func channels(appID: String, environment: APNSEnvironment) async throws -> [StoredChannel] {
        try await self.read { db in
            try await db.query(
                """
                SELECT \(StoredChannel.columns) FROM channels WHERE app_id = $1 AND environment = $2
                ORDER BY created_at, channel_id COLLATE "C"
                """,
                [.text(appID), .text(environment.rawValue)]
            ).map { StoredChannel(row: $0) }
        }
    }

    package func channel(appID: String, environment: APNSEnvironment, channelID: String) async throws -> StoredChannel? {
        try await self.read { db in
            try await db.query(
                "SELECT \(StoredChannel.columns) FROM channels WHERE app_id = $1 AND environment = $2 AND channel_id = $3",
                [.text(appID), .text(environment.rawValue), .text(channelID)]
            ).first.map { StoredChannel(row: $0) }
        }
    }

    package func deleteChannel(appID: String, environment: APNSEnvironment, channelID: String) async throws -> Bool {
        try await self.write { db in
            try await db.query(
                "DELETE FROM channels WHERE app_id = $1 AND environment = $2 AND channel_id = $3 RETURNING channel_id",
                [.text(appID), .text(environment.rawValue), .text(channelID)]
            ).isEmpty == false
        }
    }

    package func recordBroadcast(_ broadcast: BroadcastRecord) async throws {
        try await self.write { db in
            _ = try await db.query(
                """
                INSERT INTO notifications (id, app_id, bundle_id, priority, expiration, payload, created_at, scheduled_at, targeting,
                    audience_size, expand_until, push_type)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, 0, 'liveactivity')
                """,
                [
                    .text(broadcast.id), .text(broadcast.appID), .text(broadcast.bundleID), .int(broadcast.spec.priority.map { Int64($0.rawValue) }),
                    .int(broadcast.spec.expiration), .bytes(broadcast.spec.payload), .int(broadcast.now), .int(broadcast.now),
                    .text(broadcast.targetingText),
                ]
            )
            _ = try await db.query(
                """
                INSERT INTO deliveries (notification_id, device_id, token, environment, push_type, topic, state, attempts, next_attempt_at,
                    apns_id, status, latency_ms, updated_at)
                VALUES ($1, 0, $2, $3, 'liveactivity', $4, 'sent', 1, $5, $6, 200, $7, $8)
                """,
                [
                    .text(broadcast.id), .text(broadcast.channelID), .text(broadcast.environment.rawValue), .text(broadcast.bundleID),
                    .int(broadcast.now), .text(broadcast.requestID), .int(broadcast.latencyMilliseconds), .int(broadcast.now),
                ]
            )
        }
    }
}

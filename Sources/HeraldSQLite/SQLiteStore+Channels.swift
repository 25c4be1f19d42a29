// SPDX-License-Identifier: Apache-2.0
package import APNSModels
package import HeraldCore

extension SQLiteStore {
    package func createChannel(_ channel: StoredChannel) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                "INSERT OR IGNORE INTO channels (\(StoredChannel.columns)) VALUES (?, ?, ?, ?, ?)",
                [
                    .text(channel.appID), .text(channel.environment.rawValue), .text(channel.channelID),
                    .integer(Int64(channel.messageStoragePolicy)), .integer(channel.createdAt),
                ]
            )
            return db.changes > 0
        }
    }

    package func channels(appID: String, environment: APNSEnvironment) async throws -> [StoredChannel] {
        try await self.database.read { db in
            var channels: [StoredChannel] = []
            try db.each(
                "SELECT \(StoredChannel.columns) FROM channels WHERE app_id = ? AND environment = ? ORDER BY created_at, channel_id",
                [.text(appID), .text(environment.rawValue)]
            ) { channels.append(StoredChannel(row: $0)) }
            return channels
        }
    }

    package func channel(appID: String, environment: APNSEnvironment, channelID: String) async throws -> StoredChannel? {
        try await self.database.read { db in
            var found: StoredChannel?
            try db.each(
                "SELECT \(StoredChannel.columns) FROM channels WHERE app_id = ? AND environment = ? AND channel_id = ?",
                [.text(appID), .text(environment.rawValue), .text(channelID)]
            ) { found = StoredChannel(row: $0) }
            return found
        }
    }

    package func deleteChannel(appID: String, environment: APNSEnvironment, channelID: String) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                "DELETE FROM channels WHERE app_id = ? AND environment = ? AND channel_id = ?",
                [.text(appID), .text(environment.rawValue), .text(channelID)]
            )
            return db.changes > 0
        }
    }

    package func recordBroadcast(_ broadcast: BroadcastRecord) async throws {
        try await self.database.write { db in
            try db.query(
                """
                INSERT INTO notifications (id, app_id, bundle_id, priority, expiration, payload, created_at, scheduled_at, targeting,
                    audience_size, expand_until, push_type)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, 'liveactivity')
                """,
                [
                    .text(broadcast.id), .text(broadcast.appID), .text(broadcast.bundleID),
                    broadcast.spec.priority.map { .integer(Int64($0.rawValue)) } ?? .null, broadcast.spec.expiration.map(SQLValue.integer) ?? .null,
                    .blob(broadcast.spec.payload), .integer(broadcast.now), .integer(broadcast.now), .text(broadcast.targetingText),
                ]
            )
            try db.query(
                """
                INSERT INTO deliveries (notification_id, device_id, token, environment, push_type, topic, state, attempts, next_attempt_at,
                    apns_id, status, latency_ms, updated_at)
                VALUES (?, 0, ?, ?, 'liveactivity', ?, 'sent', 1, ?, ?, 200, ?, ?)
                """,
                [
                    .text(broadcast.id), .text(broadcast.channelID), .text(broadcast.environment.rawValue), .text(broadcast.bundleID),
                    .integer(broadcast.now), broadcast.requestID.map(SQLValue.text) ?? .null, .integer(broadcast.latencyMilliseconds),
                    .integer(broadcast.now),
                ]
            )
        }
    }
}

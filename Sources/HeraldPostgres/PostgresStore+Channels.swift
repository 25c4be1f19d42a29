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
}

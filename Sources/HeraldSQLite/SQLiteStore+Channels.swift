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
}

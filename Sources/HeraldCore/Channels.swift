// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// A Live Activity broadcast channel Herald created with Apple for one app and environment:
/// Apple's id and its message storage policy (0 none, 1 the most recent), fixed at creation.
package struct StoredChannel: Sendable, Hashable {
    package var appID: String
    package var environment: APNSEnvironment
    /// Apple's base64 channel id.
    package var channelID: String
    package var messageStoragePolicy: Int
    package var createdAt: Int64

    /// Apple's limit per app and environment (`CannotCreateChannelConfig` beyond it).
    package static let maximumPerApp = 10_000

    package init(appID: String, environment: APNSEnvironment, channelID: String, messageStoragePolicy: Int, createdAt: Int64) {
        self.appID = appID
        self.environment = environment
        self.channelID = channelID
        self.messageStoragePolicy = messageStoragePolicy
        self.createdAt = createdAt
    }

    package static let columns = "app_id, environment, channel_id, storage_policy, created_at"

    package init(row: some StoredRow) {
        self.init(
            appID: row.string(0) ?? "", environment: APNSEnvironment(rawValue: row.string(1) ?? "") ?? .development,
            channelID: row.string(2) ?? "", messageStoragePolicy: Int(row.int(3) ?? 0), createdAt: row.int(4) ?? 0
        )
    }
}

/// Where an app's broadcast channels are kept, per environment.
package protocol ChannelStore: Sendable {
    /// Keeps a channel Apple created; false when the app already has this id in this environment.
    func createChannel(_ channel: StoredChannel) async throws -> Bool
    /// The app's channels in one environment, oldest first.
    func channels(appID: String, environment: APNSEnvironment) async throws -> [StoredChannel]
    func channel(appID: String, environment: APNSEnvironment, channelID: String) async throws -> StoredChannel?
    /// Forgets a channel; false when there was none.
    func deleteChannel(appID: String, environment: APNSEnvironment, channelID: String) async throws -> Bool
}

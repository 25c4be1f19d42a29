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

    /// How long APNs keeps a broadcast when the sender names no expiration: on a channel that
    /// stores the most recent message, 8 hours (as long as an activity lives); a channel that
    /// stores none takes 0 only.
    package static let storedMessageLifetime: Int64 = 8 * 3600

    /// The `apns-expiration` of a broadcast on this channel (UNIX seconds): the one asked, or on a
    /// channel that keeps the most recent message ``storedMessageLifetime`` from `nowSeconds` (0
    /// would keep nothing); 0 on a channel that keeps none, where any other is refused
    /// (`bad_expiration`), as APNs refuses it.
    package func broadcastExpiration(_ asked: Int64?, nowSeconds: Int64) throws(HeraldError) -> Int64 {
        guard self.messageStoragePolicy == 1 else {
            guard asked == nil || asked == 0 else {
                throw HeraldError.invalid("this channel keeps no message: a broadcast on it takes expiration 0", code: "bad_expiration")
            }
            return 0
        }
        return asked ?? nowSeconds + Self.storedMessageLifetime
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
    /// Records a broadcast APNs accepted: one notification (audience the channel, audience size
    /// 1, nothing to expand) with one delivery, already `sent`, whose token is the channel's id.
    func recordBroadcast(_ broadcast: BroadcastRecord) async throws
}

/// One broadcast as sent: the notification it is recorded as and APNs's answer.
package struct BroadcastRecord: Sendable, Hashable {
    package var appID: String
    package var id: String
    package var bundleID: String
    package var spec: NotificationSpec
    package var environment: APNSEnvironment
    package var channelID: String
    /// `apns-request-id` of the accepted broadcast.
    package var requestID: String?
    package var latencyMilliseconds: Int64
    package var now: Int64

    package init(
        appID: String, id: String, bundleID: String, spec: NotificationSpec, environment: APNSEnvironment, channelID: String, requestID: String?,
        latencyMilliseconds: Int64, now: Int64
    ) {
        self.appID = appID
        self.id = id
        self.bundleID = bundleID
        self.spec = spec
        self.environment = environment
        self.channelID = channelID
        self.requestID = requestID
        self.latencyMilliseconds = latencyMilliseconds
        self.now = now
    }

    /// The stored targeting: the channel, in its environment, as Live Activity pushes.
    package var targetingText: String {
        Targeting(audience: .channel(self.channelID), environment: self.environment, pushType: .liveactivity).jsonString(listsAsCounts: false)
    }
}

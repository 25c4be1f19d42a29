// SPDX-License-Identifier: Apache-2.0

/// `POST /v1/apps/{app}/channels`: a Live Activity broadcast channel, created at Apple for one
/// environment. `messageStoragePolicy`: 0 (no message stored, the default) or 1 (the most recent
/// message is kept for subscribers that are offline); fixed once created.
public struct CreateChannelRequest: Sendable, Hashable, Codable {
    /// `sandbox` (or `development`) or `production`.
    public var environment: String?
    public var messageStoragePolicy: Int?

    public init(environment: String, messageStoragePolicy: Int? = nil) {
        self.environment = environment
        self.messageStoragePolicy = messageStoragePolicy
    }
}

/// A channel Herald created: Apple's id (standard base64; in a path, its base64url form or
/// percent-encoded), its environment and storage policy.
public struct ChannelResponse: Sendable, Hashable, Codable {
    public var id: String
    public var environment: String
    public var messageStoragePolicy: Int
    public var createdAt: Int64

    public init(id: String, environment: String, messageStoragePolicy: Int, createdAt: Int64) {
        self.id = id
        self.environment = environment
        self.messageStoragePolicy = messageStoragePolicy
        self.createdAt = createdAt
    }
}

public struct ChannelList: Sendable, Hashable, Codable {
    public var channels: [ChannelResponse]

    public init(channels: [ChannelResponse]) { self.channels = channels }
}

// SPDX-License-Identifier: Apache-2.0
public import APNSModels
public import Crypto

/// A notification as a virtual device received it.
public struct ReceivedNotification: Sendable, Hashable {
    /// The emulator's id for this delivery (the `apns-unique-id` it answered with).
    public var uniqueID: String
    public var apnsID: String
    /// When APNs accepted it, and when it reached the device (later if it was stored).
    public var acceptedAtMilliseconds: Int64
    public var deliveredAtMilliseconds: Int64
    public var pushType: String
    public var topic: String
    public var priority: Int
    public var collapseID: String?
    /// `apns-expiration` as sent (UNIX seconds), `nil` when absent.
    public var expiration: Int64?
    /// The body exactly as it arrived.
    public var payload: [UInt8]
    /// Set when it came through a broadcast channel.
    public var channelID: String?
    /// Whether it waited in storage while the device was offline.
    public var wasStored: Bool
}

/// What the emulator knows of a virtual device.
public struct DeviceSnapshot: Sendable, Hashable {
    public var token: String
    public var bundleID: String
    public var environment: APNSEnvironment
    public var kind: TokenKind
    public var topic: String
    public var online: Bool
    public var notificationsEnabled: Bool
    public var uninstalledAtMilliseconds: Int64?
    public var tokenExpiredAtMilliseconds: Int64?
    public var hasStoredNotification: Bool
    public var receivedCount: Int
    public var channels: [String]
    public var createdAtMilliseconds: Int64
}

/// A provider-token signing key the emulator trusts, as registered in a developer account.
public struct RegisteredKey: Sendable {
    public var teamID: String
    public var keyID: String
    public var publicKey: P256.Signing.PublicKey
    /// Environments the key may be used in (Apple's newer team keys are restricted to one).
    public var environments: Set<APNSEnvironment>
    /// Bundle ids a topic-specific key is limited to; `nil` for a team-scoped key.
    public var topics: [String]?
    /// The one related topic-specific key it may share a connection with.
    public var relatedKeyID: String?

    public init(
        teamID: String,
        keyID: String,
        publicKey: P256.Signing.PublicKey,
        environments: Set<APNSEnvironment> = [.development, .production],
        topics: [String]? = nil,
        relatedKeyID: String? = nil
    ) {
        self.teamID = teamID
        self.keyID = keyID
        self.publicKey = publicKey
        self.environments = environments
        self.topics = topics
        self.relatedKeyID = relatedKeyID
    }

    /// Whether the key may push to `topic` (by its bundle id, any push-type suffix allowed).
    func allows(topic: Substring) -> Bool {
        guard let topics = self.topics else { return true }
        return topics.contains { topic == $0 || topic.hasPrefix($0 + ".") }
    }
}

/// A broadcast channel created through the channel-management API.
public struct BroadcastChannel: Sendable, Hashable {
    public var id: String
    public var bundleID: String
    public var environment: APNSEnvironment
    /// 0: no message stored; 1: the most recent message stored for up to 8 hours.
    public var storagePolicy: Int
    public var createdAtMilliseconds: Int64
}

/// Running totals, readable through the control API.
public struct EmulatorCounters: Sendable, Hashable {
    /// Device pushes and broadcasts answered 200.
    public var accepted = 0
    /// Rejections by reason string.
    public var rejected: [String: Int] = [:]
    /// Notifications that reached a device.
    public var delivered = 0
    /// Notifications put in a device's storage slot while it was offline.
    public var stored = 0
    /// Stored notifications that expired before the device came back.
    public var expired = 0
    /// Accepted but never delivered: expiration 0 to an offline device, notifications disabled,
    /// or a stored notification overwritten by a newer one.
    public var discarded = 0
    /// Delivered notifications that replaced an earlier one with the same collapse id.
    public var collapsed = 0
    /// Accepted for a token no device holds (only with `acceptUnknownTokens`).
    public var acceptedForUnknownTokens = 0
    /// Requests answered by an injected fault.
    public var faultsInjected = 0
    /// TLS or h2c connections accepted on the APNs ports.
    public var connections = 0
    /// Streams reset with REFUSED_STREAM.
    public var refusedStreams = 0
    /// PING frames received from clients (each answered with an ACK; ACKs of the emulator's own
    /// PINGs are not counted).
    public var pingsReceived = 0

    public var rejectedTotal: Int { self.rejected.values.reduce(0, +) }
}

/// One line of the inspection log.
public struct RequestLogEntry: Sendable, Hashable {
    public var atMilliseconds: Int64
    public var connectionID: Int
    public var method: String
    public var path: String
    public var status: Int
    public var reason: String?
    public var pushType: String?
    public var topic: String?
    public var apnsID: String?
}

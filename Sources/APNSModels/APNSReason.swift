// SPDX-License-Identifier: Apache-2.0

/// What a provider should do about a failed request.
public enum FailureClass: String, Sendable, Hashable, CaseIterable {
    /// Transient: retry later with back-off (429, 5xx, idle timeouts, an expired provider token).
    case retryLater = "retry_later"
    /// The request itself is wrong: fix the cause; sending it again as is fails again.
    case fixAndDrop = "fix_and_drop"
    /// The device token is dead or belongs elsewhere: stop sending to it.
    case invalidateToken = "invalidate_token"
}

/// An APNs `reason` string. Every documented reason is a static member; anything else APNs
/// sends is kept as it came (`APNSReason(rawValue:)` never fails).
public struct APNSReason: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public var description: String { self.rawValue }

    // Device push (reference §5.3)
    public static let badCollapseId = APNSReason(rawValue: "BadCollapseId")
    public static let badDeviceToken = APNSReason(rawValue: "BadDeviceToken")
    public static let badExpirationDate = APNSReason(rawValue: "BadExpirationDate")
    public static let badMessageId = APNSReason(rawValue: "BadMessageId")
    public static let badPriority = APNSReason(rawValue: "BadPriority")
    public static let badTopic = APNSReason(rawValue: "BadTopic")
    public static let deviceTokenNotForTopic = APNSReason(rawValue: "DeviceTokenNotForTopic")
    public static let duplicateHeaders = APNSReason(rawValue: "DuplicateHeaders")
    public static let idleTimeout = APNSReason(rawValue: "IdleTimeout")
    public static let invalidPushType = APNSReason(rawValue: "InvalidPushType")
    public static let missingDeviceToken = APNSReason(rawValue: "MissingDeviceToken")
    public static let missingTopic = APNSReason(rawValue: "MissingTopic")
    public static let payloadEmpty = APNSReason(rawValue: "PayloadEmpty")
    public static let topicDisallowed = APNSReason(rawValue: "TopicDisallowed")
    public static let badCertificate = APNSReason(rawValue: "BadCertificate")
    public static let badCertificateEnvironment = APNSReason(rawValue: "BadCertificateEnvironment")
    public static let expiredProviderToken = APNSReason(rawValue: "ExpiredProviderToken")
    public static let forbidden = APNSReason(rawValue: "Forbidden")
    public static let invalidProviderToken = APNSReason(rawValue: "InvalidProviderToken")
    public static let missingProviderToken = APNSReason(rawValue: "MissingProviderToken")
    public static let unrelatedKeyIdInToken = APNSReason(rawValue: "UnrelatedKeyIdInToken")
    public static let badEnvironmentKeyIdInToken = APNSReason(rawValue: "BadEnvironmentKeyIdInToken")
    /// An older spelling some clients know; treated like `badEnvironmentKeyIdInToken`.
    public static let badEnvironmentKeyInToken = APNSReason(rawValue: "BadEnvironmentKeyInToken")
    public static let badPath = APNSReason(rawValue: "BadPath")
    public static let methodNotAllowed = APNSReason(rawValue: "MethodNotAllowed")
    public static let expiredToken = APNSReason(rawValue: "ExpiredToken")
    public static let unregistered = APNSReason(rawValue: "Unregistered")
    public static let payloadTooLarge = APNSReason(rawValue: "PayloadTooLarge")
    public static let tooManyProviderTokenUpdates = APNSReason(rawValue: "TooManyProviderTokenUpdates")
    public static let tooManyRequests = APNSReason(rawValue: "TooManyRequests")
    public static let internalServerError = APNSReason(rawValue: "InternalServerError")
    public static let serviceUnavailable = APNSReason(rawValue: "ServiceUnavailable")
    /// The spelling on Apple's broadcast error page; treated like `serviceUnavailable`.
    public static let serviceUnavailableSpaced = APNSReason(rawValue: "Service Unavailable")
    public static let shutdown = APNSReason(rawValue: "Shutdown")

    // Broadcast and channel management (reference §5.4)
    public static let featureNotEnabled = APNSReason(rawValue: "FeatureNotEnabled")
    public static let missingChannelId = APNSReason(rawValue: "MissingChannelId")
    public static let badChannelId = APNSReason(rawValue: "BadChannelId")
    public static let channelNotRegistered = APNSReason(rawValue: "ChannelNotRegistered")
    public static let badRequestParams = APNSReason(rawValue: "BadRequestParams")
    public static let badRequestPayload = APNSReason(rawValue: "BadRequestPayload")
    public static let missingPushType = APNSReason(rawValue: "MissingPushType")
    public static let cannotCreateChannelConfig = APNSReason(rawValue: "CannotCreateChannelConfig")
    public static let topicMismatch = APNSReason(rawValue: "TopicMismatch")

    /// The reasons of device pushes with the status APNs sends them with.
    public static let devicePushReasons: [(reason: APNSReason, status: Int)] = [
        (.badCollapseId, 400), (.badDeviceToken, 400), (.badExpirationDate, 400), (.badMessageId, 400),
        (.badPriority, 400), (.badTopic, 400), (.deviceTokenNotForTopic, 400), (.duplicateHeaders, 400),
        (.idleTimeout, 400), (.invalidPushType, 400), (.missingDeviceToken, 400), (.missingTopic, 400),
        (.payloadEmpty, 400), (.topicDisallowed, 400), (.badCertificate, 403), (.badCertificateEnvironment, 403),
        (.expiredProviderToken, 403), (.forbidden, 403), (.invalidProviderToken, 403), (.missingProviderToken, 403),
        (.unrelatedKeyIdInToken, 403), (.badEnvironmentKeyIdInToken, 403), (.badPath, 404), (.methodNotAllowed, 405),
        (.expiredToken, 410), (.unregistered, 410), (.payloadTooLarge, 413), (.tooManyProviderTokenUpdates, 429),
        (.tooManyRequests, 429), (.internalServerError, 500), (.serviceUnavailable, 503), (.shutdown, 503),
    ]

    /// The reasons of the broadcast and channel-management APIs with their status.
    public static let broadcastReasons: [(reason: APNSReason, status: Int)] = [
        (.featureNotEnabled, 400), (.missingChannelId, 400), (.badChannelId, 400), (.channelNotRegistered, 400),
        (.badRequestParams, 400), (.badRequestPayload, 400), (.payloadEmpty, 400), (.badMessageId, 400),
        (.missingPushType, 400), (.invalidPushType, 400), (.cannotCreateChannelConfig, 400),
        (.badExpirationDate, 400), (.topicDisallowed, 400), (.badPriority, 400), (.badCertificate, 403),
        (.badCertificateEnvironment, 403), (.topicMismatch, 403), (.missingProviderToken, 403),
        (.expiredProviderToken, 403), (.invalidProviderToken, 403), (.badPath, 404), (.methodNotAllowed, 405),
        (.payloadTooLarge, 413), (.tooManyRequests, 429), (.tooManyProviderTokenUpdates, 429),
        (.internalServerError, 500), (.serviceUnavailableSpaced, 503), (.serviceUnavailable, 503), (.shutdown, 503),
    ]

    /// The status a known reason comes with, `nil` for an unknown one.
    public var status: Int? {
        Self.devicePushReasons.first(where: { $0.reason == self })?.status
            ?? Self.broadcastReasons.first(where: { $0.reason == self })?.status
            ?? (self == .badEnvironmentKeyInToken ? 403 : nil)
    }

    /// Whether APNs documents this reason.
    public var isKnown: Bool { self.status != nil }

    /// What to do about it. Unknown reasons are classed by `status`: 410 invalidates,
    /// 429 and 5xx retry, anything else is fixed and dropped.
    public func failureClass(status: Int) -> FailureClass {
        switch self {
        case .badDeviceToken, .deviceTokenNotForTopic, .expiredToken, .unregistered:
            return .invalidateToken
        case .idleTimeout, .expiredProviderToken, .tooManyProviderTokenUpdates, .tooManyRequests,
            .internalServerError, .serviceUnavailable, .serviceUnavailableSpaced, .shutdown, .unrelatedKeyIdInToken:
            return .retryLater
        case _ where self.isKnown:
            return .fixAndDrop
        default:
            switch status {
            case 410: return .invalidateToken
            case 429, 500...599: return .retryLater
            default: return .fixAndDrop
            }
        }
    }

    /// The class at the status APNs documents for this reason (unknown reasons: fix and drop).
    public var failureClass: FailureClass { self.failureClass(status: self.status ?? 400) }
}

/// The JSON body of an APNs error response: `{"reason": …, "timestamp": ms}`.
public struct APNSErrorResponse: Sendable, Hashable {
    public var reason: APNSReason
    /// For 410: when APNs learned the token stopped being valid, in milliseconds since 1970.
    public var timestampMilliseconds: Int64?

    public init(reason: APNSReason, timestampMilliseconds: Int64? = nil) {
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// Parses an error body; `nil` when it has no string `reason`.
    public init?(body: some Collection<UInt8>) {
        guard let value = try? JSONValue.parse(body), let reason = value["reason"]?.stringValue else { return nil }
        self.reason = APNSReason(rawValue: reason)
        self.timestampMilliseconds = value["timestamp"]?.intValue
    }

    public var body: [UInt8] {
        var members: [(String, JSONValue)] = [("reason", .string(self.reason.rawValue))]
        if let timestamp = self.timestampMilliseconds { members.append(("timestamp", .int(timestamp))) }
        return JSONValue.object(members).serialized()
    }
}

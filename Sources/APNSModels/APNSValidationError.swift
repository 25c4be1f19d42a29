// SPDX-License-Identifier: Apache-2.0

/// A request or payload that breaks an APNs rule, refused before it reaches the wire.
///
/// `code` is stable and names the rule; `message` says what was wrong in words.
public struct APNSValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case badDeviceToken = "bad_device_token"
            case badCollapseID = "bad_collapse_id"
            case badTopic = "bad_topic"
            case topicSuffixMismatch = "topic_suffix_mismatch"
            case badPriority = "bad_priority"
            case badExpiration = "bad_expiration"
            case badMessageID = "bad_message_id"
            case payloadTooLarge = "payload_too_large"
            case payloadEmpty = "payload_empty"
            case payloadNotJSON = "payload_not_json"
            case payloadRule = "payload_rule"
            case authNotAllowed = "push_type_not_allowed_for_auth"
            case badKey = "bad_key"
            case badProviderToken = "bad_provider_token"
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The device token is not an even-length, non-empty hex string.
        public static let badDeviceToken = Code(.badDeviceToken)
        /// The collapse id is empty or longer than 64 UTF-8 bytes.
        public static let badCollapseID = Code(.badCollapseID)
        /// The topic is empty or not a plausible bundle identifier.
        public static let badTopic = Code(.badTopic)
        /// The topic's suffix does not fit the push type (e.g. `voip` to a topic without `.voip`).
        public static let topicSuffixMismatch = Code(.topicSuffixMismatch)
        /// The priority is not allowed for the push type (e.g. `background` must be 5).
        public static let badPriority = Code(.badPriority)
        public static let badExpiration = Code(.badExpiration)
        public static let badMessageID = Code(.badMessageID)
        /// The encoded payload is over 4096 bytes (5120 for VoIP).
        public static let payloadTooLarge = Code(.payloadTooLarge)
        public static let payloadEmpty = Code(.payloadEmpty)
        public static let payloadNotJSON = Code(.payloadNotJSON)
        /// A payload key has a value APNs or the device would not accept.
        public static let payloadRule = Code(.payloadRule)
        /// The push type cannot be sent over this kind of connection (certificate auth).
        public static let pushTypeNotAllowedForAuth = Code(.authNotAllowed)
        /// The signing key could not be read.
        public static let badKey = Code(.badKey)
        /// A provider token could not be parsed or verified.
        public static let badProviderToken = Code(.badProviderToken)

        public var description: String { self.base.rawValue }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(self.code): \(self.message)" }
}

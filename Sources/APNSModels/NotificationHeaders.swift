// SPDX-License-Identifier: Apache-2.0

/// `apns-expiration`: until when APNs keeps trying to deliver.
public enum Expiration: Sendable, Hashable {
    /// No header: APNs stores the notification per its policy (up to 30 days).
    case storagePolicy
    /// `0`: one delivery attempt, never stored.
    case immediately
    /// An absolute UNIX time in seconds (not a TTL).
    case at(epochSeconds: Int64)

    /// The header value, or `nil` when the header is left out.
    public var headerValue: String? {
        switch self {
        case .storagePolicy: return nil
        case .immediately: return "0"
        case .at(let seconds): return String(seconds)
        }
    }

    /// `seconds` from `now` (both UNIX seconds).
    public static func after(_ seconds: Int64, from now: Int64) -> Expiration {
        .at(epochSeconds: now + seconds)
    }
}

/// The headers of one device push, checked against APNs's rules when built.
public struct NotificationHeaders: Sendable, Hashable {
    public var pushType: PushType
    public var topic: String
    public var priority: Priority?
    public var expiration: Expiration
    public var collapseID: String?
    /// Lowercase canonical UUID; when `nil` APNs generates one.
    public var apnsID: String?

    public static let maximumCollapseIDBytes = 64

    public init(
        pushType: PushType,
        topic: String,
        priority: Priority? = nil,
        expiration: Expiration = .storagePolicy,
        collapseID: String? = nil,
        apnsID: String? = nil
    ) {
        self.pushType = pushType
        self.topic = topic
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
    }

    /// Checks every header rule APNs enforces, naming the rule that fails.
    public func validate() throws(APNSValidationError) {
        try Self.validateTopic(self.topic, pushType: self.pushType)
        if let priority = self.priority, !self.pushType.allows(priority) {
            throw APNSValidationError(
                .badPriority,
                "\(self.pushType) pushes must use priority \(self.pushType.allowedPriorities.map(\.description).sorted().joined(separator: " or ")), not \(priority)"
            )
        }
        if let collapseID = self.collapseID {
            guard !collapseID.isEmpty else { throw APNSValidationError(.badCollapseID, "the collapse id is empty") }
            guard collapseID.utf8.count <= Self.maximumCollapseIDBytes else {
                throw APNSValidationError(
                    .badCollapseID,
                    "the collapse id is \(collapseID.utf8.count) bytes; APNs allows \(Self.maximumCollapseIDBytes)"
                )
            }
        }
        if case .at(let seconds) = self.expiration, seconds < 0 {
            throw APNSValidationError(.badExpiration, "the expiration is a negative UNIX time")
        }
        if let apnsID = self.apnsID, !UUIDText.isCanonical(apnsID) {
            throw APNSValidationError(.badMessageID, "apns-id must be a UUID such as 123e4567-e89b-12d3-a456-426614174000")
        }
    }

    /// The push types whose topic has a suffix, with it: worked out once, not per request
    /// (`topicSuffix` compares the push type's name with each it knows).
    static let suffixedPushTypes: [(PushType, String)] = PushType.allCases.compactMap { type in
        type.topicSuffix.flatMap { $0.isEmpty ? nil : (type, $0) }
    }

    /// A topic is a reverse-DNS bundle id plus the push type's suffix.
    public static func validateTopic(_ topic: String, pushType: PushType) throws(APNSValidationError) {
        guard !topic.isEmpty else { throw APNSValidationError(.badTopic, "the topic is empty") }
        func allowed(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
        // Checked on every request a client sends: the bytes in place when they are contiguous.
        guard topic.utf8.count <= 255,
            topic.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(allowed) }) ?? topic.utf8.allSatisfy(allowed)
        else {
            throw APNSValidationError(.badTopic, "the topic '\(topic)' is not a bundle identifier")
        }
        guard let suffix = pushType.topicSuffix else { return }  // MDM: the certificate's UID
        if suffix.isEmpty {
            // alert/background go to the bare bundle id; a known suffix means the wrong push type.
            for (other, otherSuffix) in Self.suffixedPushTypes {
                if topic.hasUTF8Suffix(otherSuffix) {
                    throw APNSValidationError(
                        .topicSuffixMismatch,
                        "\(pushType) pushes go to the bare bundle id; '\(topic)' ends in '\(otherSuffix)', the \(other) suffix"
                    )
                }
            }
        } else if pushType.bundleID(fromTopic: topic) == nil {
            throw APNSValidationError(.topicSuffixMismatch, "\(pushType) pushes need a topic ending in '\(suffix)', not '\(topic)'")
        }
    }
}

/// Canonical UUID text checks and generation without Foundation.
public enum UUIDText {
    /// 8-4-4-4-12 hex digits, either case.
    public static func isCanonical(_ text: some StringProtocol) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                    UInt8(ascii: "A")...UInt8(ascii: "F"):
                    continue
                default: return false
                }
            }
        }
        return true
    }

    /// A random (version 4) UUID in lowercase.
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> String {
        let high = generator.next()
        let low = generator.next()
        // Written straight into the string's storage: no arrays on the way.
        return String(unsafeUninitializedCapacity: 36) { out in
            var written = 0
            for index in 0..<16 {
                var byte = UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> (UInt64(index % 8) * 8))
                if index == 6 { byte = byte & 0x0F | 0x40 }  // version 4
                if index == 8 { byte = byte & 0x3F | 0x80 }  // RFC 4122 variant
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[written] = UInt8(ascii: "-")
                    written += 1
                }
                out[written] = Self.hexDigit(byte >> 4)
                out[written + 1] = Self.hexDigit(byte & 0x0F)
                written += 2
            }
            return written
        }
    }

    @inline(__always)
    static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return Self.random(using: &generator)
    }
}

extension StringProtocol where UTF8View: BidirectionalCollection {
    /// A byte-wise suffix test, last byte first: for topics and push-type suffixes, which are
    /// ASCII (Unicode's `hasSuffix` does work for nothing there) and mostly end in different bytes.
    @inlinable package func hasUTF8Suffix(_ suffix: String) -> Bool {
        let bytes = self.utf8
        guard let last = suffix.utf8.last else { return true }
        guard bytes.count >= suffix.utf8.count, bytes.last == last else { return false }
        return bytes.suffix(suffix.utf8.count).elementsEqual(suffix.utf8)
    }
}

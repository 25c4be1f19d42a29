// SPDX-License-Identifier: Apache-2.0

/// The `apns-push-type` header: what kind of notification a request carries.
public struct PushType: Sendable, Hashable, RawRepresentable, CustomStringConvertible, CaseIterable {
    public let rawValue: String

    public init?(rawValue: String) {
        guard Self.allCases.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }

    private init(_ rawValue: String) { self.rawValue = rawValue }

    public static let alert = PushType("alert")
    public static let background = PushType("background")
    public static let complication = PushType("complication")
    public static let controls = PushType("controls")
    public static let fileprovider = PushType("fileprovider")
    public static let liveactivity = PushType("liveactivity")
    public static let location = PushType("location")
    public static let mdm = PushType("mdm")
    public static let pushtotalk = PushType("pushtotalk")
    public static let voip = PushType("voip")
    public static let widgets = PushType("widgets")

    public static let allCases: [PushType] = [
        .alert, .background, .complication, .controls, .fileprovider, .liveactivity, .location, .mdm,
        .pushtotalk, .voip, .widgets,
    ]

    public var description: String { self.rawValue }

    /// What follows the bundle id in `apns-topic` for this push type; `nil` for MDM, whose topic
    /// is the certificate's UID rather than a bundle id.
    public var topicSuffix: String? {
        switch self.rawValue {
        case "complication": return ".complication"
        case "controls": return ".push-type.controls"
        case "fileprovider": return ".pushkit.fileprovider"
        case "liveactivity": return ".push-type.liveactivity"
        case "location": return ".location-query"
        case "mdm": return nil
        case "pushtotalk": return ".voip-ptt"
        case "voip": return ".voip"
        case "widgets": return ".push-type.widgets"
        default: return ""  // alert, background
        }
    }

    /// The `apns-topic` for an app's bundle id and this push type.
    public func topic(forBundleID bundleID: String) -> String {
        bundleID + (self.topicSuffix ?? "")
    }

    /// The bundle id inside a topic of this push type, or `nil` when the topic lacks the suffix.
    public func bundleID(fromTopic topic: String) -> String? {
        guard let suffix = self.topicSuffix else { return topic }
        if suffix.isEmpty { return topic }
        guard topic.hasSuffix(suffix), topic.utf8.count > suffix.utf8.count else { return nil }
        return String(topic.dropLast(suffix.count))
    }

    /// Whether APNs takes `priority` for this push type: ``allowedPriorities`` without building
    /// the set (checked on every request).
    public func allows(_ priority: Priority) -> Bool {
        self == .background ? priority == .throttled : true
    }

    /// The priorities APNs accepts for this push type. Background pushes must use 5.
    public var allowedPriorities: Set<Priority> {
        switch self.rawValue {
        case "background": return [.throttled]
        default: return [.immediate, .throttled, .powerConsiderate]
        }
    }

    /// The priority used when a request does not name one.
    public var defaultPriority: Priority {
        self == .background ? .throttled : .immediate
    }

    /// The largest payload APNs accepts for this push type, in bytes of the encoded body.
    public var maximumPayloadSize: Int {
        self == .voip ? 5120 : 4096
    }

    /// Whether a certificate-based connection may carry this push type. Location and Live Activity
    /// device pushes need token (JWT) authentication.
    public var allowsCertificateAuthentication: Bool {
        self != .location && self != .liveactivity
    }

    /// Whether token-based (JWT) connections may carry it: every push type but MDM, which Apple
    /// delivers only with the MDM vendor's push certificate.
    public var allowsTokenAuthentication: Bool {
        self != .mdm
    }
}

/// The `apns-priority` header.
public struct Priority: Sendable, Hashable, RawRepresentable, Comparable, CustomStringConvertible {
    public let rawValue: Int

    public init?(rawValue: Int) {
        guard rawValue == 10 || rawValue == 5 || rawValue == 1 else { return nil }
        self.rawValue = rawValue
    }

    private init(_ rawValue: Int) { self.rawValue = rawValue }

    /// 10: deliver now.
    public static let immediate = Priority(10)
    /// 5: deliver with the device's power in mind; may be grouped.
    public static let throttled = Priority(5)
    /// 1: prioritise the device's power over everything; never wakes it.
    public static let powerConsiderate = Priority(1)

    public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { String(self.rawValue) }
}

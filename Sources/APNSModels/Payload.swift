// SPDX-License-Identifier: Apache-2.0

/// A notification payload: the `aps` dictionary plus the app's own top-level keys.
///
/// Build it from typed fields, or from raw JSON with ``init(json:)``; either way
/// ``encode(for:)`` checks the rules of the push type and the size limit on the encoded bytes.
public struct Payload: Sendable, Hashable {
    public var aps: APS
    /// Top-level keys beside `aps`, in order. The key `aps` is not allowed here.
    public var custom: [(String, JSONValue)]
    /// Whether the payload has an `aps` dictionary at all (VoIP, push-to-talk, MDM payloads often don't).
    public var includesAPS: Bool

    public init(aps: APS = APS(), custom: [(String, JSONValue)] = [], includesAPS: Bool = true) {
        self.aps = aps
        self.custom = custom
        self.includesAPS = includesAPS
    }

    public static func == (lhs: Payload, rhs: Payload) -> Bool { lhs.json == rhs.json }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.json) }

    /// A payload from raw JSON (an object). `aps` is read into typed fields where it can be; keys it
    /// does not know stay in `aps.extra`, so nothing is lost.
    public init(json: JSONValue) throws(APNSValidationError) {
        guard case .object(let members) = json else {
            throw APNSValidationError(.payloadRule, "a payload is a JSON object")
        }
        var custom: [(String, JSONValue)] = []
        var aps: APS?
        for (key, value) in members {
            if key == "aps" {
                guard aps == nil else { throw APNSValidationError(.payloadRule, "the payload has 'aps' twice") }
                aps = try APS(json: value)
            } else {
                custom.append((key, value))
            }
        }
        self.init(aps: aps ?? APS(), custom: custom, includesAPS: aps != nil)
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = []
        if self.includesAPS { members.append(("aps", self.aps.json)) }
        members.append(contentsOf: self.custom)
        return .object(members)
    }

    /// The encoded body, after checking the push type's rules and size limit.
    public func encode(for pushType: PushType) throws(APNSValidationError) -> [UInt8] {
        try PayloadRules.check(self, pushType: pushType)
        let bytes = self.json.serialized()
        try PayloadRules.checkSize(bytes.count, pushType: pushType)
        return bytes
    }
}

/// `interruption-level`.
public enum InterruptionLevel: String, Sendable, Hashable, CaseIterable {
    case passive
    case active
    case timeSensitive = "time-sensitive"
    case critical
}

/// `event` of a Live Activity push.
public enum LiveActivityEvent: String, Sendable, Hashable, CaseIterable {
    case start
    case update
    case end
}

/// The `alert` key: a plain string (shown as the body) or a dictionary.
public enum Alert: Sendable, Hashable {
    case body(String)
    case fields(AlertFields)

    var json: JSONValue {
        switch self {
        case .body(let text): return .string(text)
        case .fields(let fields): return fields.json
        }
    }
}

/// The `alert` dictionary (Apple's Table 2), with room for keys this type does not name.
public struct AlertFields: Sendable, Hashable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var launchImage: String?
    public var titleLocKey: String?
    public var titleLocArgs: [String]?
    public var subtitleLocKey: String?
    public var subtitleLocArgs: [String]?
    public var locKey: String?
    public var locArgs: [String]?
    /// Other keys, e.g. Live Activity alerts whose `title`/`body` are loc objects, or `sound`.
    public var extra: [String: JSONValue]

    public init(
        title: String? = nil, subtitle: String? = nil, body: String? = nil, launchImage: String? = nil,
        titleLocKey: String? = nil, titleLocArgs: [String]? = nil, subtitleLocKey: String? = nil,
        subtitleLocArgs: [String]? = nil, locKey: String? = nil, locArgs: [String]? = nil,
        extra: [String: JSONValue] = [:]
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.launchImage = launchImage
        self.titleLocKey = titleLocKey
        self.titleLocArgs = titleLocArgs
        self.subtitleLocKey = subtitleLocKey
        self.subtitleLocArgs = subtitleLocArgs
        self.locKey = locKey
        self.locArgs = locArgs
        self.extra = extra
    }

    var json: JSONValue {
        var members: [(String, JSONValue)] = []
        func add(_ key: String, _ value: String?) { if let value { members.append((key, .string(value))) } }
        func add(_ key: String, _ value: [String]?) { if let value { members.append((key, .array(value.map { .string($0) }))) } }
        add("title", self.title)
        add("subtitle", self.subtitle)
        add("body", self.body)
        add("launch-image", self.launchImage)
        add("title-loc-key", self.titleLocKey)
        add("title-loc-args", self.titleLocArgs)
        add("subtitle-loc-key", self.subtitleLocKey)
        add("subtitle-loc-args", self.subtitleLocArgs)
        add("loc-key", self.locKey)
        add("loc-args", self.locArgs)
        for key in self.extra.keys.sorted() { members.append((key, self.extra[key]!)) }
        return .object(members)
    }
}

/// The `sound` key: a file name (or `"default"`) or a critical-alert dictionary.
public enum Sound: Sendable, Hashable {
    case named(String)
    case critical(name: String, volume: Double)

    public static let `default` = Sound.named("default")

    var json: JSONValue {
        switch self {
        case .named(let name): return .string(name)
        case .critical(let name, let volume):
            return .object([("critical", 1), ("name", .string(name)), ("volume", .double(volume))])
        }
    }
}

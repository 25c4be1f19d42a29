// SPDX-License-Identifier: Apache-2.0
public import Foundation

/// A JSON value, `Sendable`, for the parts of a payload HeraldKit does not type.
public enum PayloadValue: Sendable, Hashable, Codable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([PayloadValue])
    case object([String: PayloadValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([PayloadValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: PayloadValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    public subscript(key: String) -> PayloadValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var number: Double? { if case .number(let value) = self { value } else { nil } }
    public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    public var object: [String: PayloadValue]? { if case .object(let value) = self { value } else { nil } }

    /// Decodes this value as `T` (a Live Activity's `ContentState`, a custom object).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: JSONEncoder().encode(self))
    }
}

/// A received notification's payload, typed: what `aps` says, Live Activity fields, and the
/// custom keys beside `aps`. Built from the `userInfo` the system hands the app
/// (`[AnyHashable: Any]`) or from the payload's JSON.
public struct ReceivedNotification: Sendable, Hashable {
    public struct Alert: Sendable, Hashable {
        public var title: String?
        public var subtitle: String?
        public var body: String?
        public var titleLocalizationKey: String?
        public var localizationKey: String?

        public init(
            title: String? = nil, subtitle: String? = nil, body: String? = nil, titleLocalizationKey: String? = nil, localizationKey: String? = nil
        ) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
            self.titleLocalizationKey = titleLocalizationKey
            self.localizationKey = localizationKey
        }
    }

    public var alert: Alert?
    public var badge: Int?
    /// The sound's name (`sound` as a string, or a critical alert's `sound.name`).
    public var sound: String?
    public var isCriticalSound: Bool
    public var threadID: String?
    public var category: String?
    public var contentAvailable: Bool
    public var mutableContent: Bool
    public var interruptionLevel: String?
    public var relevanceScore: Double?
    public var targetContentID: String?
    /// Live Activities: `update`, `end` or `start`.
    public var event: String?
    public var timestamp: Int?
    public var contentState: PayloadValue?
    public var staleDate: Int?
    public var dismissalDate: Int?
    public var attributesType: String?
    public var attributes: PayloadValue?
    /// Every key beside `aps`.
    public var custom: [String: PayloadValue]
    /// The whole payload.
    public var payload: PayloadValue

    /// From the payload's JSON bytes.
    public init(jsonData: Data) throws {
        let payload = try JSONDecoder().decode(PayloadValue.self, from: jsonData)
        guard case .object(var members) = payload else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "a payload is a JSON object"))
        }
        let aps = members.removeValue(forKey: "aps")?.object ?? [:]
        self.payload = payload
        self.custom = members
        switch aps["alert"] {
        case .string(let body)?:
            self.alert = Alert(title: nil, subtitle: nil, body: body, titleLocalizationKey: nil, localizationKey: nil)
        case .object(let alert)?:
            self.alert = Alert(
                title: alert["title"]?.string, subtitle: alert["subtitle"]?.string, body: alert["body"]?.string,
                titleLocalizationKey: alert["title-loc-key"]?.string, localizationKey: alert["loc-key"]?.string
            )
        default:
            self.alert = nil
        }
        self.badge = aps["badge"]?.number.map { Int($0) }
        switch aps["sound"] {
        case .string(let name)?:
            (self.sound, self.isCriticalSound) = (name, false)
        case .object(let sound)?:
            (self.sound, self.isCriticalSound) = (sound["name"]?.string, sound["critical"]?.number == 1)
        default:
            (self.sound, self.isCriticalSound) = (nil, false)
        }
        self.threadID = aps["thread-id"]?.string
        self.category = aps["category"]?.string
        self.contentAvailable = aps["content-available"]?.number == 1
        self.mutableContent = aps["mutable-content"]?.number == 1
        self.interruptionLevel = aps["interruption-level"]?.string
        self.relevanceScore = aps["relevance-score"]?.number
        self.targetContentID = aps["target-content-id"]?.string
        self.event = aps["event"]?.string
        self.timestamp = aps["timestamp"]?.number.map { Int($0) }
        self.contentState = aps["content-state"]
        self.staleDate = aps["stale-date"]?.number.map { Int($0) }
        self.dismissalDate = aps["dismissal-date"]?.number.map { Int($0) }
        self.attributesType = aps["attributes-type"]?.string
        self.attributes = aps["attributes"]
    }

    /// From `userInfo` as `UNNotificationContent.userInfo` or
    /// `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)` hands it over.
    public init(userInfo: [AnyHashable: Any]) throws {
        var object: [String: Any] = [:]
        for (key, value) in userInfo {
            guard let key = key as? String else { continue }
            object[key] = value
        }
        try self.init(jsonData: try JSONSerialization.data(withJSONObject: object))
    }

    /// A Live Activity's `content-state` decoded as the app's `ContentState`.
    public func contentState<State: Decodable>(as type: State.Type) throws -> State {
        guard let state = self.contentState else {
            throw DecodingError.valueNotFound(State.self, .init(codingPath: [], debugDescription: "no content-state in aps"))
        }
        return try state.decode(State.self)
    }

    /// A custom key decoded as `T`.
    public func custom<T: Decodable>(_ key: String, as type: T.Type) throws -> T {
        guard let value = self.custom[key] else {
            throw DecodingError.keyNotFound(AnyKey(key), .init(codingPath: [], debugDescription: "no custom key \(key)"))
        }
        return try value.decode(T.self)
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { self.stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

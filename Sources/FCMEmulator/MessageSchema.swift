// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// The shape of FCM's v1 request body: which fields exist, under both spellings Google's JSON
/// layer accepts (the proto's snake_case and lowerCamelCase), and their types.
indirect enum FieldType: Sendable {
    case string, bool, int32, float
    /// `map<string, string>`.
    case stringMap
    case duration
    case timestamp
    /// A proto enum: matched case-insensitively (firebase-admin sends `"high"`), or by number.
    case enumeration(type: String, values: [String])
    case object(MessageSchema)
    /// An object whose contents the emulator does not check (`apns`, `webpush`).
    case anyObject(type: String)
    case list(FieldType)
}

struct MessageSchema: Sendable {
    let typeName: String
    /// Canonical (snake_case) names and types.
    let fields: [(name: String, type: FieldType)]
    /// Both spellings → canonical name.
    let spellings: [String: String]
    let types: [String: FieldType]

    init(_ typeName: String, _ fields: [(String, FieldType)]) {
        self.typeName = typeName
        self.fields = fields.map { (name: $0.0, type: $0.1) }
        var spellings: [String: String] = [:]
        var types: [String: FieldType] = [:]
        for (name, type) in fields {
            spellings[name] = name
            spellings[Self.camelCase(name)] = name
            types[name] = type
        }
        self.spellings = spellings
        self.types = types
    }

    static func camelCase(_ name: String) -> String {
        var result = ""
        var upper = false
        for character in name {
            if character == "_" {
                upper = true
            } else {
                result += upper ? character.uppercased() : String(character)
                upper = false
            }
        }
        return result
    }

    // MARK: FCM v1

    static let fcmPrefix = "type.googleapis.com/google.firebase.fcm.v1."

    static let notification = MessageSchema(fcmPrefix + "Notification", [("title", .string), ("body", .string), ("image", .string)])

    static let color = MessageSchema(
        "type.googleapis.com/google.type.Color", [("red", .float), ("green", .float), ("blue", .float), ("alpha", .float)]
    )

    static let lightSettings = MessageSchema(
        fcmPrefix + "LightSettings", [("color", .object(color)), ("light_on_duration", .duration), ("light_off_duration", .duration)]
    )

    static let androidNotification = MessageSchema(
        fcmPrefix + "AndroidNotification",
        [
            ("title", .string), ("body", .string), ("icon", .string), ("color", .string), ("sound", .string), ("tag", .string),
            ("click_action", .string), ("body_loc_key", .string), ("body_loc_args", .list(.string)),
            ("title_loc_key", .string), ("title_loc_args", .list(.string)), ("channel_id", .string), ("ticker", .string),
            ("sticky", .bool), ("event_time", .timestamp), ("local_only", .bool),
            (
                "notification_priority",
                .enumeration(
                    type: fcmPrefix + "AndroidNotification.NotificationPriority",
                    values: ["PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX"]
                )
            ),
            ("default_sound", .bool), ("default_vibrate_timings", .bool), ("default_light_settings", .bool),
            ("vibrate_timings", .list(.duration)),
            (
                "visibility",
                .enumeration(type: fcmPrefix + "AndroidNotification.Visibility", values: ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"])
            ),
            ("notification_count", .int32), ("light_settings", .object(lightSettings)), ("image", .string),
            ("bypass_proxy_notification", .bool),
            (
                "proxy",
                .enumeration(type: fcmPrefix + "AndroidNotification.Proxy", values: ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"])
            ),
        ]
    )

    static let androidOptions = MessageSchema(fcmPrefix + "AndroidFcmOptions", [("analytics_label", .string)])

    static let android = MessageSchema(
        fcmPrefix + "AndroidConfig",
        [
            ("collapse_key", .string),
            ("priority", .enumeration(type: fcmPrefix + "AndroidMessagePriority", values: ["NORMAL", "HIGH"])),
            ("ttl", .duration), ("restricted_package_name", .string), ("data", .stringMap),
            ("notification", .object(androidNotification)), ("fcm_options", .object(androidOptions)),
            ("direct_boot_ok", .bool), ("bandwidth_constrained_ok", .bool), ("restricted_satellite_ok", .bool),
        ]
    )

    static let fcmOptions = MessageSchema(fcmPrefix + "FcmOptions", [("analytics_label", .string)])

    static let message = MessageSchema(
        fcmPrefix + "Message",
        [
            ("name", .string), ("data", .stringMap), ("notification", .object(notification)), ("android", .object(android)),
            ("webpush", .anyObject(type: fcmPrefix + "WebpushConfig")), ("apns", .anyObject(type: fcmPrefix + "ApnsConfig")),
            ("fcm_options", .object(fcmOptions)), ("token", .string), ("topic", .string), ("condition", .string),
            ("fid", .string),
        ]
    )

    static let sendRequest = MessageSchema(fcmPrefix + "SendMessageRequest", [("validate_only", .bool), ("message", .object(message))])
}

/// Checks a JSON value against a schema the way Google's JSON-to-proto layer does, and returns
/// it with canonical (snake_case) keys, nulls dropped and repeated keys resolved (the last wins).
enum SchemaChecker {
    static func check(_ value: JSONValue, schema: MessageSchema, path: String) throws(GoogleError) -> [String: JSONValue] {
        guard let members = value.objectMembers else {
            throw .transcoding("Invalid value at '\(path)' (\(schema.typeName)), \(value.jsonString)", field: path)
        }
        var result: [String: JSONValue] = [:]
        for (key, member) in members {
            guard let name = schema.spellings[key], let type = schema.types[name] else {
                let at = path.isEmpty ? "" : " at '\(path)'"
                throw .transcoding("Invalid JSON payload received. Unknown name \"\(key)\"\(at): Cannot find field.", field: path)
            }
            let fieldPath = path.isEmpty ? name : path + "." + name
            if member.isNull {
                result[name] = nil
                continue
            }
            result[name] = try Self.check(member, type: type, path: fieldPath)
        }
        return result
    }

    static func check(_ value: JSONValue, type: FieldType, path: String) throws(GoogleError) -> JSONValue {
        func invalid(_ typeName: String) -> GoogleError {
            .transcoding("Invalid value at '\(path)' (\(typeName)), \(value.jsonString)", field: path)
        }
        switch type {
        case .string:
            guard case .string = value else { throw invalid("TYPE_STRING") }
            return value
        case .bool:
            guard case .bool = value else { throw invalid("TYPE_BOOL") }
            return value
        case .int32:
            let number = value.intValue ?? value.stringValue.flatMap { Int64($0) }
            guard let number, number >= Int64(Int32.min), number <= Int64(Int32.max) else { throw invalid("TYPE_INT32") }
            return .int(number)
        case .float:
            guard let number = value.doubleValue ?? value.stringValue.flatMap({ Double($0) }) else { throw invalid("TYPE_FLOAT") }
            return .double(number)
        case .stringMap:
            guard let members = value.objectMembers else { throw invalid("TYPE_MAP") }
            var map: [(String, JSONValue)] = []
            for (index, (key, element)) in members.enumerated() {
                guard case .string = element else {
                    let elementPath = "\(path)[\(index)].value"
                    throw .transcoding("Invalid value at '\(elementPath)' (TYPE_STRING), \(element.jsonString)", field: elementPath)
                }
                map.removeAll { $0.0 == key }
                map.append((key, element))
            }
            return .object(map)
        case .duration:
            guard let text = value.stringValue, ProtoDuration.seconds(text) != nil else {
                throw invalid("type.googleapis.com/google.protobuf.Duration")
            }
            return value
        case .timestamp:
            guard let text = value.stringValue, Self.looksLikeTimestamp(text) else {
                throw invalid("type.googleapis.com/google.protobuf.Timestamp")
            }
            return value
        case .enumeration(let typeName, let values):
            if let text = value.stringValue, let match = values.first(where: { $0.caseInsensitiveEquals(text) }) {
                return .string(match)
            }
            if let number = value.intValue, number >= 0, number < values.count { return .string(values[Int(number)]) }
            throw invalid(typeName)
        case .object(let schema):
            return .object(try Self.check(value, schema: schema, path: path).sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        case .anyObject(let typeName):
            guard value.objectMembers != nil else { throw invalid(typeName) }
            return value
        case .list(let element):
            guard let elements = value.arrayValue else { throw invalid("TYPE_LIST") }
            var checked: [JSONValue] = []
            for (index, item) in elements.enumerated() {
                checked.append(try Self.check(item, type: element, path: "\(path)[\(index)]"))
            }
            return .array(checked)
        }
    }

    /// RFC 3339, loosely: `2026-01-02T03:04:05(.fff)Z` or with an offset.
    static func looksLikeTimestamp(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"), bytes[13] == UInt8(ascii: ":")
        else { return false }
        let last = bytes[bytes.count - 1]
        return last == UInt8(ascii: "Z") || last == UInt8(ascii: "z") || bytes[bytes.count - 6] == UInt8(ascii: "+")
            || bytes[bytes.count - 6] == UInt8(ascii: "-")
    }
}

/// `google.protobuf.Duration` in its JSON form, `"3.5s"`.
enum ProtoDuration {
    /// Whole seconds (rounded down) of `"<digits>[.<1-9 digits>]s"`; `nil` for anything else.
    static func seconds(_ text: String) -> Int64? {
        guard text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 12, whole.allSatisfy(\.isASCIIDigit) else { return nil }
        if parts.count == 2 {
            let fraction = parts[1]
            guard !fraction.isEmpty, fraction.count <= 9, fraction.allSatisfy(\.isASCIIDigit) else { return nil }
        }
        return Int64(whole)
    }
}

extension Character {
    var isASCIIDigit: Bool { self >= "0" && self <= "9" }
}

extension String {
    func caseInsensitiveEquals(_ other: String) -> Bool {
        self.count == other.count && self.lowercased() == other.lowercased()
    }
}

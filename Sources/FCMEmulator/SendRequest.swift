// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// A `messages:send` body that passed FCM's checks, with what a device would make of it.
struct SendRequest: Sendable {
    enum Target: Sendable, Hashable {
        case token(String)
        case fid(String)
        case topic(String)
        case condition(String)
    }

    static let maximumTTLSeconds: Int64 = 2_419_200
    static let maximumPayloadBytes = 4096
    static let maximumTopicPayloadBytes = 2048
    static let targetNames = ["token", "topic", "condition", "fid"]

    var validateOnly: Bool
    var target: Target
    var title: String?
    var body: String?
    var image: String?
    var data: [String: String]
    /// `android.priority` as given (`"high"`/`"normal"`), `nil` for the default.
    var explicitPriority: String?
    var ttlSeconds: Int64?
    var collapseKey: String?
    var channelID: String?
    var restrictedPackageName: String?
    var directBootOK: Bool
    var hasNotification: Bool
    /// The `message` object as it came.
    var raw: JSONValue

    var kind: String { self.hasNotification ? "notification" : "data" }
    var priority: String { self.explicitPriority ?? (self.hasNotification ? "high" : "normal") }

    func record(id: String, now: Int64) -> FCMMessageRecord {
        FCMMessageRecord(
            messageID: id, receivedAt: now, kind: self.kind, title: self.title, body: self.body, image: self.image,
            data: self.data, priority: self.priority, ttlSeconds: self.ttlSeconds, collapseKey: self.collapseKey,
            channelID: self.channelID, directBootOK: self.directBootOK, raw: self.raw.jsonString
        )
    }

    /// Parses and checks a request body the way FCM does, in FCM's order: JSON shape first
    /// (unknown names, types, one target), then FCM's own rules (data keys, TTL, size).
    static func parse(_ body: [UInt8]) throws(GoogleError) -> SendRequest {
        let json: JSONValue
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            json = .object([])
        } else {
            do {
                json = try JSONValue.parse(body)
            } catch {
                throw .transcoding("Invalid JSON payload received. \(error.message.capitalizedFirst).", field: "")
            }
        }
        let request = try SchemaChecker.check(json, schema: .sendRequest, path: "")
        let rawMessage = json["message"].flatMap { $0.isNull ? nil : $0 } ?? .object([])
        // A proto oneof: a second target is refused while the JSON is read.
        var targetsSeen: [String] = []
        for (key, value) in rawMessage.objectMembers ?? [] where !value.isNull {
            guard let name = MessageSchema.message.spellings[key], Self.targetNames.contains(name) else { continue }
            if let first = targetsSeen.first, first != name {
                throw .transcoding(
                    "Invalid JSON payload received. Oneof field 'target' is already set. Cannot set '\(name)'", field: "message"
                )
            }
            targetsSeen.append(name)
        }
        let message = request["message"].flatMap { Self.dictionary($0) } ?? [:]
        let android = message["android"].flatMap { Self.dictionary($0) } ?? [:]
        let notification = message["notification"].flatMap { Self.dictionary($0) } ?? [:]
        let androidNotification = android["notification"].flatMap { Self.dictionary($0) } ?? [:]

        let target = try Self.target(message)
        let messageData = try Self.data(message["data"], field: "message.data")
        let androidData = try Self.data(android["data"], field: "message.android.data")

        var ttl: Int64?
        if let text = android["ttl"]?.stringValue {
            ttl = ProtoDuration.seconds(text)
            if let seconds = ttl, seconds > Self.maximumTTLSeconds {
                throw .invalidArgument(
                    "Invalid TTL", field: "message.android.ttl",
                    description: "The TTL must be between 0 and \(Self.maximumTTLSeconds) seconds (4 weeks)."
                )
            }
        }
        if let color = androidNotification["color"]?.stringValue, !Self.isColor(color) {
            throw .invalidArgument(
                "Invalid color", field: "message.android.notification.color", description: "The color must be in the form #rrggbb."
            )
        }

        let title = androidNotification["title"]?.stringValue ?? notification["title"]?.stringValue
        let text = androidNotification["body"]?.stringValue ?? notification["body"]?.stringValue
        let data = androidData ?? messageData ?? [:]
        var size = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        size += (title?.utf8.count ?? 0) + (text?.utf8.count ?? 0)
        let limit: Int
        switch target {
        case .topic, .condition: limit = Self.maximumTopicPayloadBytes
        case .token, .fid: limit = Self.maximumPayloadBytes
        }
        if size > limit { throw .messageTooBig }

        let hasNotification =
            title != nil || text != nil || androidNotification["title_loc_key"] != nil || androidNotification["body_loc_key"] != nil
        return SendRequest(
            validateOnly: request["validate_only"]?.boolValue ?? false,
            target: target,
            title: title,
            body: text,
            image: androidNotification["image"]?.stringValue ?? notification["image"]?.stringValue,
            data: data,
            explicitPriority: android["priority"]?.stringValue?.lowercased(),
            ttlSeconds: ttl,
            collapseKey: android["collapse_key"]?.stringValue,
            channelID: androidNotification["channel_id"]?.stringValue,
            restrictedPackageName: android["restricted_package_name"]?.stringValue,
            directBootOK: android["direct_boot_ok"]?.boolValue ?? false,
            hasNotification: hasNotification,
            raw: rawMessage
        )
    }

    private static func dictionary(_ value: JSONValue) -> [String: JSONValue]? {
        guard let members = value.objectMembers else { return nil }
        return Dictionary(members, uniquingKeysWith: { _, last in last })
    }

    private static func target(_ message: [String: JSONValue]) throws(GoogleError) -> Target {
        if let token = message["token"]?.stringValue { return .token(token) }
        if let fid = message["fid"]?.stringValue { return .fid(fid) }
        if let topic = message["topic"]?.stringValue {
            guard !topic.isEmpty, topic.utf8.allSatisfy(Self.isTopicByte) else {
                throw .invalidArgument("Invalid topic name", field: "message.topic", description: "Topic names must match [a-zA-Z0-9-_.~%]+.")
            }
            return .topic(topic)
        }
        if let condition = message["condition"]?.stringValue {
            let topics = condition.split(separator: " in topics", omittingEmptySubsequences: false).count - 1
            guard topics >= 1, topics <= 5 else {
                throw .invalidArgument(
                    "Invalid condition expression", field: "message.condition",
                    description: "A condition names between one and five topics."
                )
            }
            return .condition(condition)
        }
        throw GoogleError(
            code: 400, message: "Recipient of the message is not set.", status: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT",
            fieldViolations: [("message", "Recipient of the message is not set.")], badRequestFirst: true
        )
    }

    /// A data map, refusing the keys FCM keeps for itself.
    private static func data(_ value: JSONValue?, field: String) throws(GoogleError) -> [String: String]? {
        guard let members = value?.objectMembers else { return nil }
        var data: [String: String] = [:]
        for (key, element) in members {
            let lower = key.lowercased()
            if lower == "from" || lower == "message_type" || lower.hasPrefix("google") || lower.hasPrefix("gcm") {
                throw .invalidArgument("Invalid data key", field: field, description: "The data key \"\(key)\" is reserved.")
            }
            data[key] = element.stringValue ?? ""
        }
        return data
    }

    private static func isTopicByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "%"): true
        default: false
        }
    }

    private static func isColor(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.count == 7 && bytes[0] == UInt8(ascii: "#")
            && bytes.dropFirst().allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }
    }
}

extension String {
    var capitalizedFirst: String { self.prefix(1).uppercased() + self.dropFirst() }
}

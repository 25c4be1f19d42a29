// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// Something the emulator does to the next send request instead of answering it normally.
/// Faults queue up and each one is used by one `messages:send` request, in order.
public enum FCMFault: Sendable, Hashable {
    /// Answer with this HTTP status and Google's error envelope for it: 429 is
    /// `RESOURCE_EXHAUSTED` / `QUOTA_EXCEEDED`, 503 `UNAVAILABLE`, 500 `INTERNAL`. With
    /// `retryAfter`, a `retry-after: <seconds>` header goes with it.
    case status(Int, retryAfter: Int?)
    /// Close the connection without answering.
    case drop
}

/// What the emulator has seen since it started.
public struct FCMCounters: Sendable, Hashable, Codable {
    /// Requests to `POST /token`.
    public var tokenRequests: Int
    /// Access tokens handed out.
    public var tokensIssued: Int
    /// Token requests refused.
    public var tokenFailures: Int
    /// Requests to `messages:send` (refused, faulted and dropped ones included).
    public var sendRequests: Int
    /// Messages put in a device's inbox.
    public var delivered: Int
    /// Refused sends by FCM `errorCode` (or canonical status when the answer has none, and
    /// `"DROPPED"` for a dropped connection).
    public var refused: [String: Int]

    public init(
        tokenRequests: Int = 0, tokensIssued: Int = 0, tokenFailures: Int = 0, sendRequests: Int = 0, delivered: Int = 0, refused: [String: Int] = [:]
    ) {
        self.tokenRequests = tokenRequests
        self.tokensIssued = tokensIssued
        self.tokenFailures = tokenFailures
        self.sendRequests = sendRequests
        self.delivered = delivered
        self.refused = refused
    }

    var json: JSONValue {
        .object([
            ("tokenRequests", .int(Int64(self.tokenRequests))),
            ("tokensIssued", .int(Int64(self.tokensIssued))),
            ("tokenFailures", .int(Int64(self.tokenFailures))),
            ("sendRequests", .int(Int64(self.sendRequests))),
            ("delivered", .int(Int64(self.delivered))),
            ("refused", .object(self.refused.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
        ])
    }
}

/// One message as a virtual Android device received it.
public struct FCMMessageRecord: Sendable, Hashable {
    /// The id FCM answered with (the last part of `projects/{p}/messages/{id}`).
    public var messageID: String
    /// When it arrived, in milliseconds since 1970 on the emulator's clock.
    public var receivedAt: Int64
    /// `"notification"` when it carries a title or body anywhere, `"data"` otherwise.
    public var kind: String
    /// `android.notification` over `message.notification`, field by field.
    public var title: String?
    public var body: String?
    public var image: String?
    /// `android.data` when present (it replaces `message.data`), else `message.data`.
    public var data: [String: String]
    /// The effective Android priority, `"high"` or `"normal"` (data messages default to normal,
    /// notification messages to high).
    public var priority: String
    /// `android.ttl` in whole seconds, when given.
    public var ttlSeconds: Int64?
    public var collapseKey: String?
    public var channelID: String?
    public var directBootOK: Bool
    /// The `message` object as sent (compact JSON).
    public var raw: String

    public init(
        messageID: String, receivedAt: Int64, kind: String, title: String? = nil, body: String? = nil, image: String? = nil,
        data: [String: String] = [:], priority: String, ttlSeconds: Int64? = nil, collapseKey: String? = nil,
        channelID: String? = nil, directBootOK: Bool = false, raw: String
    ) {
        self.messageID = messageID
        self.receivedAt = receivedAt
        self.kind = kind
        self.title = title
        self.body = body
        self.image = image
        self.data = data
        self.priority = priority
        self.ttlSeconds = ttlSeconds
        self.collapseKey = collapseKey
        self.channelID = channelID
        self.directBootOK = directBootOK
        self.raw = raw
    }

    /// Reads a record as the control API writes it (`GET /emulator/devices/{token}/messages`).
    public init(json: String) throws {
        try self.init(jsonValue: try JSONValue.parse(json))
    }

    init(jsonValue object: JSONValue) throws {
        struct Malformed: Error {}
        guard let id = object["messageId"]?.stringValue, let receivedAt = object["receivedAt"]?.intValue,
            let kind = object["kind"]?.stringValue, let priority = object["priority"]?.stringValue
        else { throw Malformed() }
        var data: [String: String] = [:]
        for (key, value) in object["data"]?.objectMembers ?? [] { data[key] = value.stringValue }
        self.init(
            messageID: id, receivedAt: receivedAt, kind: kind, title: object["title"]?.stringValue,
            body: object["body"]?.stringValue, image: object["image"]?.stringValue, data: data, priority: priority,
            ttlSeconds: object["ttlSeconds"]?.intValue, collapseKey: object["collapseKey"]?.stringValue,
            channelID: object["channelId"]?.stringValue, directBootOK: object["directBootOk"]?.boolValue ?? false,
            raw: object["message"].map { $0.jsonString } ?? "{}"
        )
    }

    /// The control API's form: the record's fields plus the message itself under `message`.
    public var json: String { self.jsonValue.jsonString }

    var jsonValue: JSONValue {
        func optional(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
        return .object([
            ("messageId", .string(self.messageID)),
            ("receivedAt", .int(self.receivedAt)),
            ("kind", .string(self.kind)),
            ("title", optional(self.title)),
            ("body", optional(self.body)),
            ("image", optional(self.image)),
            ("data", .object(self.data.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ("priority", .string(self.priority)),
            ("ttlSeconds", self.ttlSeconds.map { .int($0) } ?? .null),
            ("collapseKey", optional(self.collapseKey)),
            ("channelId", optional(self.channelID)),
            ("directBootOk", .bool(self.directBootOK)),
            ("message", (try? JSONValue.parse(self.raw)) ?? .string(self.raw)),
        ])
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// Which real push service an endpoint answers like, chosen by the endpoint's path.
package enum WebPushPersonality: String, Sendable, Hashable, CaseIterable {
    /// Safari's `web.push.apple.com`: `POST /apple/<token>`, `{"reason":…}` bodies with an `apns-id`.
    case apple
    /// Firefox's autopush: `POST /wpush/v2/<token>` (VAPID-restricted) or `/wpush/v1/<token>`,
    /// `{"code","errno","error","message"}` bodies.
    case mozilla
    /// Chrome's FCM web push: `POST /fcm/send/<token>`, plain-text bodies.
    case fcm

    /// The endpoint path before the token.
    func pathPrefix(restricted: Bool) -> String {
        switch self {
        case .apple: "/apple/"
        case .mozilla: restricted ? "/wpush/v2/" : "/wpush/v1/"
        case .fcm: "/fcm/send/"
        }
    }
}

/// Something the emulator does to the next push requests instead of answering them normally.
package struct WebPushFault: Sendable, Hashable {
    /// 429, 500 or 503 (any 400–599 is taken).
    package var status: Int
    /// Seconds for a `Retry-After` header, if any.
    package var retryAfter: Int?

    package init(status: Int, retryAfter: Int? = nil) {
        self.status = status
        self.retryAfter = retryAfter
    }
}

/// What the emulator has seen since it started (or was reset).
package struct WebPushCounters: Sendable, Hashable {
    /// `POST`s to push endpoints, refused and faulted ones included.
    package var requests = 0
    /// Pushes answered 201.
    package var accepted = 0
    /// Refused pushes by reason (`badTTL`, `vapidKeyMismatch`, … and `fault429` for injected faults).
    package var refused: [String: Int] = [:]
    /// Messages put in a virtual browser's inbox (decrypted).
    package var delivered = 0
    /// Messages a virtual browser could not decrypt.
    package var decryptionFailures = 0
    /// Accepted messages that were dropped: TTL 0 while offline, TTL run out, replaced by Topic.
    package var dropped = 0
    /// Notification frames written to Firefox sockets (first sends and resends).
    package var notificationsSent = 0
    /// Acks from Firefox, by code (`"100"`, `"101"`, `"102"`).
    package var acks: [String: Int] = [:]
    /// Nacks from Firefox.
    package var nacks = 0

    package init() {}

    var json: JSONValue {
        func map(_ values: [String: Int]) -> JSONValue {
            .object(values.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })
        }
        return .object([
            ("requests", .int(Int64(self.requests))),
            ("accepted", .int(Int64(self.accepted))),
            ("refused", map(self.refused)),
            ("delivered", .int(Int64(self.delivered))),
            ("decryptionFailures", .int(Int64(self.decryptionFailures))),
            ("dropped", .int(Int64(self.dropped))),
            ("notificationsSent", .int(Int64(self.notificationsSent))),
            ("acks", map(self.acks)),
            ("nacks", .int(Int64(self.nacks))),
        ])
    }
}

/// A message a virtual browser received and decrypted.
package struct WebPushMessageRecord: Sendable, Hashable {
    /// The id in the 201's `Location` (`…/m/<id>`).
    package var id: String
    /// The plaintext as UTF-8 (invalid sequences replaced).
    package var text: String
    /// The plaintext octets.
    package var plaintext: [UInt8]
    /// The TTL the push service kept (after the 30-day cap).
    package var ttl: Int
    package var urgency: String
    package var topic: String?
    /// When the push was accepted, ms since 1970 on the emulator's clock.
    package var receivedAt: Int64

    var jsonValue: JSONValue {
        .object([
            ("id", .string(self.id)),
            ("text", .string(self.text)),
            ("data", .string(Base64URL.encode(self.plaintext))),
            ("ttl", .int(Int64(self.ttl))),
            ("urgency", .string(self.urgency)),
            ("topic", self.topic.map { .string($0) } ?? .null),
            ("receivedAt", .int(self.receivedAt)),
        ])
    }
}

/// A message a virtual browser could not decrypt (the push service had accepted it).
package struct WebPushDecryptionFailure: Sendable, Hashable {
    package var id: String
    /// `badTag`, `badPadding`, `badSenderKey`, `truncatedHeader`, `badRecordSize`, `multipleRecords`.
    package var error: String
    package var receivedAt: Int64

    var jsonValue: JSONValue {
        .object([("id", .string(self.id)), ("error", .string(self.error)), ("receivedAt", .int(self.receivedAt))])
    }
}

/// What a virtual browser holds.
package struct WebPushInbox: Sendable, Hashable {
    package var messages: [WebPushMessageRecord]
    package var decryptionFailures: [WebPushDecryptionFailure]
    package var online: Bool
    package var subscribed: Bool
    /// Accepted messages waiting for the browser to come online.
    package var waiting: Int

    var jsonValue: JSONValue {
        .object([
            ("messages", .array(self.messages.map(\.jsonValue))),
            ("decryptionFailures", .array(self.decryptionFailures.map(\.jsonValue))),
            ("online", .bool(self.online)),
            ("subscribed", .bool(self.subscribed)),
            ("waiting", .int(Int64(self.waiting))),
        ])
    }
}

/// A virtual browser's push subscription, as `PushSubscription.toJSON()` gives it.
package struct WebPushBrowserSubscription: Sendable, Hashable {
    package var id: String
    package var personality: WebPushPersonality
    package var endpoint: String
    /// Base64url, unpadded.
    package var p256dh: String
    package var auth: String

    package init(id: String, personality: WebPushPersonality, endpoint: String, p256dh: String, auth: String) {
        self.id = id
        self.personality = personality
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    var jsonValue: JSONValue {
        .object([
            ("id", .string(self.id)),
            ("personality", .string(self.personality.rawValue)),
            (
                "subscription",
                .object([
                    ("endpoint", .string(self.endpoint)),
                    ("expirationTime", .null),
                    ("keys", .object([("p256dh", .string(self.p256dh)), ("auth", .string(self.auth))])),
                ])
            ),
        ])
    }
}

/// One channel Firefox registered over the WebSocket, and what happened to its messages.
package struct FirefoxChannelRecord: Sendable, Hashable {
    package struct Message: Sendable, Hashable {
        package var version: String
        /// The ack code (100 decrypted and handed to the service worker, 101 decryption error,
        /// 102 not delivered), once acked.
        package var ack: Int?
        /// The nack code (301 SW threw, 302 SW rejected, 303 internal), if nacked.
        package var nack: Int?
    }

    package var channelID: String
    package var uaid: String
    package var endpoint: String
    package var registered: Bool
    /// Messages forwarded on this channel, oldest first.
    package var messages: [Message]

    var jsonValue: JSONValue {
        func optional(_ value: Int?) -> JSONValue { value.map { .int(Int64($0)) } ?? .null }
        return .object([
            ("channelID", .string(self.channelID)),
            ("uaid", .string(self.uaid)),
            ("endpoint", .string(self.endpoint)),
            ("registered", .bool(self.registered)),
            (
                "messages",
                .array(self.messages.map { .object([("version", .string($0.version)), ("ack", optional($0.ack)), ("nack", optional($0.nack))]) })
            ),
            (
                "acks",
                .array(
                    self.messages.compactMap { message in
                        message.ack.map { .object([("version", .string(message.version)), ("code", .int(Int64($0)))]) }
                    })
            ),
        ])
    }
}

/// Something that happened, as the event stream (`GET /emulator/events`) reports it.
package struct WebPushEvent: Sendable, Hashable {
    package enum Kind: String, Sendable, Hashable {
        /// A push was answered 201.
        case accepted
        /// A push was refused (`status`, `reason`).
        case refused
        /// A virtual browser decrypted a message into its inbox.
        case delivered
        /// A virtual browser could not decrypt a message (`reason`).
        case decryptionFailure
        /// An accepted message was dropped (`reason`: `ttl`, `topic`).
        case dropped
        /// A notification frame went to Firefox.
        case notification
        /// Firefox said hello (`uaid`).
        case hello
        /// Firefox registered a channel.
        case register
        /// Firefox unregistered a channel (`code`).
        case unregister
        /// Firefox acked a message (`channelID`, `version`, `code`).
        case ack
        /// Firefox nacked a message (`version`, `code`).
        case nack
    }

    package var kind: Kind
    package var browserID: String?
    package var messageID: String?
    package var channelID: String?
    package var uaid: String?
    package var code: Int?
    package var reason: String?
    /// A delivered message's text (decrypted plaintext).
    package var text: String?

    package init(
        _ kind: Kind, browserID: String? = nil, messageID: String? = nil, channelID: String? = nil, uaid: String? = nil,
        code: Int? = nil, reason: String? = nil, text: String? = nil
    ) {
        self.kind = kind
        self.browserID = browserID
        self.messageID = messageID
        self.channelID = channelID
        self.uaid = uaid
        self.code = code
        self.reason = reason
        self.text = text
    }

    package var json: String {
        var members: [(String, JSONValue)] = [("type", .string(self.kind.rawValue))]
        if let browserID { members.append(("browser", .string(browserID))) }
        if let messageID { members.append(("id", .string(messageID))) }
        if let channelID { members.append(("channelID", .string(channelID))) }
        if let uaid { members.append(("uaid", .string(uaid))) }
        if let code { members.append(("code", .int(Int64(code)))) }
        if let reason { members.append(("reason", .string(reason))) }
        if let text { members.append(("text", .string(text))) }
        return JSONValue.object(members).jsonString
    }

    /// Reads an event as the stream writes it.
    package init(json: String) throws {
        struct Malformed: Error {}
        let object = try JSONValue.parse(json)
        guard let kind = object["type"]?.stringValue.flatMap(Kind.init(rawValue:)) else { throw Malformed() }
        self.init(
            kind, browserID: object["browser"]?.stringValue, messageID: object["id"]?.stringValue,
            channelID: object["channelID"]?.stringValue, uaid: object["uaid"]?.stringValue, code: object["code"]?.intValue.map { Int($0) },
            reason: object["reason"]?.stringValue, text: object["text"]?.stringValue
        )
    }
}

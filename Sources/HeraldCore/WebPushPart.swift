// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// The Web Push part of a notification: a Declarative Web Push message (W3C Push API,
/// `{"web_push": 8030, "notification": {…}, "app_badge": n, "mutable": true}`), which Safari
/// (iOS 18.4+, macOS) shows by itself and Herald's service worker (`herald-sw.js`) shows
/// everywhere else. Encrypted per subscription when sent; a delivery's receipt id is spliced in
/// as `hr` before the closing brace.
package enum WebPushPart {
    /// What one aes128gcm record of 4096 octets carries (RFC 8291 §4).
    package static let maximumPlaintext = 3993
    /// Room kept for the receipt id spliced in at send (`,"hr":"<27>"`, 35 octets, and spare).
    package static let receiptRoom = 40
    /// The members of `notification` Herald passes through from a `webpush` block.
    package static let notificationMembers: Set<String> = [
        "title", "body", "navigate", "lang", "dir", "silent", "tag", "icon", "image", "badge", "requireInteraction", "renotify",
        "actions", "data", "vibrate", "timestamp", "app_badge", "mutable",
    ]

    /// The part made of the common fields (`notification` holds title, body, navigate, image,
    /// data) with the `webpush` block's members laid over; refused as a browser would refuse it
    /// (`webpush_*` codes): no title (browsers show every push), a navigate that is not an
    /// https or http URL, more than ``maximumPlaintext`` octets with the receipt's room.
    package static func make(_ members: [(String, JSONValue)]) throws(HeraldError) -> [UInt8] {
        let value = Self.placed([("web_push", .int(8030))] + members.filter { $0.0 != "web_push" })
        try Self.validate(value)
        return value.serialized()
    }

    /// `app_badge` and `mutable` where each reader looks for them: the W3C draft at the top,
    /// WebKit (the one browser that shows declarative messages itself) and Firefox inside
    /// `notification`. Unknown members are ignored everywhere, so both places are safe.
    package static func placed(_ members: [(String, JSONValue)]) -> JSONValue {
        var members = members
        guard let index = members.firstIndex(where: { $0.0 == "notification" }), var notification = members[index].1.objectMembers else {
            return .object(members)
        }
        for key in ["app_badge", "mutable"] {
            let top = members.first { $0.0 == key }?.1
            let inner = notification.first { $0.0 == key }?.1
            if let value = inner ?? top {
                members.removeAll { $0.0 == key }
                members.append((key, value))
                notification.removeAll { $0.0 == key }
                notification.append((key, value))
            }
        }
        members[index].1 = .object(notification)
        return .object(members)
    }

    package static func validate(_ message: JSONValue) throws(HeraldError) {
        guard let members = message.objectMembers else { throw HeraldError.invalid("webpush must be an object", code: "bad_webpush") }
        for (name, value) in members {
            switch name {
            case "web_push": continue
            case "notification":
                guard let fields = value.objectMembers else {
                    throw HeraldError.invalid("webpush.notification must be an object", code: "bad_webpush")
                }
                for (field, _) in fields where !Self.notificationMembers.contains(field) {
                    throw HeraldError.invalid(
                        "webpush.notification.\(field) is not a notification option (\(Self.notificationMembers.sorted().joined(separator: ", ")))",
                        code: "bad_webpush")
                }
            case "app_badge":
                guard let badge = value.intValue, badge >= 0 else {
                    throw HeraldError.invalid("webpush.app_badge must be a whole number, 0 or more", code: "bad_webpush")
                }
            case "mutable":
                guard value.boolValue != nil else { throw HeraldError.invalid("webpush.mutable must be true or false", code: "bad_webpush") }
            default:
                throw HeraldError.invalid("webpush.\(name) is not a field Herald sends (notification, app_badge, mutable)", code: "bad_webpush")
            }
        }
        guard let title = message["notification"]?["title"]?.stringValue, !title.isEmpty else {
            throw HeraldError.invalid(
                "a web push needs a title: browsers show every push (Safari takes the permission back from a site whose push shows nothing)",
                code: "webpush_needs_title")
        }
        if let navigate = message["notification"]?["navigate"] {
            // WebKit takes only an absolute URL (a message with another is not declarative there).
            guard let url = navigate.stringValue, url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw HeraldError.invalid("the web notification's navigate (link) must be an absolute http(s) URL", code: "bad_webpush_link")
            }
        }
        let size = message.serialized().count + Self.receiptRoom
        guard size <= Self.maximumPlaintext else {
            throw HeraldError.invalid(
                "the web push message takes \(size) octets with its receipt; one encrypted record carries \(Self.maximumPlaintext)",
                code: "webpush_too_large")
        }
    }

    /// `base` with a template's variant laid over it: its title and body as the notification's,
    /// its payload fragment's keys in `notification.data`.
    package static func rendered(base: JSONValue, variant: RenderedVariant) -> [UInt8] {
        var members = base.objectMembers ?? [("web_push", .int(8030))]
        var notification = members.first { $0.0 == "notification" }?.1.objectMembers ?? []
        notification.removeAll { $0.0 == "title" || $0.0 == "body" }
        if let body = variant.body { notification.insert(("body", .string(body)), at: 0) }
        if let title = variant.title { notification.insert(("title", .string(title)), at: 0) }
        if let fragment = variant.payload?.objectMembers {
            var data = notification.first { $0.0 == "data" }?.1.objectMembers ?? []
            for (key, value) in fragment {
                data.removeAll { $0.0 == key }
                data.append((key, value))
            }
            notification.removeAll { $0.0 == "data" }
            notification.append(("data", .object(data)))
        }
        if let index = members.firstIndex(where: { $0.0 == "notification" }) {
            members[index].1 = .object(notification)
        } else {
            members.append(("notification", .object(notification)))
        }
        return JSONValue.object(members).serialized()
    }

    /// The plaintext one subscription gets: the part with `extra` members (a receipt id)
    /// spliced in before its closing brace.
    package static func message(_ part: [UInt8], extra: [(String, String)]) -> [UInt8] {
        guard !extra.isEmpty, part.last == UInt8(ascii: "}") else { return part }
        var out = Array(part.dropLast())
        for (key, value) in extra {
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: JSONValue.string(key).serialized())
            out.append(UInt8(ascii: ":"))
            out.append(contentsOf: JSONValue.string(value).serialized())
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// RFC 8030 `Urgency` for a priority: APNs's 10 is `high`, 5 `normal`, 1 `low`.
    package static func urgency(_ priority: Priority?) -> String {
        switch priority {
        case .immediate?: "high"
        case .powerConsiderate?: "low"
        default: "normal"
        }
    }
}

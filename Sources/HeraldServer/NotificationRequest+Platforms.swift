// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI
import HeraldCore

/// One notification for every platform: the common fields (title, body, image, sound, badge,
/// data, link, collapse id, time to live, priority) become the APNs payload and the FCM message
/// alike, each platform's own block (`aps`, `fcm`) laid over its part.
extension NotificationRequest {
    /// Decides which transports `spec` goes through and builds the part each one sends. What
    /// only APNs carries (a push type other than alert or background, a Live Activity audience,
    /// end-to-end encryption, kinds other than device) keeps it to APNs; so does common content
    /// FCM would refuse (data that is not strings), unless FCM was asked for by name or by an
    /// `fcm` block: then it is refused here, as FCM would refuse it.
    static func platforms(_ body: SendRequest, json: JSONValue, into spec: inout NotificationSpec) throws {
        var asked: Set<Transport> = []
        if let names = body.transports {
            guard !names.isEmpty else { throw HeraldError.invalid("transports names at least one of apns, fcm, webpush", code: "bad_transports") }
            for name in names {
                guard let transport = Transport(rawValue: name) else {
                    throw HeraldError.invalid("unknown transport '\(name)' (apns, fcm, webpush)", code: "bad_transports")
                }
                asked.insert(transport)
            }
        }
        let others: [(transport: Transport, block: Bool)] = [(.fcm, body.fcm != nil), (.webpush, body.webpush != nil)]
        for other in others where other.block && !asked.isEmpty && !asked.contains(other.transport) {
            throw HeraldError.invalid(
                "a \(other.transport.rawValue) block goes with \(other.transport.rawValue) devices, which transports leaves out",
                code: "bad_transports")
        }
        // Named: in transports, or given a block of its own. Its refusals are the sender's to see.
        let named = Set(others.filter { asked.contains($0.transport) || $0.block }.map(\.transport))
        if let reason = Self.appleOnly(body, spec: spec) {
            if let other = named.sorted().first {
                throw HeraldError.invalid("\(reason) is APNs's alone: \(other.rawValue) cannot carry it", code: "transport_not_supported")
            }
            spec.transports = [.apns]
            return
        }
        var reached = asked.isEmpty ? Set(Transport.allCases) : asked
        for (transport, _) in others where reached.contains(transport) {
            do {
                switch transport {
                case .fcm: spec.parts[.fcm] = try Self.fcmPart(body, json: json, templated: body.template != nil)
                case .webpush: spec.parts[.webpush] = try Self.webPushPart(body, templated: body.template != nil)
                case .apns: break
                }
            } catch {
                // Asked for: refused as its service would refuse it. Otherwise the notification keeps to the rest.
                if named.contains(transport) || asked == [transport] { throw error }
                reached.remove(transport)
            }
        }
        spec.transports = asked.isEmpty && reached == Set(Transport.allCases) ? [] : reached
    }

    /// Why the notification can go to APNs only; nil when FCM can carry it too.
    private static func appleOnly(_ body: SendRequest, spec: NotificationSpec) -> String? {
        if let pushType = spec.pushType, pushType != .alert, pushType != .background { return "pushType \(pushType.rawValue)" }
        switch spec.audience {
        case .activity: return "a Live Activity audience"
        case .channel: return "a channel audience"
        default: break
        }
        if spec.placeholder != nil { return "end-to-end encryption" }
        if !spec.kinds.isEmpty, !spec.kinds.contains(.device) { return "kinds without device" }
        return nil
    }

    /// The FCM part (``FCMPart``): `notification` (title, body, image), `android.notification`
    /// (sound, badge as `notification_count`), `data` (the sender's data, each value a string,
    /// and the link), then the `fcm` block laid over it.
    static func fcmPart(_ body: SendRequest, json: JSONValue, templated: Bool) throws -> [UInt8] {
        var notification: [(String, JSONValue)] = []
        if let title = body.title { notification.append(("title", .string(title))) }
        if let text = body.body { notification.append(("body", .string(text))) }
        if let image = body.image { notification.append(("image", .string(image))) }
        var androidNotification: [(String, JSONValue)] = []
        if let sound = body.sound { androidNotification.append(("sound", .string(sound))) }
        if let badge = body.badge { androidNotification.append(("notification_count", .int(badge))) }
        var data: [(String, JSONValue)] = []
        if case .object(let members)? = body.data {
            for member in members {
                guard case .string(let text) = member.value else {
                    throw HeraldError.invalid(
                        "data.\(member.key) is not a string: FCM data values are strings (send with transports [\"apns\"] to keep other values)",
                        code: "fcm_data_not_string")
                }
                data.append((member.key, .string(text)))
            }
        }
        if let link = body.link {
            data.removeAll { $0.0 == "link" }
            data.append(("link", .string(link)))
        }
        var members: [(String, JSONValue)] = []
        if !notification.isEmpty { members.append(("notification", .object(notification))) }
        if !androidNotification.isEmpty { members.append(("android", .object([("notification", .object(androidNotification))]))) }
        members.append(("data", .object(data)))
        if let block = body.fcm {
            guard case .object = block else { throw HeraldError.invalid("fcm must be an object", code: "bad_fcm") }
            members = Self.merged(members, over: JSONValue(block).objectMembers ?? [])
        }
        let message = JSONValue.object(members)
        let shows = message["notification"] != nil || message["android"]?["notification"] != nil
        let carries = !(message["data"]?.objectMembers?.isEmpty ?? true)
        guard shows || carries || templated || body.contentAvailable == true else {
            throw HeraldError.invalid(
                "the notification has nothing for FCM: give a title or body, data, or an fcm block", code: "empty_notification")
        }
        return try FCMPart.make(members)
    }

    /// The Web Push part (``WebPushPart``): a Declarative Web Push message whose `notification`
    /// holds the title, body, `navigate` (the link), image and the sender's data (any JSON), with
    /// the badge as `app_badge`; then the `webpush` block laid over it.
    static func webPushPart(_ body: SendRequest, templated: Bool) throws -> [UInt8] {
        var notification: [(String, JSONValue)] = []
        if let title = body.title { notification.append(("title", .string(title))) }
        if let text = body.body { notification.append(("body", .string(text))) }
        // A page's address; an app's own scheme (shop://…) means nothing to a browser.
        if let link = body.link, link.hasPrefix("https://") || link.hasPrefix("http://") { notification.append(("navigate", .string(link))) }
        if let image = body.image { notification.append(("image", .string(image))) }
        if let data = body.data { notification.append(("data", JSONValue(data))) }
        var members: [(String, JSONValue)] = [("notification", .object(notification))]
        if let badge = body.badge { members.append(("app_badge", .int(badge))) }
        // A service worker, where there is one, sees the push (and reports its receipt).
        members.append(("mutable", .bool(true)))
        if let block = body.webpush {
            guard case .object = block else { throw HeraldError.invalid("webpush must be an object", code: "bad_webpush") }
            members = Self.merged(members, over: JSONValue(block).objectMembers ?? [])
        }
        if templated, members.first(where: { $0.0 == "notification" })?.1["title"] == nil {
            // The template gives the title per device; checked here with a stand-in of its size.
            var checked = members
            if let index = checked.firstIndex(where: { $0.0 == "notification" }) {
                checked[index].1 = .object([("title", .string("template"))] + (checked[index].1.objectMembers ?? []))
            }
            _ = try WebPushPart.make(checked)
            return WebPushPart.placed([("web_push", .int(8030))] + members).serialized()
        }
        return try WebPushPart.make(members)
    }

    /// `base` with `override`'s members laid over it: objects merged key by key (the override's
    /// values win), anything else replaced.
    static func merged(_ base: [(String, JSONValue)], over override: [(String, JSONValue)]) -> [(String, JSONValue)] {
        var result = base
        for (key, value) in override {
            if let index = result.firstIndex(where: { $0.0 == key }), let old = result[index].1.objectMembers, let new = value.objectMembers {
                result[index].1 = .object(Self.merged(old, over: new))
            } else {
                result.removeAll { $0.0 == key }
                result.append((key, value))
            }
        }
        return result
    }
}

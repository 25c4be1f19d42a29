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
            guard !names.isEmpty else { throw HeraldError.invalid("transports names at least one of apns, fcm", code: "bad_transports") }
            for name in names {
                guard let transport = Transport(rawValue: name) else {
                    throw HeraldError.invalid("unknown transport '\(name)' (apns, fcm)", code: "bad_transports")
                }
                asked.insert(transport)
            }
        }
        let fcmNamed = asked.contains(.fcm) || body.fcm != nil
        if body.fcm != nil, !asked.isEmpty, !asked.contains(.fcm) {
            throw HeraldError.invalid("an fcm block goes with FCM devices, which transports leaves out", code: "bad_transports")
        }
        if let reason = Self.appleOnly(body, spec: spec) {
            if fcmNamed { throw HeraldError.invalid("\(reason) is APNs's alone: FCM cannot carry it", code: "transport_not_supported") }
            spec.transports = [.apns]
            return
        }
        if asked.isEmpty || asked.contains(.fcm) {
            do {
                spec.parts[.fcm] = try Self.fcmPart(body, json: json, templated: body.template != nil)
            } catch {
                // Asked for FCM: refused as FCM would refuse it. Otherwise the notification keeps to APNs.
                if fcmNamed || asked == [.fcm] { throw error }
                spec.transports = [.apns]
                return
            }
        }
        spec.transports = asked.isEmpty ? [] : asked
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

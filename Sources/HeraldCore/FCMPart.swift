// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// A notification's parts for platforms other than APNs, as stored with it (`notifications.parts`):
/// a JSON object keyed by transport (`{"fcm": {…}}`). The APNs payload stays the notification's
/// `payload`, so a notification to APNs alone stores nothing more and reads nothing more.
package enum NotificationParts {
    package static func read(_ bytes: [UInt8]) -> [Transport: [UInt8]] {
        guard let members = (try? JSONValue.parse(bytes))?.objectMembers else { return [:] }
        var parts: [Transport: [UInt8]] = [:]
        for (name, value) in members {
            if let transport = Transport(rawValue: name) { parts[transport] = value.serialized() }
        }
        return parts
    }

    /// The stored form; nil when there is no part.
    package static func write(_ parts: [Transport: [UInt8]]) -> [UInt8]? {
        guard !parts.isEmpty else { return nil }
        var members: [(String, JSONValue)] = []
        for (transport, bytes) in parts.sorted(by: { $0.key < $1.key }) {
            if let value = try? JSONValue.parse(bytes) { members.append((transport.rawValue, value)) }
        }
        return JSONValue.object(members).serialized()
    }
}

/// The FCM part of a notification: an FCM HTTP v1 `message` without its target — `notification`,
/// `android` and `data` (always last, always there, so that a delivery's receipt id is spliced
/// into it without encoding the message again). The transport adds the device's target and the
/// time to live left when it sends.
package enum FCMPart {
    /// FCM's limit on a message's data and notification text (most messages).
    package static let maximumSize = 4096
    /// FCM keeps a message at most 28 days.
    package static let maximumTTLSeconds: Int64 = 2_419_200

    /// The part made of `members` (objects FCM takes: `notification`, `android`, `data`, …), with
    /// `data` moved last; refused as FCM would refuse it (`fcm_*` codes).
    package static func make(_ members: [(String, JSONValue)]) throws(HeraldError) -> [UInt8] {
        let value = JSONValue.object(members)
        try Self.validate(value)
        return Self.ordered(Self.androidDataMerged(members)).serialized()
    }

    /// `android.data` replaces `data` on an Android device: the part is Android's alone, so its
    /// entries are laid over `data` (where the receipt id goes) and `android.data` dropped.
    static func androidDataMerged(_ members: [(String, JSONValue)]) -> [(String, JSONValue)] {
        guard let android = members.first(where: { $0.0 == "android" })?.1.objectMembers,
            let extra = android.first(where: { $0.0 == "data" })?.1.objectMembers
        else { return members }
        var data = members.last { $0.0 == "data" }?.1.objectMembers ?? []
        for (key, value) in extra {
            data.removeAll { $0.0 == key }
            data.append((key, value))
        }
        var result = members.filter { $0.0 != "data" && $0.0 != "android" }
        let rest = android.filter { $0.0 != "data" }
        if !rest.isEmpty { result.append(("android", .object(rest))) }
        result.append(("data", .object(data)))
        return result
    }

    /// `members` with `data` last (an empty one when there is none).
    static func ordered(_ members: [(String, JSONValue)]) -> JSONValue {
        var others = members.filter { $0.0 != "data" }
        others.append(("data", members.last { $0.0 == "data" }?.1 ?? .object([])))
        return .object(others)
    }

    /// What FCM refuses of a message, refused here first: data that is not a map of strings,
    /// reserved data keys, a TTL that is not `<seconds>s` up to 28 days, a priority other than
    /// normal or high, more than 4096 bytes of data and notification text.
    package static func validate(_ message: JSONValue) throws(HeraldError) {
        guard let members = message.objectMembers else { throw HeraldError.invalid("fcm must be an object", code: "bad_fcm") }
        let allowed: Set<String> = ["notification", "android", "data", "fcm_options", "fcmOptions"]
        for (name, value) in members {
            guard allowed.contains(name) else {
                throw HeraldError.invalid("fcm.\(name) is not a field Herald sends (notification, android, data, fcm_options)", code: "bad_fcm")
            }
            guard value.objectMembers != nil else { throw HeraldError.invalid("fcm.\(name) must be an object", code: "bad_fcm") }
        }
        var size = 0
        func data(_ value: JSONValue?, _ path: String) throws(HeraldError) {
            guard let value else { return }
            guard let entries = value.objectMembers else {
                throw HeraldError.invalid("\(path) must be an object of strings", code: "fcm_data_not_string")
            }
            for (key, entry) in entries {
                guard let text = entry.stringValue else {
                    throw HeraldError.invalid("\(path).\(key) is not a string: FCM data values are strings", code: "fcm_data_not_string")
                }
                let lower = key.lowercased()
                if key == "from" || key == "message_type" || lower.hasPrefix("google") || lower.hasPrefix("gcm") {
                    throw HeraldError.invalid("\(path).\(key) is a key FCM reserves (from, message_type, google…, gcm…)", code: "fcm_reserved_key")
                }
                size += key.utf8.count + text.utf8.count
            }
        }
        func text(_ value: JSONValue?) {
            for (_, entry) in value?.objectMembers ?? [] { size += entry.stringValue?.utf8.count ?? 0 }
        }
        try data(message["data"], "data")
        text(message["notification"])
        if let android = message["android"] {
            try data(android["data"], "fcm.android.data")
            text(android["notification"])
            if let priority = android["priority"] {
                guard let name = priority.stringValue, ["normal", "high"].contains(name.lowercased()) else {
                    throw HeraldError.invalid("fcm.android.priority must be normal or high", code: "bad_fcm_priority")
                }
            }
            if let ttl = android["ttl"] {
                guard let seconds = ttl.stringValue.flatMap(Self.seconds(ttl:)), seconds <= Self.maximumTTLSeconds else {
                    throw HeraldError.invalid("fcm.android.ttl must be like \"3600s\", at most 28 days", code: "bad_fcm_ttl")
                }
            }
        }
        guard size <= Self.maximumSize else {
            throw HeraldError.invalid("the FCM message's data and text take \(size) bytes; FCM takes \(Self.maximumSize)", code: "fcm_too_large")
        }
    }

    /// The seconds of an FCM duration (`"3.5s"`, whole seconds kept); nil when it is not one.
    package static func seconds(ttl: String) -> Int64? {
        guard ttl.hasSuffix("s") else { return nil }
        let number = ttl.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = Int64(parts[0]), whole >= 0, parts[0].allSatisfy(\.isASCII) else { return nil }
        if parts.count == 2 { guard (1...9).contains(parts[1].count), parts[1].allSatisfy(\.isNumber) else { return nil } }
        return whole
    }

    /// `base` with a template's variant laid over it: its title and body as the notification's
    /// (a subtitle has no place in FCM's notification), its payload fragment's keys in `data`
    /// (strings as they are, other values as JSON text).
    package static func rendered(base: JSONValue, variant: RenderedVariant) -> [UInt8] {
        var members = base.objectMembers ?? []
        var notification = members.first { $0.0 == "notification" }?.1.objectMembers ?? []
        notification.removeAll { $0.0 == "title" || $0.0 == "body" }
        if let title = variant.title { notification.insert(("title", .string(title)), at: 0) }
        if let body = variant.body { notification.insert(("body", .string(body)), at: variant.title == nil ? 0 : 1) }
        members.removeAll { $0.0 == "notification" }
        if !notification.isEmpty { members.insert(("notification", .object(notification)), at: 0) }
        if let fragment = variant.payload?.objectMembers {
            var data = members.last { $0.0 == "data" }?.1.objectMembers ?? []
            for (key, value) in fragment {
                data.removeAll { $0.0 == key }
                data.append((key, .string(value.stringValue ?? String(decoding: value.serialized(), as: UTF8.self))))
            }
            members.removeAll { $0.0 == "data" }
            members.append(("data", .object(data)))
        }
        return Self.ordered(members).serialized()
    }

    /// A part made ready to send many times: `{"message":{<target>,` + …`"data":{…` + the
    /// receipt + `}}}`. Made once per payload in a batch; each delivery adds only its target.
    package struct Frame: Sendable {
        /// The message's members after the target, up to (not including) data's closing brace.
        let middle: [UInt8]
        /// Whether data holds anything (a receipt then needs a comma).
        let dataIsEmpty: Bool

        /// `part` with its time to live set (`ttl`: seconds left, nil to leave FCM's default), the
        /// android priority, and the collapse key; nil when the part is not one Herald wrote.
        package init?(part: [UInt8], ttl: Int64?, priority: Priority?, collapseKey: String?) {
            guard var members = (try? JSONValue.parse(part))?.objectMembers else { return nil }
            var android = members.first { $0.0 == "android" }?.1.objectMembers ?? []
            if let ttl, !android.contains(where: { $0.0 == "ttl" }) {
                android.append(("ttl", .string("\(max(0, min(ttl, FCMPart.maximumTTLSeconds)))s")))
            }
            if let priority, !android.contains(where: { $0.0 == "priority" }) {
                android.append(("priority", .string(priority == .immediate ? "high" : "normal")))
            }
            if let collapseKey, !android.contains(where: { $0.0 == "collapse_key" || $0.0 == "collapseKey" }) {
                android.append(("collapse_key", .string(collapseKey)))
            }
            members.removeAll { $0.0 == "android" }
            if !android.isEmpty { members.insert(("android", .object(android)), at: 0) }
            let ordered = FCMPart.ordered(members)
            let bytes = ordered.serialized()
            // Ends in `}}`: data's brace, then the message's.
            guard bytes.count >= 2, bytes[bytes.count - 1] == UInt8(ascii: "}"), bytes[bytes.count - 2] == UInt8(ascii: "}") else { return nil }
            self.middle = Array(bytes[1..<(bytes.count - 2)])
            self.dataIsEmpty = ordered["data"]?.objectMembers?.isEmpty ?? true
        }

        /// The request body for one device: `target` is (`token` or `fid`, its value); `extra`
        /// data entries (a receipt id) go into data.
        package func body(field: String, target: Substring, extra: [(String, String)] = []) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(self.middle.count + target.utf8.count + 64)
            out.append(contentsOf: #"{"message":{""#.utf8)
            out.append(contentsOf: field.utf8)
            out.append(contentsOf: #"":"#.utf8)
            out.append(contentsOf: JSONValue.string(String(target)).serialized())
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: self.middle)
            var empty = self.dataIsEmpty
            for (key, value) in extra {
                if !empty { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: JSONValue.string(key).serialized())
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: JSONValue.string(value).serialized())
                empty = false
            }
            out.append(contentsOf: "}}}".utf8)
            return out
        }
    }
}

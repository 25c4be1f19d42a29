// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldKit

/// The body of `POST /v1/apps/{app}/notifications`, checked field by field.
enum NotificationRequest {
    static func parse(_ body: JSONValue, now: Int64) throws -> NotificationSpec {
        func bad(_ message: String, _ code: String) -> HeraldError { HeraldError.invalid(message, code: code) }
        func strings(_ value: JSONValue?, _ key: String) throws -> [String] {
            guard let array = value?.arrayValue, !array.isEmpty, array.count <= 10_000 else {
                throw bad("audience.\(key) must be an array of 1 to 10000 strings", "bad_audience")
            }
            return try array.map { item in
                guard let text = item.stringValue, !text.isEmpty else { throw bad("audience.\(key) must hold strings", "bad_audience") }
                return text
            }
        }
        // Audience
        let audience: Audience
        guard let audienceValue = body["audience"] else { throw bad("audience is required: \"all\", or {\"tokens\"|\"users\"|\"tags\": [...]}", "missing_audience") }
        if audienceValue.stringValue == "all" {
            audience = .all
        } else if audienceValue["tokens"] != nil {
            audience = .tokens(try strings(audienceValue["tokens"], "tokens").map { $0.lowercased() })
        } else if audienceValue["users"] != nil {
            audience = .users(try strings(audienceValue["users"], "users"))
        } else if let activity = audienceValue["activityId"] {
            guard let id = activity.stringValue, !id.isEmpty, id.utf8.count <= 256 else { throw bad("audience.activityId must be a string", "bad_audience") }
            audience = .activity(id)
        } else if audienceValue["tags"] != nil {
            let match = audienceValue["match"]?.stringValue ?? "any"
            guard match == "any" || match == "all" else { throw bad("audience.match must be any or all", "bad_audience") }
            audience = .tags(try strings(audienceValue["tags"], "tags"), matchAll: match == "all")
        } else {
            throw bad("audience must be \"all\", or have tokens, users, tags or activityId", "bad_audience")
        }
        // Filters
        var kinds: Set<DeviceKind> = []
        if let value = body["kinds"] {
            guard let array = value.arrayValue else { throw bad("kinds must be an array", "bad_kinds") }
            for item in array {
                guard let kind = item.stringValue.flatMap(DeviceKind.init(rawValue:)) else { throw bad("unknown kind in kinds", "bad_kinds") }
                kinds.insert(kind)
            }
        }
        var environment: APNSEnvironment?
        if let name = body["environment"] {
            guard let parsed = name.stringValue.flatMap(APNSEnvironment.init(name:)) else {
                throw bad("environment must be sandbox (development) or production", "bad_environment")
            }
            environment = parsed
        }
        var pushType: PushType?
        if let name = body["pushType"] {
            guard let parsed = name.stringValue.flatMap(PushType.init(rawValue:)) else { throw bad("unknown pushType", "bad_push_type") }
            pushType = parsed
        }
        // Users, tags and everyone mean the app's ordinary (device) tokens unless the caller names
        // other kinds or a push type: an alert for "ann" must not become a VoIP push to her
        // PushKit token (iOS ends apps that get VoIP pushes without reporting a call). Listed
        // tokens and an activity id name their devices already.
        switch audience {
        case .users, .tags, .all:
            if kinds.isEmpty, pushType == nil { kinds = [.device] }
        case .tokens, .activity:
            break
        }
        var priority: Priority?
        if let value = body["priority"] {
            guard let parsed = value.intValue.flatMap({ Priority(rawValue: Int($0)) }) else { throw bad("priority must be 10, 5 or 1", "bad_priority") }
            if let pushType, !pushType.allowedPriorities.contains(parsed) {
                throw HeraldError.unprocessable("\(pushType) pushes cannot use priority \(parsed)", code: "bad_priority")
            }
            priority = parsed
        } else if pushType == .background {
            priority = .throttled
        }
        var expiration: Int64?
        if let value = body["expiration"] {
            guard let seconds = value.intValue, seconds >= 0 else { throw bad("expiration is UNIX seconds (0 = one attempt)", "bad_expiration") }
            expiration = seconds
        } else if let value = body["ttl"] {
            guard let seconds = value.intValue, seconds >= 0, seconds <= 30 * 86_400 else { throw bad("ttl is 0 to 2592000 seconds", "bad_expiration") }
            expiration = seconds == 0 ? 0 : now / 1000 + seconds
        }
        var collapseID: String?
        if let value = body["collapseId"] {
            guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= 64 else { throw bad("collapseId is 1 to 64 bytes", "bad_collapse_id") }
            collapseID = text
        }
        var scheduledAt: Int64?
        if let value = body["scheduledAt"] {
            guard let milliseconds = value.intValue, milliseconds > 0 else { throw bad("scheduledAt is milliseconds since 1970", "bad_scheduled_at") }
            scheduledAt = milliseconds
        }
        var localTime: LocalTime?
        if let value = body["localTime"] {
            guard let parsed = value.stringValue.flatMap(LocalTime.init) else {
                throw bad("localTime is a wall-clock time like 2026-11-23T09:00 (no zone)", "bad_local_time")
            }
            localTime = parsed
        }
        var idempotencyKey: String?
        if let value = body["idempotencyKey"] {
            guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= 128 else { throw bad("idempotencyKey is 1 to 128 bytes", "bad_idempotency_key") }
            idempotencyKey = text
        }
        var payload = try self.payload(body, pushType: pushType)
        var placeholder: [UInt8]?
        var audienceKinds = kinds
        if let encrypt = body["encrypt"], !encrypt.isNull {
            guard let flag = encrypt.boolValue else { throw bad("encrypt is true or false", "bad_encrypt") }
            if flag {
                (payload, placeholder) = try self.encrypted(body, payload: payload, pushType: pushType)
                // Only alert tokens show an alert a service extension can rewrite.
                audienceKinds = kinds.isEmpty ? [.device] : kinds.intersection([.device])
                guard !audienceKinds.isEmpty else { throw bad("an encrypted notification goes to device (alert) tokens only", "bad_kinds") }
            }
        }
        var spec = NotificationSpec(
            audience: audience, kinds: audienceKinds, environment: environment, pushType: pushType, priority: priority, expiration: expiration,
            collapseID: collapseID, payload: payload, scheduledAt: scheduledAt, localTime: localTime, idempotencyKey: idempotencyKey
        )
        spec.placeholder = placeholder
        return spec
    }

    /// End-to-end encryption: the plaintext payload (what each device decrypts) and the
    /// placeholder APNs carries around each device's envelope — `placeholder.title`/`body`
    /// (default "New notification") with `mutable-content: 1`, so the extension runs.
    static func encrypted(_ body: JSONValue, payload: [UInt8], pushType: PushType?) throws -> (payload: [UInt8], placeholder: [UInt8]) {
        guard pushType == nil || pushType == .alert else {
            throw HeraldError.unprocessable("only alert notifications can be encrypted end to end", code: "bad_encrypt")
        }
        var alert: [(String, JSONValue)] = [("title", .string("New notification"))]
        if let given = body["placeholder"], !given.isNull {
            guard let members = given.objectMembers, members.allSatisfy({ ["title", "body"].contains($0.0) && $0.1.stringValue != nil }) else {
                throw HeraldError.invalid("placeholder is {\"title\", \"body\"} (strings)", code: "bad_placeholder")
            }
            alert = members
        }
        let placeholder = JSONValue.object([("aps", .object([("alert", .object(alert)), ("mutable-content", .int(1))]))]).serialized()
        let size = placeholder.count + EncryptedPayload.key.utf8.count + 4 + EncryptedPayload.envelopeSize(payloadBytes: payload.count)
        guard size <= PushType.alert.maximumPayloadSize else {
            throw HeraldError.unprocessable(
                "encrypted, this payload would be about \(size) bytes; an alert may be \(PushType.alert.maximumPayloadSize)", code: "payload_too_large"
            )
        }
        return (payload, placeholder)
    }

    /// `aps` (raw) and `data` (custom keys), with the typed fields laid over `aps`.
    static func payload(_ body: JSONValue, pushType: PushType?) throws -> [UInt8] {
        var members: [(String, JSONValue)] = []
        if let data = body["data"] {
            guard let custom = data.objectMembers else { throw HeraldError.invalid("data must be an object", code: "bad_data") }
            guard !custom.contains(where: { $0.0 == "aps" }) else { throw HeraldError.invalid("data cannot hold aps", code: "bad_data") }
            members = custom
        }
        var aps: [(String, JSONValue)] = []
        if let raw = body["aps"] {
            guard let object = raw.objectMembers else { throw HeraldError.invalid("aps must be an object", code: "bad_aps") }
            aps = object
        }
        func set(_ key: String, _ value: JSONValue) {
            aps.removeAll { $0.0 == key }
            aps.append((key, value))
        }
        var alert: [(String, JSONValue)] = []
        for (field, key) in [("title", "title"), ("subtitle", "subtitle"), ("body", "body")] {
            if let value = body[field] {
                guard let text = value.stringValue else { throw HeraldError.invalid("\(field) must be a string", code: "bad_\(field)") }
                alert.append((key, .string(text)))
            }
        }
        if !alert.isEmpty { set("alert", .object(alert)) }
        if let value = body["badge"] {
            guard let badge = value.intValue, badge >= 0 else { throw HeraldError.invalid("badge must be a number ≥ 0", code: "bad_badge") }
            set("badge", .int(badge))
        }
        for (field, key) in [("sound", "sound"), ("threadId", "thread-id"), ("category", "category"), ("interruptionLevel", "interruption-level")] {
            if let value = body[field] {
                guard let text = value.stringValue else { throw HeraldError.invalid("\(field) must be a string", code: "bad_\(field)") }
                set(key, .string(text))
            }
        }
        if let value = body["relevanceScore"] {
            guard let score = value.doubleValue, (0...1).contains(score) else { throw HeraldError.invalid("relevanceScore is 0 to 1", code: "bad_relevanceScore") }
            set("relevance-score", .double(score))
        }
        if body["mutableContent"]?.boolValue == true { set("mutable-content", .int(1)) }
        if body["contentAvailable"]?.boolValue == true { set("content-available", .int(1)) }
        let json = JSONValue.object([("aps", .object(aps))] + members)
        guard let pushType else {
            // Push type by device kind: each kind's rules differ, so only the common ones here
            // (JSON object, size within the smallest limit); the client checks each send again.
            let bytes = json.serialized()
            do {
                try PayloadRules.checkSize(bytes.count, pushType: .alert)
            } catch {
                throw HeraldError.unprocessable(error.description, code: error.code.description)
            }
            return bytes
        }
        let typed: Payload
        do {
            typed = try Payload(json: json)
            return try typed.encode(for: pushType)
        } catch {
            throw HeraldError.unprocessable(error.description, code: error.code.description)
        }
    }
}

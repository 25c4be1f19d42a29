// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import HeraldAPI
import HeraldCore

/// The body of `POST /v1/apps/{app}/notifications`, checked: what can never be sent is refused
/// here with a stable code, before anything is written.
///
/// Times Herald accepts (milliseconds for `scheduledAt`, UNIX seconds for `expiration`), with
/// `now` the server's clock:
/// - `scheduledAt`: from ``scheduledPast`` before now (a client's clock or queue may lag; a
///   time in the past means at once) to ``horizon`` after now. Older is a mistake such as
///   seconds given for milliseconds; later, Herald does not hold a notification that long.
/// - `expiration`: 0 (one attempt), or from the send time (`scheduledAt`, or now) to
///   ``horizon`` after it, since APNs stores a notification for at most 30 days; `ttl` is 0 to
///   30 days from now and must also reach the send time.
enum NotificationRequest {
    /// How far ahead a notification may be scheduled, and how long APNs keeps one: 30 days (ms).
    static let horizon: Int64 = 30 * 86_400_000
    /// How far in the past `scheduledAt` may be: 24 hours (ms).
    static let scheduledPast: Int64 = 86_400_000

    /// A body the dashboard built as JSON: decoded as the API decodes it, then checked.
    static func parse(_ body: JSONValue, now: Int64) throws -> NotificationSpec {
        try self.spec(try APIRequestDecoder.decode(SendRequest.self, json: body), now: now)
    }

    static func spec(_ body: SendRequest, now: Int64) throws -> NotificationSpec {
        func bad(_ message: String, _ code: String) -> HeraldError { HeraldError.invalid(message, code: code) }
        let audience = try self.audience(body.audience)
        // Filters
        var kinds: Set<DeviceKind> = []
        for name in body.kinds ?? [] {
            guard let kind = DeviceKind(rawValue: name) else { throw bad("unknown kind '\(name)' in kinds", "bad_kinds") }
            kinds.insert(kind)
        }
        var environment: APNSEnvironment?
        if let name = body.environment {
            guard let parsed = APNSEnvironment(name: name) else {
                throw bad("environment must be sandbox (development) or production", "bad_environment")
            }
            environment = parsed
        }
        var pushType: PushType?
        if let name = body.pushType {
            guard let parsed = PushType(rawValue: name) else { throw bad("unknown pushType '\(name)'", "bad_push_type") }
            pushType = parsed
        }
        if case .channel = audience {
            // One broadcast, sent at once: Live Activity pushes only, nothing that picks devices
            // or waits, and no idempotency key (it is sent before it is recorded).
            guard pushType == nil || pushType == .liveactivity else {
                throw bad("a channel carries Live Activity pushes only (pushType liveactivity)", "bad_push_type")
            }
            pushType = .liveactivity
            let refused: [(String, Bool)] = [
                ("kinds", body.kinds != nil), ("environment", body.environment != nil), ("scheduledAt", body.scheduledAt != nil),
                ("localTime", body.localTime != nil), ("encrypt", body.encrypt == true), ("idempotencyKey", body.idempotencyKey != nil),
                ("dryRun", body.dryRun == true), ("collapseId", body.collapseId != nil),
            ]
            if let field = refused.first(where: \.1)?.0 {
                throw bad("\(field) does not go with a channel audience (one broadcast, sent at once)", "bad_audience")
            }
        }
        // Users, tags and everyone mean the app's ordinary (device) tokens unless the caller names
        // other kinds or a push type: an alert for "ann" must not become a VoIP push to her
        // PushKit token (iOS ends apps that get VoIP pushes without reporting a call). Listed
        // tokens and an activity id name their devices already.
        switch audience {
        case .users, .tags, .all:
            if kinds.isEmpty, pushType == nil { kinds = [.device] }
        case .tokens, .activity, .channel:
            break
        }
        if let pushType {
            // The kinds the audience can reach (named, or every kind; an activity's update
            // tokens only), and whether any of them takes this push type.
            var reachable = kinds.isEmpty ? Set(DeviceKind.allCases) : kinds
            if case .activity = audience { reachable.formIntersection([.liveActivity]) }
            guard reachable.contains(where: { $0.pushTypes.contains(pushType) }) else {
                let takers = DeviceKind.allCases.filter { $0.pushTypes.contains(pushType) }.map(\.rawValue)
                throw bad(
                    takers.isEmpty
                        ? "no kind of token Herald registers takes pushType \(pushType.rawValue)"
                        : "pushType \(pushType.rawValue) goes only to \(takers.joined(separator: ", ")) tokens, which this audience does not reach",
                    "bad_push_type"
                )
            }
        }
        var priority: Priority?
        if let value = body.priority {
            guard let parsed = Priority(rawValue: value) else { throw HeraldError.unprocessable("priority must be 10, 5 or 1", code: "bad_priority") }
            if let pushType, !pushType.allows(parsed) {
                throw HeraldError.unprocessable("\(pushType) pushes cannot use priority \(parsed)", code: "bad_priority")
            }
            priority = parsed
        } else if pushType == .background {
            priority = .throttled
        } else if case .channel = audience {
            // Priority 10 spends the app's Live Activity budget: frequent updates go at 5 unless asked.
            priority = .throttled
        }
        if let milliseconds = body.scheduledAt {
            guard milliseconds > 0 else { throw bad("scheduledAt is milliseconds since 1970", "bad_scheduled_at") }
            guard milliseconds >= now - Self.scheduledPast, milliseconds <= now + Self.horizon else {
                throw bad(
                    "scheduledAt is milliseconds since 1970, from 24 hours ago to 30 days ahead (\(now - Self.scheduledPast) to \(now + Self.horizon))",
                    "bad_scheduled_at"
                )
            }
        }
        // The earliest a send can happen, in UNIX seconds: an expiration before it could never be met.
        let sendSeconds = max(now, body.scheduledAt ?? now) / 1000
        var expiration: Int64?
        if let seconds = body.expiration {
            guard seconds == 0 || (sendSeconds...(sendSeconds + Self.horizon / 1000)).contains(seconds) else {
                throw bad(
                    "expiration is 0 (one attempt) or UNIX seconds from the send time to 30 days after it (\(sendSeconds) to \(sendSeconds + Self.horizon / 1000))",
                    "bad_expiration"
                )
            }
            expiration = seconds
        } else if let seconds = body.ttl {
            guard seconds >= 0, seconds <= Self.horizon / 1000 else { throw bad("ttl is 0 to 2592000 seconds", "bad_expiration") }
            expiration = seconds == 0 ? 0 : now / 1000 + seconds
            if seconds > 0, now / 1000 + seconds < sendSeconds { throw bad("ttl ends before scheduledAt", "bad_expiration") }
        }
        if let text = body.collapseId, text.isEmpty || text.utf8.count > 64 { throw bad("collapseId is 1 to 64 bytes", "bad_collapse_id") }
        var localTime: LocalTime?
        if let text = body.localTime {
            guard let parsed = LocalTime(text) else { throw bad("localTime is a wall-clock time like 2026-11-23T09:00 (no zone)", "bad_local_time") }
            localTime = parsed
        }
        if let text = body.idempotencyKey, text.isEmpty || text.utf8.count > 128 {
            throw bad("idempotencyKey is 1 to 128 bytes", "bad_idempotency_key")
        }
        var onUnknownOutcome = UnknownOutcomeAction.default
        if let text = body.onUnknownOutcome {
            guard let parsed = UnknownOutcomeAction(rawValue: text) else {
                throw bad("onUnknownOutcome is resend (the default: at most one resend) or drop (never resent)", "bad_on_unknown_outcome")
            }
            onUnknownOutcome = parsed
        }
        let json = try self.payloadJSON(body)
        var payload = try self.encode(json, pushType: pushType)
        var placeholder: [UInt8]?
        var audienceKinds = kinds
        if body.encrypt == true {
            (payload, placeholder) = try self.encrypted(body.placeholder, payload: payload, pushType: pushType)
            // Only alert tokens show an alert a service extension can rewrite.
            audienceKinds = kinds.isEmpty ? [.device] : kinds.intersection([.device])
            guard !audienceKinds.isEmpty else { throw bad("an encrypted notification goes to device (alert) tokens only", "bad_kinds") }
        }
        // A template's default variant always shows something (saving one without title or body is refused).
        // Sent to FCM devices alone, the APNs payload is never shown: FCM's part is checked instead.
        let fcmOnly = body.transports.map { Set($0) == ["fcm"] } ?? false
        let showsNothingOn =
            body.template == nil && !fcmOnly ? try self.requireContent(json, pushType: pushType, audience: audience, kinds: audienceKinds) : []
        var spec = NotificationSpec(
            audience: audience, kinds: audienceKinds, environment: environment, pushType: pushType, priority: priority, expiration: expiration,
            collapseID: body.collapseId, payload: payload, scheduledAt: body.scheduledAt, localTime: localTime, idempotencyKey: body.idempotencyKey
        )
        spec.placeholder = placeholder
        spec.showsNothingOn = showsNothingOn
        try Self.platforms(body, json: json, into: &spec)
        spec.onUnknownOutcome = onUnknownOutcome
        spec.ignoresQuietHours = !QuietHours.applies(
            interruptionLevel: json["aps"]?["interruption-level"]?.stringValue, ignoreQuietHours: body.ignoreQuietHours == true)
        switch body.frequencyCap {
        case nil, "fail": spec.deferOverCap = false
        case "defer": spec.deferOverCap = true
        default: throw bad("frequencyCap is fail (the default: over the app's cap, not sent) or defer (sent when there is room)", "bad_frequencyCap")
        }
        spec.category = json["aps"]?["category"]?.stringValue
        if let throttle = body.throttlePerMinute {
            guard throttle == 0 || Throttle.limits.contains(throttle) else {
                throw bad("throttlePerMinute is 1 to 100000 deliveries a minute, or 0 for none (not even the app's default)", "bad_throttlePerMinute")
            }
            spec.throttleRequested = throttle
        }
        return spec
    }

    static func audience(_ selector: AudienceSelector?) throws -> Audience {
        func bad(_ message: String) -> HeraldError { HeraldError.invalid(message, code: "bad_audience") }
        guard let selector else {
            throw HeraldError.invalid("audience is required: \"all\", or {\"tokens\"|\"users\"|\"tags\": [...]}", code: "missing_audience")
        }
        if selector.all { return .all }
        let named = [selector.tokens != nil, selector.users != nil, selector.tags != nil, selector.activityId != nil, selector.channel != nil]
            .filter { $0 }.count
        guard named == 1 else { throw bad("audience must be \"all\", or have exactly one of tokens, users, tags, activityId or channel") }
        guard selector.match == nil || selector.tags != nil else { throw bad("audience.match goes with audience.tags") }
        func strings(_ values: [String], _ key: String) throws -> [String] {
            guard !values.isEmpty, values.count <= 10_000 else { throw bad("audience.\(key) must be an array of 1 to 10000 strings") }
            guard values.allSatisfy({ !$0.isEmpty }) else { throw bad("audience.\(key) must hold strings") }
            return values
        }
        if let tokens = selector.tokens {
            // Each a device's identifier (hex, fcm:…, fid:…): one that is not could never be sent to.
            return .tokens(
                try strings(tokens, "tokens").enumerated().map { index, text in
                    guard let stored = PushAddress.storedIdentifier(text) else {
                        throw HeraldError.invalid(
                            "audience.tokens[\(index)] is not a device: an APNs token (hex), fcm:<token> or fid:<FID>", code: "bad_device_token")
                    }
                    return stored
                }
            )
        }
        if let users = selector.users { return .users(try strings(users, "users")) }
        if let channel = selector.channel { return .channel(try ChannelsController.channelID(channel).rawValue) }
        if let id = selector.activityId {
            guard !id.isEmpty, id.utf8.count <= 256 else { throw bad("audience.activityId must be a string") }
            return .activity(id)
        }
        let match = selector.match ?? "any"
        guard match == "any" || match == "all" else { throw bad("audience.match must be any or all") }
        return .tags(try strings(selector.tags ?? [], "tags"), matchAll: match == "all")
    }

    /// Whether `json` would show or do nothing as a push of `pushType`: an alert or a background
    /// push needs an alert, a badge, a sound or `content-available`; a Live Activity push its
    /// content state or an event; a widgets or controls push `content-changed`. Push types whose
    /// payload is the app's own (VoIP, complication, file provider, location, push to talk) take
    /// data alone: a call invitation is data only.
    static func showsNothing(_ json: JSONValue, as pushType: PushType) -> Bool {
        let aps = Set((json["aps"]?.objectMembers ?? []).map(\.0))
        switch pushType {
        case .alert, .background: return aps.isDisjoint(with: ["alert", "badge", "sound", "content-available", "content-state", "event"])
        case .liveactivity: return aps.isDisjoint(with: ["content-state", "event"])
        case .widgets, .controls: return json["aps"]?["content-changed"]?.boolValue != true
        default: return false
        }
    }

    /// Refuses (`empty_notification`) a notification that would show nothing, judged per push
    /// type: the one named, else each kind of token the audience reaches (named kinds; users, tags
    /// and everyone mean device tokens unless kinds are named). For a list of tokens without a
    /// push type the kinds are known only once the tokens are looked up: the kinds it would show
    /// nothing on are returned, for ``requireContent(_:appID:store:)``.
    static func requireContent(_ json: JSONValue, pushType: PushType?, audience: Audience, kinds: Set<DeviceKind>) throws -> Set<DeviceKind> {
        if case .activity = audience { return [] }
        if case .channel = audience { return [] }
        if let pushType {
            if Self.showsNothing(json, as: pushType) { throw Self.empty(pushType: pushType) }
            return []
        }
        let candidates = kinds.isEmpty ? Set(DeviceKind.allCases) : kinds
        let empty = candidates.filter { Self.showsNothing(json, as: $0.defaultPushType) }
        if kinds.isEmpty { return empty }
        if let kind = empty.sorted(by: { $0.rawValue < $1.rawValue }).first { throw Self.empty(pushType: kind.defaultPushType, kind: kind) }
        return []
    }

    /// For a list of tokens (``NotificationSpec/showsNothingOn``): refused when one of its active
    /// tokens is of a kind the payload would show nothing on.
    static func requireContent(_ spec: NotificationSpec, appID: String, store: any HeraldStore) async throws {
        guard !spec.showsNothingOn.isEmpty else { return }
        let reached = try await store.audienceKinds(appID: appID, targeting: spec.targeting)
        let empty = reached.filter { $0.value > 0 && spec.showsNothingOn.contains($0.key) }.keys
        if let kind = empty.sorted(by: { $0.rawValue < $1.rawValue }).first { throw Self.empty(pushType: kind.defaultPushType, kind: kind) }
    }

    private static func empty(pushType: PushType, kind: DeviceKind? = nil) -> HeraldError {
        let what: String
        switch pushType {
        case .liveactivity: what = "give contentState or an event"
        case .widgets, .controls: what = "set contentChanged (aps.content-changed: true)"
        default: what = "give a title, subtitle, body, badge or sound, or contentAvailable for a background update"
        }
        let whom = kind.map { " for \($0.rawValue) tokens (\(pushType.rawValue) pushes)" } ?? " as a \(pushType.rawValue) push"
        return HeraldError.invalid("the notification has nothing to show\(whom): \(what)", code: "empty_notification")
    }

    /// End-to-end encryption: the plaintext payload (what each device decrypts) and the
    /// placeholder APNs carries around each device's envelope — `placeholder.title`/`body`
    /// (default "New notification") with `mutable-content: 1`, so the extension runs.
    static func encrypted(_ given: SendRequest.Placeholder?, payload: [UInt8], pushType: PushType?) throws -> (payload: [UInt8], placeholder: [UInt8])
    {
        guard pushType == nil || pushType == .alert else {
            throw HeraldError.unprocessable("only alert notifications can be encrypted end to end", code: "encrypt_not_allowed")
        }
        var alert: [(String, JSONValue)] = [("title", .string("New notification"))]
        if let given {
            alert = [("title", given.title), ("body", given.body)].compactMap { key, value in value.map { (key, JSONValue.string($0)) } }
        }
        let placeholder = JSONValue.object([("aps", .object([("alert", .object(alert)), ("mutable-content", .int(1))]))]).serialized()
        let size = placeholder.count + EncryptedPayload.key.utf8.count + 4 + EncryptedPayload.envelopeSize(payloadBytes: payload.count)
        guard size <= PushType.alert.maximumPayloadSize else {
            throw HeraldError.unprocessable(
                "encrypted, this payload would be about \(size) bytes; an alert may be \(PushType.alert.maximumPayloadSize)",
                code: "payload_too_large"
            )
        }
        return (payload, placeholder)
    }

    /// `aps` (raw) and `data` (custom keys), with the typed fields laid over `aps`.
    static func payloadJSON(_ body: SendRequest) throws -> JSONValue {
        var members: [(String, JSONValue)] = []
        if let data = body.data {
            guard case .object(let custom) = data else { throw HeraldError.invalid("data must be an object", code: "bad_data") }
            guard !custom.contains(where: { $0.key == "aps" }) else { throw HeraldError.invalid("data cannot hold aps", code: "bad_data") }
            guard !custom.contains(where: { $0.key == ReceiptBatch.payloadKey }) else {
                throw HeraldError.invalid("data cannot hold hr (the key of the receipt id Herald adds)", code: "bad_data")
            }
            members = custom.map { ($0.key, JSONValue($0.value)) }
        }
        var aps: [(String, JSONValue)] = []
        if let raw = body.aps {
            guard case .object(let object) = raw else { throw HeraldError.invalid("aps must be an object", code: "bad_aps") }
            aps = object.map { ($0.key, JSONValue($0.value)) }
        }
        func set(_ key: String, _ value: JSONValue) {
            aps.removeAll { $0.0 == key }
            aps.append((key, value))
        }
        let alert = [("title", body.title), ("subtitle", body.subtitle), ("body", body.body)].compactMap { key, value in
            value.map { (key, JSONValue.string($0)) }
        }
        if !alert.isEmpty { set("alert", .object(alert)) }
        if let badge = body.badge {
            guard badge >= 0 else { throw HeraldError.invalid("badge must be a number ≥ 0", code: "bad_badge") }
            set("badge", .int(badge))
        }
        for (key, value) in [
            ("sound", body.sound), ("thread-id", body.threadId), ("category", body.category), ("interruption-level", body.interruptionLevel),
        ] {
            if let value { set(key, .string(value)) }
        }
        if let score = body.relevanceScore {
            guard (0...1).contains(score) else { throw HeraldError.invalid("relevanceScore is 0 to 1", code: "bad_relevanceScore") }
            set("relevance-score", .double(score))
        }
        if body.mutableContent == true { set("mutable-content", .int(1)) }
        // The common image and link: keys beside aps (an image for the app's service extension to fetch).
        if let image = body.image {
            guard image.hasPrefix("https://"), image.utf8.count <= 1024 else {
                throw HeraldError.invalid("image is an https URL of at most 1024 bytes", code: "bad_image")
            }
            set("mutable-content", .int(1))
            members.removeAll { $0.0 == "image" }
            members.append(("image", .string(image)))
        }
        if let link = body.link {
            guard !link.isEmpty, link.utf8.count <= 1024 else { throw HeraldError.invalid("link is 1 to 1024 bytes", code: "bad_link") }
            members.removeAll { $0.0 == "link" }
            members.append(("link", .string(link)))
        }
        if body.contentAvailable == true { set("content-available", .int(1)) }
        return JSONValue.object([("aps", .object(aps))] + members)
    }

    /// The payload's bytes, checked against `pushType`'s rules (or, with none, the rules every kind shares).
    static func encode(_ json: JSONValue, pushType: PushType?) throws -> [UInt8] {
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
        do {
            return try Payload(json: json).encode(for: pushType)
        } catch {
            throw HeraldError.unprocessable(error.description, code: error.code.description)
        }
    }
}

extension JSONValue {
    /// A sender's free-form JSON (`data`, `aps`) as Herald's own value.
    init(_ json: JSON) {
        switch json {
        case .null: self = .null
        case .bool(let bool): self = .bool(bool)
        case .int(let int): self = .int(int)
        case .double(let double): self = .double(double)
        case .string(let string): self = .string(string)
        case .array(let items): self = .array(items.map(JSONValue.init))
        case .object(let members): self = .object(members.map { ($0.key, JSONValue($0.value)) })
        }
    }
}

// SPDX-License-Identifier: Apache-2.0

/// The `aps` dictionary: every key of Apple's payload reference, Live Activity keys included.
public struct APS: Sendable, Hashable {
    public var alert: Alert?
    public var badge: Int?
    public var sound: Sound?
    public var threadID: String?
    public var category: String?
    public var contentAvailable: Bool
    public var mutableContent: Bool
    public var targetContentID: String?
    public var interruptionLevel: InterruptionLevel?
    public var relevanceScore: Double?
    public var filterCriteria: String?

    // Live Activities
    /// UNIX seconds of the update; the system shows the newest.
    public var timestamp: Int64?
    public var event: LiveActivityEvent?
    public var contentState: JSONValue?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    public var attributesType: String?
    public var attributes: JSONValue?
    /// iOS 18: ask for an update token for an activity started by push.
    public var inputPushToken: Bool
    /// iOS 18: subscribe an activity started by push to this broadcast channel (base64 id).
    public var inputPushChannel: String?

    /// `true` on `widgets` and `controls` pushes.
    public var contentChanged: Bool?

    /// Keys this type does not name, kept in order.
    public var extra: [(String, JSONValue)]

    public init(
        alert: Alert? = nil, badge: Int? = nil, sound: Sound? = nil, threadID: String? = nil,
        category: String? = nil, contentAvailable: Bool = false, mutableContent: Bool = false,
        targetContentID: String? = nil, interruptionLevel: InterruptionLevel? = nil,
        relevanceScore: Double? = nil, filterCriteria: String? = nil, timestamp: Int64? = nil,
        event: LiveActivityEvent? = nil, contentState: JSONValue? = nil, staleDate: Int64? = nil,
        dismissalDate: Int64? = nil, attributesType: String? = nil, attributes: JSONValue? = nil,
        inputPushToken: Bool = false, inputPushChannel: String? = nil, contentChanged: Bool? = nil,
        extra: [(String, JSONValue)] = []
    ) {
        self.alert = alert
        self.badge = badge
        self.sound = sound
        self.threadID = threadID
        self.category = category
        self.contentAvailable = contentAvailable
        self.mutableContent = mutableContent
        self.targetContentID = targetContentID
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.filterCriteria = filterCriteria
        self.timestamp = timestamp
        self.event = event
        self.contentState = contentState
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.attributesType = attributesType
        self.attributes = attributes
        self.inputPushToken = inputPushToken
        self.inputPushChannel = inputPushChannel
        self.contentChanged = contentChanged
        self.extra = extra
    }

    public static func == (lhs: APS, rhs: APS) -> Bool { lhs.json == rhs.json }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.json) }

    public var json: JSONValue {
        var m: [(String, JSONValue)] = []
        if let alert { m.append(("alert", alert.json)) }
        if let badge { m.append(("badge", .int(Int64(badge)))) }
        if let sound { m.append(("sound", sound.json)) }
        if let threadID { m.append(("thread-id", .string(threadID))) }
        if let category { m.append(("category", .string(category))) }
        if self.contentAvailable { m.append(("content-available", 1)) }
        if self.mutableContent { m.append(("mutable-content", 1)) }
        if let targetContentID { m.append(("target-content-id", .string(targetContentID))) }
        if let interruptionLevel { m.append(("interruption-level", .string(interruptionLevel.rawValue))) }
        if let relevanceScore { m.append(("relevance-score", .double(relevanceScore))) }
        if let filterCriteria { m.append(("filter-criteria", .string(filterCriteria))) }
        if let timestamp { m.append(("timestamp", .int(timestamp))) }
        if let event { m.append(("event", .string(event.rawValue))) }
        if let contentState { m.append(("content-state", contentState)) }
        if let staleDate { m.append(("stale-date", .int(staleDate))) }
        if let dismissalDate { m.append(("dismissal-date", .int(dismissalDate))) }
        if let attributesType { m.append(("attributes-type", .string(attributesType))) }
        if let attributes { m.append(("attributes", attributes)) }
        if self.inputPushToken { m.append(("input-push-token", 1)) }
        if let inputPushChannel { m.append(("input-push-channel", .string(inputPushChannel))) }
        if let contentChanged { m.append(("content-changed", .bool(contentChanged))) }
        m.append(contentsOf: self.extra)
        return .object(m)
    }

    /// Reads a raw `aps` dictionary, checking the type of every key it knows.
    public init(json: JSONValue) throws(APNSValidationError) {
        guard case .object(let members) = json else { throw APNSValidationError(.payloadRule, "'aps' must be a dictionary") }
        self.init()
        func rule(_ key: String, _ expected: String) -> APNSValidationError {
            APNSValidationError(.payloadRule, "aps.\(key) must be \(expected)")
        }
        func string(_ key: String, _ value: JSONValue) throws(APNSValidationError) -> String {
            guard let s = value.stringValue else { throw rule(key, "a string") }
            return s
        }
        func integer(_ key: String, _ value: JSONValue) throws(APNSValidationError) -> Int64 {
            guard let i = value.intValue else { throw rule(key, "an integer") }
            return i
        }
        func flag(_ key: String, _ value: JSONValue) throws(APNSValidationError) -> Bool {
            guard let i = value.intValue, i == 0 || i == 1 else { throw rule(key, "0 or 1") }
            return i == 1
        }
        for (key, value) in members {
            switch key {
            case "alert":
                switch value {
                case .string(let text): self.alert = .body(text)
                case .object: self.alert = .fields(try AlertFields(json: value))
                default: throw rule(key, "a string or a dictionary")
                }
            case "badge":
                let badge = try integer(key, value)
                guard let fits = Int(exactly: badge) else { throw rule(key, "an integer") }
                self.badge = fits
            case "sound":
                switch value {
                case .string(let name): self.sound = .named(name)
                case .object:
                    guard let name = value["name"]?.stringValue else { throw rule("sound.name", "a string") }
                    let volume = value["volume"]?.doubleValue ?? 1
                    self.sound = .critical(name: name, volume: volume)
                    if let critical = value["critical"], critical.intValue != 1 && critical.intValue != 0 {
                        throw rule("sound.critical", "0 or 1")
                    }
                default: throw rule(key, "a string or a dictionary")
                }
            case "thread-id": self.threadID = try string(key, value)
            case "category": self.category = try string(key, value)
            case "content-available": self.contentAvailable = try flag(key, value)
            case "mutable-content": self.mutableContent = try flag(key, value)
            case "target-content-id": self.targetContentID = try string(key, value)
            case "interruption-level":
                guard let level = InterruptionLevel(rawValue: try string(key, value)) else {
                    throw rule(key, "one of passive, active, time-sensitive, critical")
                }
                self.interruptionLevel = level
            case "relevance-score":
                guard let score = value.doubleValue else { throw rule(key, "a number") }
                self.relevanceScore = score
            case "filter-criteria": self.filterCriteria = try string(key, value)
            case "timestamp": self.timestamp = try integer(key, value)
            case "event":
                guard let event = LiveActivityEvent(rawValue: try string(key, value)) else {
                    throw rule(key, "one of start, update, end")
                }
                self.event = event
            case "content-state":
                guard value.objectMembers != nil else { throw rule(key, "a dictionary") }
                self.contentState = value
            case "stale-date": self.staleDate = try integer(key, value)
            case "dismissal-date": self.dismissalDate = try integer(key, value)
            case "attributes-type": self.attributesType = try string(key, value)
            case "attributes":
                guard value.objectMembers != nil else { throw rule(key, "a dictionary") }
                self.attributes = value
            case "input-push-token": self.inputPushToken = try flag(key, value)
            case "input-push-channel": self.inputPushChannel = try string(key, value)
            case "content-changed":
                guard let changed = value.boolValue else { throw rule(key, "true or false") }
                self.contentChanged = changed
            default: self.extra.append((key, value))
            }
        }
    }
}

extension AlertFields {
    init(json: JSONValue) throws(APNSValidationError) {
        self.init()
        for (key, value) in json.objectMembers ?? [] {
            func string() throws(APNSValidationError) -> String {
                guard let s = value.stringValue else {
                    throw APNSValidationError(.payloadRule, "aps.alert.\(key) must be a string")
                }
                return s
            }
            func strings() throws(APNSValidationError) -> [String] {
                guard let array = value.arrayValue, array.allSatisfy({ $0.stringValue != nil }) else {
                    throw APNSValidationError(.payloadRule, "aps.alert.\(key) must be an array of strings")
                }
                return array.compactMap(\.stringValue)
            }
            switch key {
            case "title" where value.stringValue != nil: self.title = try string()
            case "subtitle" where value.stringValue != nil: self.subtitle = try string()
            case "body" where value.stringValue != nil: self.body = try string()
            case "launch-image": self.launchImage = try string()
            case "title-loc-key": self.titleLocKey = try string()
            case "title-loc-args": self.titleLocArgs = try strings()
            case "subtitle-loc-key": self.subtitleLocKey = try string()
            case "subtitle-loc-args": self.subtitleLocArgs = try strings()
            case "loc-key": self.locKey = try string()
            case "loc-args": self.locArgs = try strings()
            default: self.extra[key] = value  // e.g. Live Activity {"loc-key":…} titles, or sound
            }
        }
    }
}

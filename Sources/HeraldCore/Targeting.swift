// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// Who a notification goes to, as stored with it: the audience and its filters. A notification
/// is expanded into deliveries chunk by chunk after it is accepted, possibly by another process,
/// so everything needed to find its devices again travels with it.
package struct Targeting: Sendable, Hashable {
    package var audience: Audience
    package var kinds: Set<DeviceKind>
    package var environment: APNSEnvironment?
    package var pushType: PushType?
    package var localTime: LocalTime?
    /// End-to-end encrypted: only devices with a public key.
    package var encrypted: Bool
    /// Only push-to-start tokens registered for this `ActivityAttributes` type (a Live Activity
    /// start: a token starts activities of its own type only).
    package var attributesType: String?
    /// Only devices reached through these transports (every one when empty).
    package var transports: Set<Transport>

    package init(
        audience: Audience, kinds: Set<DeviceKind> = [], environment: APNSEnvironment? = nil, pushType: PushType? = nil, localTime: LocalTime? = nil,
        encrypted: Bool = false, attributesType: String? = nil, transports: Set<Transport> = []
    ) {
        self.transports = transports
        self.encrypted = encrypted
        self.attributesType = attributesType
        self.audience = audience
        self.kinds = kinds
        self.environment = environment
        self.pushType = pushType
        self.localTime = localTime
    }

    /// The kinds a device may have to be included: the requested ones, narrowed to those that
    /// can receive the fixed push type when one is given; empty means every kind.
    package var eligibleKinds: Set<DeviceKind> {
        guard let fixed = self.pushType else { return self.kinds }
        let able = Set(DeviceKind.allCases.filter { $0.pushTypes.contains(fixed) })
        return self.kinds.isEmpty ? able : self.kinds.intersection(able)
    }

    /// The stored form (a JSON object).
    package var jsonString: String { self.jsonString(listsAsCounts: false) }

    /// The stored form; with `listsAsCounts`, a list of tokens or users is kept as its length
    /// only (`{"tokenCount": 1000}`), for a notification whose list was resolved to device ids
    /// already — that form describes the audience but cannot be read back into a `Targeting`.
    package func jsonString(listsAsCounts: Bool) -> String {
        var members: [(String, JSONValue)] = []
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        switch self.audience {
        case .all: members.append(("all", .bool(true)))
        case .tokens(let tokens): members.append(listsAsCounts ? ("tokenCount", .int(Int64(tokens.count))) : ("tokens", strings(tokens)))
        case .users(let users): members.append(listsAsCounts ? ("userCount", .int(Int64(users.count))) : ("users", strings(users)))
        case .activity(let id): members.append(("activity", .string(id)))
        case .channel(let id): members.append(("channel", .string(id)))
        case .tags(let tags, let matchAll): members += [("tags", strings(tags)), ("matchAll", .bool(matchAll))]
        }
        if !self.kinds.isEmpty { members.append(("kinds", strings(self.kinds.map(\.rawValue).sorted()))) }
        if let environment = self.environment { members.append(("environment", .string(environment.rawValue))) }
        if let pushType = self.pushType { members.append(("pushType", .string(pushType.rawValue))) }
        if let localTime = self.localTime { members.append(("localTime", .string(localTime.description))) }
        if self.encrypted { members.append(("encrypted", .bool(true))) }
        if let attributesType = self.attributesType { members.append(("attributesType", .string(attributesType))) }
        if !self.transports.isEmpty { members.append(("transports", strings(self.transports.map(\.rawValue).sorted()))) }
        return JSONValue.object(members).jsonString
    }

    /// Reads the stored form back; nil when it is not one Herald wrote.
    package init?(jsonString: String) {
        guard let value = try? JSONValue.parse(jsonString) else { return nil }
        func strings(_ key: String) -> [String]? { value[key]?.arrayValue?.compactMap(\.stringValue) }
        if value["all"]?.boolValue == true {
            self.audience = .all
        } else if let tokens = strings("tokens") {
            self.audience = .tokens(tokens)
        } else if let users = strings("users") {
            self.audience = .users(users)
        } else if let activity = value["activity"]?.stringValue {
            self.audience = .activity(activity)
        } else if let channel = value["channel"]?.stringValue {
            self.audience = .channel(channel)
        } else if let tags = strings("tags") {
            self.audience = .tags(tags, matchAll: value["matchAll"]?.boolValue ?? false)
        } else {
            return nil
        }
        self.kinds = Set((strings("kinds") ?? []).compactMap(DeviceKind.init(rawValue:)))
        self.environment = value["environment"]?.stringValue.flatMap(APNSEnvironment.init(rawValue:))
        self.pushType = value["pushType"]?.stringValue.flatMap(PushType.init(rawValue:))
        self.localTime = value["localTime"]?.stringValue.flatMap(LocalTime.init)
        self.encrypted = value["encrypted"]?.boolValue ?? false
        self.attributesType = value["attributesType"]?.stringValue
        self.transports = Set((strings("transports") ?? []).compactMap(Transport.init(rawValue:)))
    }

    /// The condition on a device's route (`d.environment`), nil when every route is in: the
    /// APNs environment asked for, the transports the notification has something for.
    package var routeCondition: String? {
        if let environment = self.environment {
            // An APNs environment narrows APNs devices; other transports stay in when asked for.
            var values = ["'\(environment.rawValue)'"]
            let others = (self.transports.isEmpty ? Set(Transport.allCases) : self.transports).subtracting([.apns])
            values += others.sorted().flatMap(\.routes).map { "'\($0.stored)'" }
            return "d.environment IN (\(values.joined(separator: ", ")))"
        }
        return Transport.routeCondition(self.transports)
    }
}

extension NotificationSpec {
    package var targeting: Targeting {
        Targeting(
            audience: self.audience, kinds: self.kinds, environment: self.environment, pushType: self.pushType, localTime: self.localTime,
            encrypted: self.placeholder != nil, attributesType: self.attributesType, transports: self.transports
        )
    }
}

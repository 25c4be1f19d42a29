// SPDX-License-Identifier: Apache-2.0
import APNSModels

extension ControlAPI {
    // MARK: reading requests

    static func split(_ uri: String) -> (path: String, query: [String: String]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = parts.first, !name.isEmpty else { continue }
            query[percentDecode(name)] = parts.count > 1 ? percentDecode(parts[1]) : ""
        }
        return (String(uri[..<mark]), query)
    }

    static func percentDecode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
            } else if byte == UInt8(ascii: "+") {
                bytes.append(byte)  // '+' is literal in paths and in base64 channel ids
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func object(_ body: [UInt8]) throws -> JSONValue {
        guard !body.isEmpty else { throw Failure.invalid("the request needs a JSON object body") }
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw Failure.invalid("the body is not JSON: \(error)")
        }
        guard value.objectMembers != nil else { throw Failure.invalid("the body must be a JSON object") }
        return value
    }

    static func requiredString(_ object: JSONValue, _ key: String) throws -> String {
        guard let value = object[key] else { throw Failure.invalid("\(key) is required") }
        guard let text = value.stringValue, !text.isEmpty else { throw Failure.invalid("\(key) must be a non-empty string") }
        return text
    }

    static func optionalBool(_ object: JSONValue, _ key: String) throws -> Bool? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let flag = value.boolValue else { throw Failure.invalid("\(key) must be true or false") }
        return flag
    }

    static func strings(_ value: JSONValue?, _ key: String) throws -> [String]? {
        guard let value, !value.isNull else { return nil }
        guard let array = value.arrayValue, !array.isEmpty, array.allSatisfy({ $0.stringValue?.isEmpty == false }) else {
            throw Failure.invalid("\(key) must be a non-empty array of strings")
        }
        return array.compactMap(\.stringValue)
    }

    static func environment(_ text: String) throws -> APNSEnvironment {
        guard let environment = APNSEnvironment(rawValue: text) else {
            throw Failure.invalid("environment must be development (or sandbox) or production")
        }
        return environment
    }

    static func environments(_ value: JSONValue?) throws -> Set<APNSEnvironment>? {
        guard let names = try strings(value, "environments") else { return nil }
        return Set(try names.map(environment))
    }

    static func faultRule(_ object: JSONValue) throws -> FaultRule {
        let type = try requiredString(object, "type")
        let action: FaultAction
        switch type {
        case "status":
            guard let status = object["status"]?.intValue, (400...599).contains(status) else {
                throw Failure.invalid("status faults need a status between 400 and 599")
            }
            let reason = object["reason"]?.stringValue ?? Self.defaultReason(status: Int(status))
            action = .status(Int(status), APNSReason(rawValue: reason))
        case "latency":
            guard let milliseconds = object["milliseconds"]?.intValue, (1...600_000).contains(milliseconds) else {
                throw Failure.invalid("latency faults need milliseconds between 1 and 600000")
            }
            action = .latency(milliseconds: milliseconds)
        case "goaway":
            action = .goAway(APNSReason(rawValue: object["reason"]?.stringValue ?? "Shutdown"))
        case "drop":
            action = .dropConnection
        case "refuse-stream":
            action = .refuseStream
        case "stream-limit":
            guard let limit = object["limit"]?.intValue, (0...100_000).contains(limit) else {
                throw Failure.invalid("stream-limit faults need a limit between 0 and 100000")
            }
            action = .streamLimit(Int(limit))
        default:
            throw Failure.invalid("type must be status, latency, goaway, drop, refuse-stream or stream-limit")
        }
        let scopeText = object["scope"]?.stringValue ?? "all"
        guard let scope = FaultScope(rawValue: scopeText) else { throw Failure.invalid("scope must be all, device, broadcast or channels") }
        var count: Int? = 1
        if try optionalBool(object, "persistent") == true {
            count = nil
        } else if let value = object["count"] {
            guard let n = value.intValue, n >= 1, n <= 1_000_000_000 else { throw Failure.invalid("count must be a positive integer") }
            count = Int(n)
        }
        let probability = object["probability"]?.doubleValue ?? 1
        guard probability > 0, probability <= 1 else { throw Failure.invalid("probability must be in (0, 1]") }
        return FaultRule(action: action, scope: scope, count: count, probability: probability)
    }

    static func defaultReason(status: Int) -> String {
        switch status {
        case 429: return "TooManyRequests"
        case 500: return "InternalServerError"
        case 503: return "ServiceUnavailable"
        default: return APNSReason.devicePushReasons.first(where: { $0.status == status })?.reason.rawValue ?? "InternalServerError"
        }
    }

    // MARK: writing answers

    static func json(_ device: DeviceSnapshot) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("token", .string(device.token)), ("bundleId", .string(device.bundleID)),
            ("environment", .string(device.environment.rawValue)), ("kind", .string(device.kind.rawValue)),
            ("topic", .string(device.topic)), ("online", .bool(device.online)),
            ("notificationsEnabled", .bool(device.notificationsEnabled)),
            ("hasStoredNotification", .bool(device.hasStoredNotification)),
            ("receivedCount", .int(Int64(device.receivedCount))), ("channels", .array(device.channels.map { .string($0) })),
            ("createdAtMilliseconds", .int(device.createdAtMilliseconds)),
        ]
        if let at = device.uninstalledAtMilliseconds { members.append(("uninstalledAtMilliseconds", .int(at))) }
        if let at = device.tokenExpiredAtMilliseconds { members.append(("tokenExpiredAtMilliseconds", .int(at))) }
        return .object(members)
    }

    static func json(_ notification: ReceivedNotification) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("uniqueId", .string(notification.uniqueID)), ("apnsId", .string(notification.apnsID)),
            ("acceptedAtMilliseconds", .int(notification.acceptedAtMilliseconds)),
            ("deliveredAtMilliseconds", .int(notification.deliveredAtMilliseconds)),
            ("pushType", .string(notification.pushType)), ("topic", .string(notification.topic)),
            ("priority", .int(Int64(notification.priority))), ("wasStored", .bool(notification.wasStored)),
        ]
        if let collapseID = notification.collapseID { members.append(("collapseId", .string(collapseID))) }
        if let expiration = notification.expiration { members.append(("expiration", .int(expiration))) }
        if let channelID = notification.channelID { members.append(("channelId", .string(channelID))) }
        members.append(("payload", (try? JSONValue.parse(notification.payload)) ?? .string(String(decoding: notification.payload, as: UTF8.self))))
        return .object(members)
    }

    static func json(_ key: RegisteredKey) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("keyId", .string(key.keyID)), ("teamId", .string(key.teamID)),
            ("environments", .array(key.environments.map(\.rawValue).sorted().map { .string($0) })),
        ]
        if let topics = key.topics { members.append(("topics", .array(topics.map { .string($0) }))) }
        if let related = key.relatedKeyID { members.append(("relatedKeyId", .string(related))) }
        return .object(members)
    }

    static func json(_ channel: BroadcastChannel) -> JSONValue {
        .object([
            ("channelId", .string(channel.id)), ("bundleId", .string(channel.bundleID)),
            ("environment", .string(channel.environment.rawValue)),
            ("messageStoragePolicy", .int(Int64(channel.storagePolicy))),
            ("createdAtMilliseconds", .int(channel.createdAtMilliseconds)),
        ])
    }

    static func json(_ rule: FaultRule) -> JSONValue {
        var members: [(String, JSONValue)] = [("id", .int(Int64(rule.id))), ("scope", .string(rule.scope.rawValue))]
        switch rule.action {
        case .status(let status, let reason):
            members += [("type", "status"), ("status", .int(Int64(status))), ("reason", .string(reason.rawValue))]
        case .latency(let milliseconds): members += [("type", "latency"), ("milliseconds", .int(milliseconds))]
        case .goAway(let reason): members += [("type", "goaway"), ("reason", .string(reason.rawValue))]
        case .dropConnection: members.append(("type", "drop"))
        case .refuseStream: members.append(("type", "refuse-stream"))
        case .streamLimit(let limit): members += [("type", "stream-limit"), ("limit", .int(Int64(limit)))]
        }
        members.append(("remaining", rule.remaining.map { .int(Int64($0)) } ?? .null))
        members.append(("probability", .double(rule.probability)))
        return .object(members)
    }

    static func json(_ counters: EmulatorCounters) -> JSONValue {
        .object([
            ("accepted", .int(Int64(counters.accepted))),
            ("rejected", .object(counters.rejected.keys.sorted().map { ($0, .int(Int64(counters.rejected[$0]!))) })),
            ("rejectedTotal", .int(Int64(counters.rejectedTotal))),
            ("delivered", .int(Int64(counters.delivered))), ("stored", .int(Int64(counters.stored))),
            ("expired", .int(Int64(counters.expired))), ("discarded", .int(Int64(counters.discarded))),
            ("collapsed", .int(Int64(counters.collapsed))),
            ("acceptedForUnknownTokens", .int(Int64(counters.acceptedForUnknownTokens))),
            ("faultsInjected", .int(Int64(counters.faultsInjected))), ("connections", .int(Int64(counters.connections))),
            ("refusedStreams", .int(Int64(counters.refusedStreams))), ("pingsReceived", .int(Int64(counters.pingsReceived))),
        ])
    }

    static func json(_ entry: RequestLogEntry) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("atMilliseconds", .int(entry.atMilliseconds)), ("connection", .int(Int64(entry.connectionID))),
            ("method", .string(entry.method)), ("path", .string(entry.path)), ("status", .int(Int64(entry.status))),
        ]
        if let reason = entry.reason { members.append(("reason", .string(reason))) }
        if let pushType = entry.pushType { members.append(("pushType", .string(pushType))) }
        if let topic = entry.topic { members.append(("topic", .string(topic))) }
        if let apnsID = entry.apnsID { members.append(("apnsId", .string(apnsID))) }
        return .object(members)
    }
}

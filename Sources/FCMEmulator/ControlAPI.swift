// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// The emulator's own routes under `/emulator/`: service accounts, virtual devices, faults,
/// counters and access-token controls. JSON in, JSON out; documented in `docs/fcm-emulator.md`.
struct ControlAPI: Sendable {
    let emulator: FCMEmulator

    private var state: FCMState { self.emulator.state }

    struct Failure: Error {
        var code: Int
        var message: String

        static func invalid(_ message: String) -> Failure { Failure(code: 400, message: message) }
        static func notFound(_ message: String) -> Failure { Failure(code: 404, message: message) }
    }

    static func error(_ code: Int, _ message: String) -> Reply {
        .json(status: code, body: .object([("error", .object([("code", .int(Int64(code))), ("message", .string(message))]))]))
    }

    /// `path` is what follows `/emulator/`, split and percent-decoded.
    func handle(method: String, path: [String], body: [UInt8]) -> Reply {
        do {
            return try self.route(method: method, path, body: body)
        } catch {
            return Self.error(error.code, error.message)
        }
    }

    private func route(method: String, _ path: [String], body: [UInt8]) throws(Failure) -> Reply {
        func allow(_ methods: String...) throws(Failure) {
            guard methods.contains(method) else { throw Failure(code: 405, message: "\(method) is not allowed here") }
        }
        switch (path.first, path.count) {
        case ("health", 1):
            try allow("GET")
            return .json(status: 200, body: .object([("status", "ok")]))
        case ("service-accounts", 1):
            try allow("POST")
            let projectID = try Self.requiredString(try Self.object(body), "projectId")
            do {
                return .json(status: 200, body: try self.emulator.makeServiceAccount(projectID: projectID).jsonValue)
            } catch {
                throw Failure(code: 500, message: "cannot make a key: \(error)")
            }
        case ("service-accounts", 2) where path[1] == "import":
            try allow("POST")
            var object = try Self.object(body)
            if let embedded = object["json"]?.stringValue {
                guard let parsed = try? JSONValue.parse(embedded) else { throw .invalid("json is not JSON") }
                object = parsed
            }
            let account: FCMServiceAccount
            do {
                account = try FCMServiceAccount(object: object)
            } catch {
                throw .invalid("\(error)")
            }
            self.emulator.trust(account)
            return .json(status: 200, body: account.jsonValue)
        case ("devices", 1):
            try allow("POST")
            let object = try Self.object(body)
            let projectID = try Self.requiredString(object, "projectId")
            let packageName = object["packageName"]?.stringValue ?? "com.example.app"
            guard let kind = TargetKind(rawValue: object["kind"]?.stringValue ?? "token") else { throw .invalid("kind must be \"token\" or \"fid\"") }
            let token = self.state.createDevice(projectID: projectID, packageName: packageName, kind: kind)
            return .json(
                status: 200,
                body: .object([
                    ("token", .string(token)), ("kind", .string(kind.rawValue)), ("projectId", .string(projectID)),
                    ("packageName", .string(packageName)),
                ])
            )
        case ("devices", 2):
            try allow("GET", "DELETE")
            let token = path[1]
            guard let device = self.state.device(token) else { throw .notFound("no such device: \(token)") }
            if method == "DELETE" { self.state.uninstall(token) }
            return .json(
                status: 200,
                body: .object([
                    ("token", .string(token)), ("kind", .string(device.kind.rawValue)), ("projectId", .string(device.projectID)),
                    ("packageName", .string(device.packageName)), ("installed", .bool(method == "DELETE" ? false : device.installed)),
                ])
            )
        case ("devices", 3) where path[2] == "messages":
            try allow("GET")
            guard self.state.device(path[1]) != nil else { throw .notFound("no such device: \(path[1])") }
            return .json(status: 200, body: .object([("messages", .array(self.state.inbox(path[1]).map(\.jsonValue)))]))
        case ("devices", 3) where path[2] == "stream":
            try allow("GET")
            guard self.state.device(path[1]) != nil else { throw .notFound("no such device: \(path[1])") }
            let (id, stream) = self.state.subscribe(path[1])
            return .events(id: id, stream: stream)
        case ("faults", 1):
            try allow("POST", "DELETE")
            if method == "DELETE" {
                self.state.clearFaults()
                return .json(status: 200, body: .object([("faults", .int(0))]))
            }
            let faults = try Self.faults(try Self.object(body))
            self.state.inject(faults)
            return .json(status: 200, body: .object([("queued", .int(Int64(faults.count)))]))
        case ("counters", 1):
            try allow("GET", "DELETE")
            if method == "DELETE" { self.state.resetCounters() }
            return .json(status: 200, body: self.state.counters.json)
        case ("access-tokens", 2) where path[1] == "expire":
            try allow("POST")
            return .json(status: 200, body: .object([("expired", .int(Int64(self.state.expireAccessTokens())))]))
        case ("access-tokens", 2) where path[1] == "lifetime":
            try allow("GET", "PUT")
            if method == "PUT" {
                guard let seconds = try Self.object(body)["seconds"]?.intValue, seconds > 0, seconds <= 366 * 86_400 else {
                    throw .invalid("seconds (a whole number from 1 to a year) is required")
                }
                self.state.setAccessTokenLifetime(seconds: seconds)
            }
            return .json(status: 200, body: .object([("seconds", .int(self.state.accessTokenLifetime))]))
        default:
            throw .notFound("no such endpoint: /emulator/\(path.joined(separator: "/"))")
        }
    }

    // MARK: reading bodies

    static func object(_ body: [UInt8]) throws(Failure) -> JSONValue {
        guard let value = try? JSONValue.parse(body), value.objectMembers != nil else { throw .invalid("the body must be a JSON object") }
        return value
    }

    static func requiredString(_ object: JSONValue, _ key: String) throws(Failure) -> String {
        guard let value = object[key]?.stringValue, !value.isEmpty else { throw .invalid("\(key) (a string) is required") }
        return value
    }

    static func faults(_ object: JSONValue) throws(Failure) -> [FCMFault] {
        guard let list = object["faults"]?.arrayValue else { throw .invalid("faults (an array) is required") }
        var faults: [FCMFault] = []
        for item in list {
            if item["drop"]?.boolValue == true {
                faults.append(.drop)
            } else if let status = item["status"]?.intValue, (400...599).contains(status) {
                let retryAfter = item["retryAfter"]?.intValue
                if let retryAfter, retryAfter < 0 { throw .invalid("retryAfter must not be negative") }
                faults.append(.status(Int(status), retryAfter: retryAfter.map { Int($0) }))
            } else {
                throw .invalid("each fault is {\"status\": 400...599, \"retryAfter\"?: seconds} or {\"drop\": true}")
            }
        }
        return faults
    }
}

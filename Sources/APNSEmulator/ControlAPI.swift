// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import NIOHTTP1

/// The control API's routes: keys, certificates, virtual devices, channels, faults, counters,
/// the request log and the clock. Documented in `docs/emulator.md`.
struct ControlAPI: Sendable {
    let emulator: APNSEmulator

    private var state: EmulatorState { self.emulator.state }
    private var now: Int64 { self.emulator.clock.nowMilliseconds }

    struct Failure: Error {
        var response: ControlResponse
        static func invalid(_ message: String) -> Failure {
            Failure(response: .error(.badRequest, "invalid_request", message))
        }
        static func notFound(_ message: String) -> Failure {
            Failure(response: .error(.notFound, "not_found", message))
        }
    }

    func handle(method: HTTPMethod, uri: String, body: [UInt8]) -> ControlResponse {
        let (path, query) = Self.split(uri)
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map { Self.percentDecode($0) }
        guard segments.first == "v1" else { return .error(.notFound, "not_found", "no such endpoint: \(path)") }
        do {
            return try self.route(method: method, Array(segments.dropFirst()), query: query, body: body)
        } catch let failure as Failure {
            return failure.response
        } catch {
            return .error(.internalServerError, "internal", "\(error)")
        }
    }

    private func route(method: HTTPMethod, _ path: [String], query: [String: String], body: [UInt8]) throws -> ControlResponse {
        func methods(_ allowed: HTTPMethod...) throws {
            guard allowed.contains(method) else {
                throw Failure(response: .error(.methodNotAllowed, "method_not_allowed", "\(method) is not allowed here"))
            }
        }
        switch path.first {
        case "health" where path.count == 1:
            try methods(.GET)
            return .json(.ok, .object([("status", "ok")]))
        case "ca" where path.count == 1:
            try methods(.GET)
            return ControlResponse(status: .ok, contentType: "application/x-pem-file", body: Array(self.emulator.certificateAuthorityPEM.utf8))
        case "keys":
            return try self.keys(method: method, path, body: body)
        case "certificates" where path.count == 1:
            try methods(.POST)
            return try self.issueCertificate(body)
        case "devices":
            return try self.devices(method: method, path, body: body)
        case "channels" where path.count == 1:
            try methods(.GET)
            let environment = try query["environment"].map(Self.environment)
            let channels = self.state.channels(bundleID: query["bundleId"], environment: environment)
            return .json(.ok, .object([("channels", .array(channels.map(Self.json)))]))
        case "faults" where path.count == 1:
            try methods(.GET, .POST, .DELETE)
            if method == .DELETE {
                self.state.clearFaults()
                return .json(.ok, .object([("faults", .array([]))]))
            }
            if method == .POST {
                let rule = try Self.faultRule(try Self.object(body))
                let id = self.state.addFault(rule)
                var json = Self.json(rule)
                json = .object([("id", .int(Int64(id)))] + (json.objectMembers ?? []).filter { $0.0 != "id" })
                return .json(.created, json)
            }
            return .json(.ok, .object([("faults", .array(self.state.faults.map(Self.json)))]))
        case "counters" where path.count == 1:
            try methods(.GET, .DELETE)
            if method == .DELETE { self.state.resetCounters() }
            return .json(.ok, Self.json(self.state.counters(now: self.now)))
        case "requests" where path.count == 1:
            try methods(.GET)
            let limit = Int(query["limit"] ?? "100") ?? 100
            return .json(.ok, .object([("requests", .array(self.state.recentRequests(limit: limit).map(Self.json)))]))
        case "clock" where path.count == 1:
            try methods(.GET, .POST)
            if method == .POST {
                let object = try Self.object(body)
                guard let seconds = object["advanceSeconds"]?.intValue, abs(seconds) <= 100 * 366 * 86_400 else {
                    throw Failure.invalid("advanceSeconds (an integer within ±100 years) is required")
                }
                let total = self.emulator.clock.nowSeconds + seconds
                guard total > 0, total < 32_503_680_000 else { throw Failure.invalid("the clock must stay between 1970 and 3000") }
                self.emulator.clock.advance(seconds: seconds)
            }
            return .json(.ok, .object([("nowMilliseconds", .int(self.now))]))
        default:
            throw Failure.notFound("no such endpoint: /v1/\(path.joined(separator: "/"))")
        }
    }

    // MARK: keys and certificates

    private func keys(method: HTTPMethod, _ path: [String], body: [UInt8]) throws -> ControlResponse {
        switch (method, path.count) {
        case (.GET, 1):
            return .json(.ok, .object([("keys", .array(self.state.keys.map(Self.json)))]))
        case (.POST, 1):
            let object = try Self.object(body)
            let keyID = try Self.requiredString(object, "keyId")
            let teamID = try Self.requiredString(object, "teamId")
            let pem = try Self.requiredString(object, "publicKey")
            let publicKey: P256.Signing.PublicKey
            do {
                publicKey = try P256.Signing.PublicKey(pemRepresentation: pem)
            } catch {
                throw Failure.invalid("publicKey must be a P-256 public key in PEM form")
            }
            let environments = try Self.environments(object["environments"]) ?? [.development, .production]
            let topics = try Self.strings(object["topics"], "topics")
            let key = RegisteredKey(
                teamID: teamID, keyID: keyID, publicKey: publicKey, environments: environments, topics: topics,
                relatedKeyID: object["relatedKeyId"]?.stringValue
            )
            self.state.register(key: key)
            return .json(.created, Self.json(key))
        case (.DELETE, 2):
            guard self.state.removeKey(id: path[1]) else { throw Failure.notFound("no key \(path[1])") }
            return .json(.ok, .object([("deleted", .string(path[1]))]))
        case (_, 1), (_, 2):
            throw Failure(response: .error(.methodNotAllowed, "method_not_allowed", "\(method) is not allowed here"))
        default:
            throw Failure.notFound("no such endpoint")
        }
    }

    private func issueCertificate(_ body: [UInt8]) throws -> ControlResponse {
        let object = try Self.object(body)
        let bundleID = try Self.requiredString(object, "bundleId")
        guard RequestProcessor.isWellFormedTopic(Substring(bundleID)) else { throw Failure.invalid("bundleId is not a bundle identifier") }
        let topics = try Self.strings(object["topics"], "topics")
        let environments = try Self.environments(object["environments"]) ?? [.development, .production]
        let days = Int(object["validDays"]?.intValue ?? 365)
        guard (1...3650).contains(days) else { throw Failure.invalid("validDays must be between 1 and 3650") }
        let issued = try self.emulator.authority.issueClientCertificate(
            bundleID: bundleID, topics: topics, environments: environments, validDays: days
        )
        return .json(.created, .object([("certificate", .string(issued.certificatePEM)), ("privateKey", .string(issued.privateKeyPEM))]))
    }

    // MARK: devices

    private func devices(method: HTTPMethod, _ path: [String], body: [UInt8]) throws -> ControlResponse {
        if path.count == 1 {
            switch method {
            case .GET: return .json(.ok, .object([("devices", .array(self.state.devices.map(Self.json)))]))
            case .POST:
                let object = try Self.object(body)
                let bundleID = try Self.requiredString(object, "bundleId")
                guard RequestProcessor.isWellFormedTopic(Substring(bundleID)) else {
                    throw Failure.invalid("bundleId is not a bundle identifier")
                }
                let environment =
                    try object["environment"].map { value -> APNSEnvironment in
                        guard let text = value.stringValue else { throw Failure.invalid("environment must be a string") }
                        return try Self.environment(text)
                    } ?? .development
                let kindText = object["kind"]?.stringValue ?? "device"
                guard let kind = TokenKind(rawValue: kindText) else {
                    throw Failure.invalid("kind must be one of \(TokenKind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                let online = try Self.optionalBool(object, "online") ?? true
                let device = self.state.createDevice(bundleID: bundleID, environment: environment, kind: kind, online: online, now: self.now)
                return .json(.created, Self.json(device))
            default:
                throw Failure(response: .error(.methodNotAllowed, "method_not_allowed", "\(method) is not allowed here"))
            }
        }
        let token = path[1].lowercased()
        guard self.state.device(token: token) != nil else { throw Failure.notFound("no device with that token") }
        switch (method, Array(path.dropFirst(2))) {
        case (.GET, []):
            guard let device = self.state.device(token: token) else { throw Failure.notFound("no device with that token") }
            return .json(.ok, Self.json(device))
        case (.PATCH, []):
            let object = try Self.object(body)
            let online = try Self.optionalBool(object, "online")
            let enabled = try Self.optionalBool(object, "notificationsEnabled")
            guard let device = self.state.updateDevice(token: token, online: online, notificationsEnabled: enabled, now: self.now) else {
                throw Failure.notFound("no device with that token")
            }
            return .json(.ok, Self.json(device))
        case (.DELETE, []):
            self.state.removeDevice(token: token)
            return .json(.ok, .object([("deleted", .string(token))]))
        case (.POST, ["uninstall"]):
            guard let device = self.state.uninstall(token: token, now: self.now) else { throw Failure.notFound("no device with that token") }
            return .json(.ok, Self.json(device))
        case (.POST, ["expire-token"]):
            guard let device = self.state.expireToken(token: token, now: self.now) else { throw Failure.notFound("no device with that token") }
            return .json(.ok, Self.json(device))
        case (.GET, ["inbox"]):
            let inbox = self.state.inbox(token: token) ?? []
            return .json(.ok, .object([("notifications", .array(inbox.map(Self.json)))]))
        case (.DELETE, ["inbox"]):
            self.state.clearInbox(token: token)
            return .json(.ok, .object([("notifications", .array([]))]))
        case (.GET, ["events"]):
            return ControlResponse(status: .ok, contentType: "text/event-stream", body: [], streamDevice: token)
        case (.POST, ["channels"]):
            let channelID = try Self.requiredString(try Self.object(body), "channelId")
            guard let device = self.state.subscribe(token: token, channelID: channelID) else {
                throw Failure.notFound("no channel \(channelID) of this device's app and environment")
            }
            return .json(.ok, Self.json(device))
        case (.DELETE, let rest) where rest.count == 2 && rest[0] == "channels":
            guard let device = self.state.unsubscribe(token: token, channelID: rest[1]) else { throw Failure.notFound("no device with that token") }
            return .json(.ok, Self.json(device))
        case (_, []), (_, ["inbox"]), (_, ["events"]), (_, ["uninstall"]), (_, ["expire-token"]), (_, ["channels"]):
            throw Failure(response: .error(.methodNotAllowed, "method_not_allowed", "\(method) is not allowed here"))
        default:
            throw Failure.notFound("no such endpoint")
        }
    }
}

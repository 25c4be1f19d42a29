// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore
import NIOHPACK
import Synchronization

/// The APNs-relevant fields of a request's header block, read in one pass.
struct RequestHeaders {
    var method: String?
    var path: String?
    var authorization: String?
    var apnsID: String?
    var expiration: String?
    var priority: String?
    var topic: String?
    var collapseID: String?
    var pushType: String?
    var channelID: String?
    var requestID: String?
    /// An `apns-*` header or `authorization` appeared more than once.
    var hasDuplicates = false

    init(_ headers: HPACKHeaders) {
        func set(_ field: inout String?, _ value: String) {
            if field != nil { self.hasDuplicates = true }
            field = value
        }
        for (name, value, _) in headers {
            // By length first: a name is then compared with one or two candidates, not eleven.
            switch name.utf8.count {
            case 5: if name == ":path" { set(&self.path, value) }
            case 7:
                if name == ":method" {
                    set(&self.method, value)
                } else if name == "apns-id" {
                    set(&self.apnsID, value)
                }
            case 10: if name == "apns-topic" { set(&self.topic, value) }
            case 13:
                if name == "authorization" {
                    set(&self.authorization, value)
                } else if name == "apns-priority" {
                    set(&self.priority, value)
                }
            case 14: if name == "apns-push-type" { set(&self.pushType, value) }
            case 15:
                if name == "apns-expiration" {
                    set(&self.expiration, value)
                } else if name == "apns-channel-id" {
                    set(&self.channelID, value)
                } else if name == "apns-request-id" {
                    set(&self.requestID, value)
                }
            case 16: if name == "apns-collapse-id" { set(&self.collapseID, value) }
            default: continue
            }
        }
    }
}

/// Per-connection facts the checks read and update.
struct ConnectionContext {
    let id: Int
    let environment: APNSEnvironment
    /// Set when the client presented a certificate: the connection uses certificate auth.
    let certificate: ProviderCertificateInfo?
    var boundTeamID: String?
    var boundKeyID: String?
    /// The `authorization` header in use and when it last changed (for `TooManyProviderTokenUpdates`).
    var currentAuthorization: String?
    var bearerChangedAt: Int64 = 0
    /// The `iat` (ms) of the token in use.
    var currentIssuedAt: Int64 = 0
    /// The last `authorization` header whose signature checked out, and its claims.
    var verifiedAuthorization: String?
    var verifiedClaims: ProviderTokenClaims?
    var verifiedGeneration = -1
    /// A request has been authenticated on this connection (APNs then raises the stream limit).
    var authenticated = false
    var random: Xoshiro256
    /// The last body that passed as a JSON object: a provider sending one campaign to many
    /// devices sends the same bytes each time, and they are then compared, not parsed again.
    var lastJSONObject: [UInt8] = []

    init(id: Int, environment: APNSEnvironment, certificate: ProviderCertificateInfo?, seed: UInt64) {
        self.id = id
        self.environment = environment
        self.certificate = certificate
        self.random = Xoshiro256(seed: seed)
    }
}

/// The answer to one request, as frames will carry it.
struct Outcome {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]?
    var reason: APNSReason?
    /// This request authenticated the connection for the first time: raise the stream limit.
    var firstAuthentication = false

    var accepted: Bool { self.status < 300 }
}

/// The answers of one request: the id header it echoes and whether it authenticated the connection.
struct Reply {
    let processor: RequestProcessor
    let idHeader: String
    let id: String
    var firstAuthentication = false

    func fail(_ reason: APNSReason, _ status: Int, timestamp: Int64? = nil) -> Outcome {
        var outcome = self.processor.reject(reason, status: status, idHeader: self.idHeader, id: self.id, timestamp: timestamp)
        outcome.firstAuthentication = self.firstAuthentication
        return outcome
    }
}

/// Validates APNs requests with the emulator's own parsing and applies accepted ones to the state.
struct RequestProcessor: Sendable {
    let configuration: APNSEmulator.Configuration
    let state: EmulatorState
    let clock: EmulatorClock
    let tokenCache: VerifiedTokenCache

    enum Route {
        case device(token: Substring)
        case broadcast(bundleID: Substring)
        case channels(bundleID: Substring, all: Bool)
        case unknown
    }

    static func route(_ path: String?) -> Route {
        guard let path else { return .unknown }
        if path.utf8.starts(with: "/3/device/".utf8) {
            // Byte offsets: the path is ASCII up to here, so no Character walking is needed.
            let start = path.utf8.index(path.utf8.startIndex, offsetBy: 10)
            return .device(token: path[start...])
        }
        if path.hasPrefix("/4/broadcasts/apps/") {
            let bundle = path.dropFirst(19)
            return bundle.isEmpty || bundle.contains("/") ? .unknown : .broadcast(bundleID: bundle)
        }
        if path.hasPrefix("/1/apps/") {
            let rest = path.dropFirst(8)
            if rest.hasSuffix("/all-channels") {
                let bundle = rest.dropLast(13)
                return bundle.isEmpty || bundle.contains("/") ? .unknown : .channels(bundleID: bundle, all: true)
            }
            if rest.hasSuffix("/channels") {
                let bundle = rest.dropLast(9)
                return bundle.isEmpty || bundle.contains("/") ? .unknown : .channels(bundleID: bundle, all: false)
            }
        }
        return .unknown
    }

    static func scope(of route: Route) -> FaultScope {
        switch route {
        case .device: return .device
        case .broadcast: return .broadcast
        case .channels: return .channels
        case .unknown: return .all
        }
    }

    func process(_ headers: RequestHeaders, body: ByteBuffer, connection: inout ConnectionContext) -> Outcome {
        let route = Self.route(headers.path)
        let outcome: Outcome
        switch route {
        case .device(let token):
            outcome = self.processDevicePush(headers, token: token, body: body, connection: &connection)
        case .broadcast(let bundleID):
            outcome = self.processBroadcast(headers, bundleID: bundleID, body: body, connection: &connection)
        case .channels(let bundleID, let all):
            outcome = self.processChannelManagement(headers, bundleID: bundleID, all: all, body: body, connection: &connection)
        case .unknown:
            outcome = self.reject(.badPath, status: 404, idHeader: "apns-id", id: self.responseID(headers.apnsID, &connection))
        }
        if let reason = outcome.reason { self.state.recordRejection(reason) }
        return outcome
    }

    /// The id to answer with: the client's own, byte for byte, when it is a UUID (APNs echoes
    /// it; an uppercase id comes back uppercase), else a fresh one from the connection's
    /// generator, which is seeded per connection over the emulator's whole life.
    func responseID(_ requested: String?, _ connection: inout ConnectionContext) -> String {
        if let requested, UUIDText.isCanonical(requested) { return requested }
        return UUIDText.random(using: &connection.random)
    }

    func reject(
        _ reason: APNSReason,
        status: Int,
        idHeader: String,
        id: String,
        timestamp: Int64? = nil
    ) -> Outcome {
        Outcome(
            status: status,
            headers: [("content-type", "application/json"), (idHeader, id)],
            body: APNSErrorResponse(reason: reason, timestampMilliseconds: timestamp).body,
            reason: reason
        )
    }
}

/// Provider tokens whose signature has been checked, so a busy connection pays for ECDSA once
/// per token, not per request. An entry holds only for the key generation it was checked under.
/// Bounded: cleared when full.
final class VerifiedTokenCache: Sendable {
    private let entries = Mutex<[String: Int]>([:])
    private let capacity = 4096

    /// Whether `bearer` was verified under key generation `generation`.
    func isVerified(_ bearer: Substring, generation: Int) -> Bool {
        self.entries.withLock { $0[String(bearer)] == generation }
    }

    func insert(_ bearer: Substring, generation: Int) {
        self.entries.withLock { entries in
            if entries.count >= self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[String(bearer)] = generation
        }
    }
}

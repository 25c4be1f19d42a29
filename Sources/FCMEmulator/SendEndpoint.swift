// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// What the HTTP layer does with a request.
enum Reply: Sendable {
    case json(status: Int, body: JSONValue, headers: [(String, String)] = [])
    /// Close the connection without answering.
    case drop
    /// Server-sent events: one `event: message` per record the stream yields.
    case events(id: Int, stream: AsyncStream<FCMMessageRecord>)

    static func google(_ error: GoogleError) -> Reply {
        .json(status: error.code, body: error.json, headers: error.headers)
    }
}

/// `POST /v1/projects/{project}/messages:send`: faults, the bearer token, the body, the target,
/// then delivery to the virtual device.
struct SendEndpoint: Sendable {
    let state: FCMState
    let clock: FCMEmulatorClock

    func handle(project: String, authorization: String?, body: [UInt8]) -> Reply {
        switch self.state.beginSend() {
        case .drop:
            self.state.refused("DROPPED")
            return .drop
        case .status(let code, let retryAfter):
            return self.refuse(.fault(status: code, retryAfter: retryAfter))
        case nil:
            break
        }
        do {
            return try self.send(project: project, authorization: authorization, body: body)
        } catch {
            return self.refuse(error)
        }
    }

    private func refuse(_ error: GoogleError) -> Reply {
        self.state.refused(error.counterKey)
        return .google(error)
    }

    private func send(project: String, authorization: String?, body: [UInt8]) throws(GoogleError) -> Reply {
        guard let bearer = Self.bearerToken(authorization) else { throw .unauthenticated(reason: "CREDENTIALS_MISSING") }
        guard let grant = self.state.accessToken(bearer, now: self.clock.nowMilliseconds) else {
            throw .unauthenticated(reason: "ACCESS_TOKEN_EXPIRED")
        }
        guard grant.projectID == project else { throw .permissionDenied(project: project) }
        let request = try SendRequest.parse(body)

        var deliverTo: String?
        switch request.target {
        case .token(let token), .fid(let token):
            let kind: TargetKind = if case .token = request.target { .token } else { .fid }
            guard RegistrationToken.isWellFormed(token, kind: kind), let device = self.state.device(token), device.kind == kind else {
                throw .invalidRegistration
            }
            guard device.projectID == project else { throw .senderIDMismatch }
            guard device.installed else { throw .unregistered }
            if let package = request.restrictedPackageName, package != device.packageName {
                throw .invalidArgument(
                    "Invalid package name", field: "message.android.restricted_package_name",
                    description: "The registration token is for \(device.packageName), not \(package)."
                )
            }
            deliverTo = token
        case .topic, .condition:
            break  // no topic subscriptions in the emulator: accepted, delivered to nobody
        }

        if request.validateOnly {
            return .json(status: 200, body: .object([("name", .string("projects/\(project)/messages/fake_message_id"))]))
        }
        let id = self.makeMessageID()
        if let token = deliverTo {
            self.state.deliver(request.record(id: id, now: self.clock.nowMilliseconds), to: token)
        }
        return .json(status: 200, body: .object([("name", .string("projects/\(project)/messages/\(id)"))]))
    }

    /// Shaped like FCM's: `0:<16 digits>%<16 hex digits>`.
    private func makeMessageID() -> String {
        let serial = Int64(self.state.nextSerial())
        let stamp = (self.clock.nowMilliseconds &* 1000 &+ serial % 1000) % 10_000_000_000_000_000
        let hex = String(UInt64.random(in: 0...UInt64.max), radix: 16).leftPadded(to: 16)
        return "0:\(String(stamp).leftPadded(to: 16))%\(hex)"
    }

    static func bearerToken(_ header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingSpaces
        return token.isEmpty ? nil : token
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore

extension RequestProcessor {
    /// Broadcast and channel ids are opaque base64; Apple says not to assume a length.
    static func isChannelID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 256 && Base64URL.decode(id) != nil
    }

    /// `POST /4/broadcasts/apps/<bundle id>`: a Live Activity update sent to a channel.
    func processBroadcast(
        _ headers: RequestHeaders,
        bundleID: Substring,
        body: ByteBuffer,
        connection: inout ConnectionContext
    ) -> Outcome {
        var reply = Reply(processor: self, idHeader: "apns-request-id", id: self.responseID(headers.requestID, &connection))
        let requestID = reply.id
        let now = self.clock.nowMilliseconds
        func fail(_ reason: APNSReason, _ status: Int) -> Outcome { reply.fail(reason, status) }
        guard headers.method == "POST" else { return fail(.methodNotAllowed, 405) }
        if let refused = self.admitAppRequest(headers, bundleID: bundleID, reply: &reply, connection: &connection, now: now) {
            return refused
        }
        if let topic = headers.topic, topic != bundleID { return fail(.topicDisallowed, 400) }
        guard let pushType = headers.pushType else { return fail(.missingPushType, 400) }
        guard pushType.lowercased() == "liveactivity" else { return fail(.invalidPushType, 400) }
        if let priority = headers.priority, priority != "10", priority != "5", priority != "1" {
            return fail(.badPriority, 400)
        }
        // Apple lists apns-expiration as required but its own curl examples leave it out: absent means 0.
        let expirationText = headers.expiration ?? "0"
        guard let expiration = Self.epochSeconds(expirationText) else { return fail(.badExpirationDate, 400) }
        guard let channelID = headers.channelID else { return fail(.missingChannelId, 400) }
        guard Self.isChannelID(channelID) else { return fail(.badChannelId, 400) }
        guard let channel = self.state.channel(id: channelID, bundleID: String(bundleID), environment: connection.environment)
        else {
            return fail(.channelNotRegistered, 400)
        }
        if channel.storagePolicy == 0, expiration != 0 { return fail(.badExpirationDate, 400) }
        if body.readableBytes == 0 { return fail(.payloadEmpty, 400) }
        if body.readableBytes > 5120 { return fail(.payloadTooLarge, 413) }
        if !Self.isJSONObject(body) { return fail(.badRequestPayload, 400) }

        let uniqueID = UUIDText.random(using: &connection.random)
        let push = EmulatorState.AcceptedPush(
            apnsID: requestID, uniqueID: uniqueID, pushType: "liveactivity",
            topic: String(bundleID) + ".push-type.liveactivity",
            priority: headers.priority.flatMap { Int($0) } ?? 10, collapseID: nil,
            expiration: headers.expiration == nil ? nil : expiration, payload: Array(body.readableBytesView),
            channelID: channelID
        )
        self.state.broadcast(push, channelID: channelID, now: now)
        return Outcome(
            status: 200,
            headers: [("apns-request-id", requestID), ("apns-unique-id", uniqueID)],
            body: nil,
            reason: nil,
            firstAuthentication: reply.firstAuthentication
        )
    }

    /// `/1/apps/<bundle id>/channels` (create, read, delete) and `/all-channels` (list).
    func processChannelManagement(
        _ headers: RequestHeaders,
        bundleID: Substring,
        all: Bool,
        body: ByteBuffer,
        connection: inout ConnectionContext
    ) -> Outcome {
        var reply = Reply(processor: self, idHeader: "apns-request-id", id: self.responseID(headers.requestID, &connection))
        let requestID = reply.id
        let now = self.clock.nowMilliseconds
        func fail(_ reason: APNSReason, _ status: Int) -> Outcome { reply.fail(reason, status) }
        func success(_ status: Int, _ extra: [(String, String)] = [], json: JSONValue? = nil) -> Outcome {
            var headers = [("apns-request-id", requestID)] + extra
            if json != nil { headers.insert(("content-type", "application/json"), at: 0) }
            return Outcome(status: status, headers: headers, body: json?.serialized(), reason: nil, firstAuthentication: reply.firstAuthentication)
        }
        let method = headers.method ?? ""
        let allowed = all ? ["GET"] : ["POST", "GET", "DELETE"]
        guard allowed.contains(method) else { return fail(.methodNotAllowed, 405) }
        if let refused = self.admitAppRequest(headers, bundleID: bundleID, reply: &reply, connection: &connection, now: now) {
            return refused
        }
        let bundle = String(bundleID)

        if all {
            let ids = self.state.channels(bundleID: bundle, environment: connection.environment).map { JSONValue.string($0.id) }
            return success(200, json: .object([("channels", .array(ids))]))
        }
        switch method {
        case "POST":
            if body.readableBytes == 0 { return fail(.payloadEmpty, 400) }
            guard let json = try? JSONValue.parse(body.readableBytesView), let members = json.objectMembers else {
                return fail(.badRequestPayload, 400)
            }
            guard members.allSatisfy({ $0.0 == "message-storage-policy" || $0.0 == "push-type" }) else {
                return fail(.badRequestParams, 400)
            }
            guard let policy = json["message-storage-policy"]?.intValue, policy == 0 || policy == 1 else {
                return fail(.badRequestParams, 400)
            }
            guard let pushType = json["push-type"]?.stringValue else { return fail(.badRequestParams, 400) }
            guard pushType.lowercased() == "liveactivity" else { return fail(.invalidPushType, 400) }
            switch self.state.createChannel(bundleID: bundle, environment: connection.environment, storagePolicy: Int(policy), now: now) {
            case .created(let channel): return success(201, [("apns-channel-id", channel.id)])
            case .limitReached: return fail(.cannotCreateChannelConfig, 400)
            }
        default:
            guard let channelID = headers.channelID else { return fail(.missingChannelId, 400) }
            guard Self.isChannelID(channelID) else { return fail(.badChannelId, 400) }
            guard let channel = self.state.channel(id: channelID, bundleID: bundle, environment: connection.environment) else {
                return fail(.channelNotRegistered, 400)
            }
            if method == "DELETE" {
                self.state.deleteChannel(id: channel.id)
                return success(204)
            }
            return success(
                200,
                json: .object([("message-storage-policy", .int(Int64(channel.storagePolicy))), ("push-type", "LiveActivity")])
            )
        }
    }

    /// The checks the broadcast and channel APIs share after the method: duplicate headers, the
    /// credentials for the app in the path, the request id's form. `nil` when all pass.
    private func admitAppRequest(
        _ headers: RequestHeaders,
        bundleID: Substring,
        reply: inout Reply,
        connection: inout ConnectionContext,
        now: Int64
    ) -> Outcome? {
        if headers.hasDuplicates { return reply.fail(.duplicateHeaders, 400) }
        // The path names the app by its bundle id alone: a push-type suffix there (the Live
        // Activity topic `<bundle>.push-type.liveactivity`) is `TopicDisallowed`, as Apple
        // documents. Credentials are checked against the bundle id first, so a caller learns
        // nothing about the topic rule before authenticating.
        let bundle = Self.bundleID(withoutPushTypeSuffix: bundleID)
        switch self.authenticateApp(headers, bundleID: bundle, connection: &connection, now: now) {
        case .success(let first): reply.firstAuthentication = first
        case .failure(let failure):
            reply.firstAuthentication = failure.firstAuthentication
            return reply.fail(failure.reason, failure.status)
        }
        if let id = headers.requestID, !UUIDText.isCanonical(id) { return reply.fail(.badMessageId, 400) }
        if bundle.utf8.count != bundleID.utf8.count { return reply.fail(.topicDisallowed, 400) }
        return nil
    }

    /// `bundleID` without a trailing `.push-type.<type>` component (the form of the Live
    /// Activity, widgets and controls topics); unchanged when it has none.
    static func bundleID(withoutPushTypeSuffix bundleID: Substring) -> Substring {
        // "<bundle>.push-type.<type>": the type follows the last dot, ".push-type" precedes it.
        guard let lastDot = bundleID.lastIndex(of: "."), bundleID.index(after: lastDot) < bundleID.endIndex else { return bundleID }
        let head = bundleID[..<lastDot]
        guard head.hasSuffix(".push-type") else { return bundleID }
        let base = head.dropLast(".push-type".count)
        return base.isEmpty ? bundleID : base
    }

    /// Authentication for the app-level APIs: the bundle id in the path must be one the
    /// credentials cover (else 403 `TopicMismatch`).
    private func authenticateApp(
        _ headers: RequestHeaders,
        bundleID: Substring,
        connection: inout ConnectionContext,
        now: Int64
    ) -> Result<Bool, AuthFailure> {
        if let certificate = connection.certificate {
            guard certificate.bundleID == bundleID else { return .failure(AuthFailure(reason: .topicMismatch, status: 403)) }
            let first = !connection.authenticated
            connection.authenticated = true
            return .success(first)
        }
        let result = self.authenticate(headers, topic: nil, pushType: "liveactivity", connection: &connection, now: now)
        if case .success(let first) = result, let keyID = connection.boundKeyID, let key = self.state.key(id: keyID),
            !key.allows(topic: bundleID)
        {
            return .failure(AuthFailure(reason: .topicMismatch, status: 403, firstAuthentication: first))
        }
        return result
    }
}

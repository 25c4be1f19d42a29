// SPDX-License-Identifier: Apache-2.0
import APNSModels
import APNSTransport
import NIOCore

extension RequestProcessor {
    func processDevicePush(
        _ headers: RequestHeaders,
        token: Substring,
        body: ByteBuffer,
        connection: inout ConnectionContext
    ) -> Outcome {
        var reply = Reply(processor: self, idHeader: "apns-id", id: self.responseID(headers.apnsID, &connection))
        let apnsID = reply.id
        let now = self.clock.nowMilliseconds
        let pushType = headers.pushType ?? (self.configuration.defaultPushTypeToAlert ? "alert" : "")
        // With a single-topic certificate the topic may be left out: it is the certificate's.
        var topic: Substring? = headers.topic.map { Substring($0) }
        if topic == nil, let certificate = connection.certificate, certificate.topics.count == 1 {
            topic = Substring(certificate.topics[0])
        }
        func fail(_ reason: APNSReason, _ status: Int, timestamp: Int64? = nil) -> Outcome {
            reply.fail(reason, status, timestamp: timestamp)
        }

        for stage in self.configuration.validationOrder {
            switch stage {
            case .method:
                if headers.method != "POST" { return fail(.methodNotAllowed, 405) }
            case .path:
                if token.isEmpty { return fail(.missingDeviceToken, 400) }
                if token.utf8.contains(UInt8(ascii: "/")) || token.utf8.contains(UInt8(ascii: "?")) { return fail(.badPath, 404) }
            case .duplicateHeaders:
                if headers.hasDuplicates { return fail(.duplicateHeaders, 400) }
            case .authentication:
                switch self.authenticate(headers, topic: topic, pushType: pushType, connection: &connection, now: now) {
                case .success(let first): reply.firstAuthentication = reply.firstAuthentication || first
                case .failure(let failure):
                    reply.firstAuthentication = reply.firstAuthentication || failure.firstAuthentication
                    return fail(failure.reason, failure.status)
                }
            case .headerSyntax:
                if let id = headers.apnsID, !UUIDText.isCanonical(id) { return fail(.badMessageId, 400) }
                if let expiration = headers.expiration, Self.epochSeconds(expiration) == nil {
                    return fail(.badExpirationDate, 400)
                }
                if let priority = headers.priority {
                    guard priority == "10" || priority == "5" || priority == "1" else { return fail(.badPriority, 400) }
                    if priority == "10", pushType == "background", self.configuration.rejectBackgroundAtPriority10 {
                        return fail(.badPriority, 400)
                    }
                }
                if !WirePushType.isPushType(pushType) { return fail(.invalidPushType, 400) }
                if let collapseID = headers.collapseID, collapseID.utf8.count > 64 { return fail(.badCollapseId, 400) }
            case .topic:
                guard let topic else { return fail(.missingTopic, 400) }
                guard Self.isWellFormedTopic(topic) else { return fail(.badTopic, 400) }
                if WirePushType.isPushType(pushType), !WirePushType.topicFits(topic, pushType: pushType) {
                    let reason = self.configuration.topicSuffixMismatchReason
                    return fail(reason, reason.status ?? 400)
                }
            case .payload:
                if body.readableBytes == 0 { return fail(.payloadEmpty, 400) }
                if body.readableBytes > WirePushType.maximumPayload(pushType) { return fail(.payloadTooLarge, 413) }
                if !Self.isJSONObject(body, lastValid: &connection.lastJSONObject) {
                    let reason = self.configuration.invalidJSONReason
                    return fail(reason, reason.status ?? 400)
                }
            case .tokenState:
                guard Self.isHex(token) else { return fail(.badDeviceToken, 400) }
                let verdict = self.state.verdict(
                    token: token, environment: connection.environment, topic: topic ?? "", now: now, rateLimit: nil
                )
                switch verdict {
                case .deliverable, .rateLimited: break
                case .unknown: if !self.configuration.acceptUnknownTokens { return fail(.badDeviceToken, 400) }
                case .wrongEnvironment: return fail(.badDeviceToken, 400)
                case .notForTopic: return fail(.deviceTokenNotForTopic, 400)
                case .unregistered(let at): return fail(.unregistered, 410, timestamp: at)
                case .expired: return fail(.expiredToken, 410)
                }
            case .rate:
                if let limit = self.configuration.perTokenRateLimit,
                    self.state.verdict(token: token, environment: connection.environment, topic: topic ?? "", now: now, rateLimit: limit)
                        == .rateLimited
                {
                    return fail(.tooManyRequests, 429)
                }
            }
        }

        let uniqueID = UUIDText.random(using: &connection.random)
        let push = EmulatorState.AcceptedPush(
            apnsID: apnsID, uniqueID: uniqueID, pushType: pushType, topic: String(topic ?? ""),
            priority: headers.priority.flatMap { Int($0) } ?? (pushType == "background" ? 5 : 10),
            collapseID: headers.collapseID, expiration: headers.expiration.flatMap(Self.epochSeconds),
            payload: Array(body.readableBytesView)
        )
        self.state.accept(push, token: token, now: now)
        var responseHeaders = [("apns-id", apnsID)]
        if connection.environment == .development, self.configuration.uniqueIDInDevelopment {
            responseHeaders.append(("apns-unique-id", uniqueID))
        }
        return Outcome(status: 200, headers: responseHeaders, body: nil, reason: nil, firstAuthentication: reply.firstAuthentication)
    }

    /// A non-negative decimal number of seconds, as `apns-expiration` must be.
    static func epochSeconds(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(text)
    }

    static func isHex(_ token: Substring) -> Bool {
        token.utf8.count % 2 == 0 && token.utf8.count <= 1024
            && token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) }
    }

    /// Letters, digits, `.`, `-` and `_`, as bundle ids (plus suffixes) are made of.
    static func isWellFormedTopic(_ topic: Substring) -> Bool {
        let utf8 = topic.utf8
        guard let first = utf8.first, let last = utf8.last, first != 0x2E, last != 0x2E, utf8.count <= 255 else { return false }
        func allowed(_ byte: UInt8) -> Bool {
            (0x61...0x7A).contains(byte | 0x20) || (0x30...0x39).contains(byte) || byte == 0x2E || byte == 0x2D || byte == 0x5F
        }
        // In place when the bytes are contiguous (they are for a decoded header), else one by one.
        return utf8.withContiguousStorageIfAvailable { $0.allSatisfy(allowed) } ?? utf8.allSatisfy(allowed)
    }

    /// `isJSONObject(_:)`, remembering the last body that passed.
    static func isJSONObject(_ body: ByteBuffer, lastValid: inout [UInt8]) -> Bool {
        if !lastValid.isEmpty, body.withUnsafeReadableBytes({ raw in lastValid.withUnsafeBytes { sameBytes($0, raw) } }) { return true }
        guard Self.isJSONObject(body) else { return false }
        lastValid.removeAll(keepingCapacity: true)
        lastValid.append(contentsOf: body.readableBytesView)
        return true
    }

    /// Whether the body is one JSON object (validated without building it).
    static func isJSONObject(_ body: ByteBuffer) -> Bool {
        body.withUnsafeReadableBytes { raw in
            var index = 0
            while index < raw.count, raw[index] == 0x20 || raw[index] == 0x0A || raw[index] == 0x0D || raw[index] == 0x09 {
                index += 1
            }
            guard index < raw.count, raw[index] == UInt8(ascii: "{") else { return false }
            do {
                try JSONValue.validate(raw)
                return true
            } catch {
                return false
            }
        }
    }
}

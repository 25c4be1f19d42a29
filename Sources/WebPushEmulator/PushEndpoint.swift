// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HummingbirdWebSocket
import Logging
import WebPush

/// An RFC 8030 push request: `POST <endpoint>` with its headers (names lower-cased) and body.
struct PushRequest: Sendable {
    var method: String
    var personality: WebPushPersonality
    /// The path before the token (`/wpush/v2/`, …), to match the subscription's own.
    var pathPrefix: String
    var token: String
    var headers: [String: String]
    var body: [UInt8]
    /// The body was over the collection limit and has been dropped.
    var bodyTooLarge = false
}

/// The push endpoints: faults, the subscription, VAPID, the RFC 8030 headers, the encoding,
/// the size and (Apple) the ciphertext's framing, in that order; then delivery and `201`.
struct PushEndpoint: Sendable {
    /// RFC 8030 §7.2: a push service must take 4096 octets.
    static let maximumBody = 4096
    /// What the services keep at most (autopush's cap; Apple stores up to 30 days too).
    static let maximumTTL = 2_592_000
    static let urgencies: Set<String> = ["very-low", "low", "normal", "high"]

    let emulator: WebPushEmulator

    func handle(_ request: PushRequest) async -> PushAnswer {
        let apnsID = Self.makeAPNSID(self.emulator.state.newMessageID())
        do {
            return try await self.push(request, apnsID: apnsID)
        } catch {
            let answer = error.answer(as: request.personality, apnsID: apnsID)
            self.emulator.state.refused(error, status: answer.status)
            self.emulator.logger.debug(
                "Web Push emulator refused a push",
                metadata: ["webpush.reason": "\(error.counterKey)", "webpush.personality": "\(request.personality.rawValue)"]
            )
            return answer
        }
    }

    private func push(_ request: PushRequest, apnsID: String) async throws(PushRefusal) -> PushAnswer {
        let state = self.emulator.state
        guard request.method == "POST" else { throw .methodNotAllowed }
        if let fault = state.beginPush() { throw .fault(status: fault.status, retryAfter: fault.retryAfter) }
        guard let subscription = state.subscription(request.token),
            subscription.personality == request.personality,
            subscription.personality.pathPrefix(restricted: subscription.applicationServerKey != nil) == request.pathPrefix
        else { throw .unknownSubscription }
        guard subscription.active else { throw .unsubscribed }

        try self.checkVAPID(request, subscription: subscription)
        let (ttl, urgency, topic) = try Self.checkHeaders(request.headers)
        try Self.checkEncoding(request)

        let message = WebPushState.Pending(
            id: state.newMessageID(), body: request.body, ttl: ttl, urgency: urgency, topic: topic,
            acceptedAt: self.emulator.clock.nowMilliseconds
        )
        if let send = state.accept(message, token: request.token, now: message.acceptedAt) {
            do {
                try await send.writer.write(.text(send.frame))
            } catch {
                // The socket went away: the message stays pending for the next hello.
                self.emulator.logger.debug("Web Push emulator could not write a notification", metadata: ["error": "\(error)"])
            }
        }
        var headers = [("location", "\(self.emulator.origin)/m/\(message.id)"), ("ttl", String(ttl))]
        if request.personality == .apple { headers.append(("apns-id", apnsID)) }
        return PushAnswer(status: 201, headers: headers, contentType: nil, body: [])
    }

    // MARK: checks

    private func checkVAPID(_ request: PushRequest, subscription: WebPushState.Subscription) throws(PushRefusal) {
        let header = request.headers["authorization"]
        guard subscription.applicationServerKey != nil || header != nil else { return }
        guard let header, !header.trimmingWhitespace.isEmpty else { throw .missingAuthorization }
        let authorization: VAPID.Authorization
        do {
            authorization = try VAPID.verify(
                header, audience: self.emulator.origin, now: self.emulator.clock.nowSeconds, cryptoKey: request.headers["crypto-key"],
                requireSubject: request.personality != .fcm
            )
        } catch {
            switch error {
            case .missing: throw .missingAuthorization
            case .malformed: throw .badAuthorization("expected vapid t=<jwt>, k=<key>")
            case .badKey: throw .badVAPIDKey
            case .badSignature: throw .badJWT("signature")
            case .wrongAudience: throw .badJWT("aud must be \(self.emulator.origin)")
            case .missingExpiry: throw .badJWT("exp missing")
            case .expired: throw .badJWT("exp in the past")
            case .expiryTooFar: throw .badJWT("exp more than 24 hours ahead")
            case .badSubject: throw .badJWT("sub must be a mailto: or https: URL")
            }
        }
        if request.personality == .apple, !VAPID.isAppleAcceptableSubject(authorization.claims.subject ?? "") {
            throw .badJWT("sub refused")
        }
        if let key = subscription.applicationServerKey, key != authorization.key { throw .vapidKeyMismatch }
    }

    static func checkHeaders(_ headers: [String: String]) throws(PushRefusal) -> (ttl: Int, urgency: String, topic: String?) {
        guard let ttlText = headers["ttl"]?.trimmingWhitespace else { throw .missingTTL }
        guard !ttlText.isEmpty, ttlText.utf8.count <= 18, ttlText.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let ttl = Int(ttlText) else {
            throw .badTTL
        }
        let urgency = headers["urgency"]?.trimmingWhitespace ?? "normal"
        guard Self.urgencies.contains(urgency) else { throw .badUrgency }
        let topic = headers["topic"]?.trimmingWhitespace
        if let topic {
            guard (1...32).contains(topic.utf8.count), topic.utf8.allSatisfy(Self.isBase64URL) else { throw .badTopic }
        }
        return (min(ttl, Self.maximumTTL), urgency, topic)
    }

    private static func checkEncoding(_ request: PushRequest) throws(PushRefusal) {
        let body = request.body
        if body.isEmpty, !request.bodyTooLarge {
            // A push without a payload is fine for autopush and FCM; Safari needs one.
            guard request.personality != .apple else { throw .badFraming("empty body") }
            return
        }
        guard let encoding = request.headers["content-encoding"]?.trimmingWhitespace.lowercased() else {
            throw .badEncoding("Missing Content-Encoding header")
        }
        guard encoding == "aes128gcm" else { throw .badEncoding("Unknown Content-Encoding header: only aes128gcm is accepted") }
        if let encryption = request.headers["encryption"], Self.hasParameter(encryption, "salt") {
            throw .badEncoding("Do not include 'salt' header in aes128gcm Encryption header")
        }
        if let cryptoKey = request.headers["crypto-key"], Self.hasParameter(cryptoKey, "dh") {
            throw .badEncoding("Do not include 'dh' header in aes128gcm Crypto-Key header")
        }
        guard !request.bodyTooLarge, body.count <= Self.maximumBody else { throw .payloadTooLarge }
        if request.personality == .apple {
            do {
                _ = try WebPushEncryption.header(of: body)
            } catch {
                throw .badFraming("\(error)")
            }
        }
    }

    /// Whether a `name=value` list (separated by `;` or `,`) has a parameter `name`.
    static func hasParameter(_ header: String, _ name: String) -> Bool {
        header.split(whereSeparator: { $0 == ";" || $0 == "," }).contains { item in
            guard let equals = item.firstIndex(of: "=") else { return false }
            return Substring(item[..<equals]).trimmingWhitespace.lowercased() == name
        }
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) || byte == 45 || byte == 95
    }

    /// Apple's `apns-id` is a UUID; made from 16 random octets (given as base64url).
    static func makeAPNSID(_ seed: String) -> String {
        let bytes = Base64URL.decode(seed) ?? []
        let hex = bytes.map { byte -> String in
            let digits = Array("0123456789ABCDEF")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
        }.joined()
        guard hex.count == 32 else { return hex }
        let characters = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    var trimmingWhitespace: String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import AsyncHTTPClient
import CoreMetrics
import Crypto
import HeraldCore
package import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import WebPush
package import WebPushEmulator

/// Web Push under the delivery engine (RFC 8030): each delivery's plaintext — its notification's
/// Declarative Web Push part with the receipt id spliced in — encrypted for its subscription
/// (RFC 8291 aes128gcm: a fresh key pair and salt per message), posted to the subscription's
/// endpoint with the app's VAPID header for that origin (``VAPIDKeys``), `TTL`, `Urgency` and
/// `Topic`; up to ``inFlight`` requests at once, over one HTTP client whose pool keeps
/// connections per origin (HTTP/2 where the service offers it over TLS). No redirect is
/// followed, and an endpoint the policy does not allow is never requested.
final class WebPushTransport: PushTransport {
    static let inFlight = 128
    /// A push service keeps a message at most this long (Mozilla and Apple: 30 days): the TTL of
    /// a notification without an expiration.
    static let maximumTTL: Int64 = 2_592_000

    let keys: VAPIDKeys
    let policy: WebPushEndpointPolicy
    /// Made on the first send (a server that never sends to a browser holds no client), shut
    /// down by ``shutdown()``.
    private let http = Mutex<HTTPClient?>(nil)
    private let httpConfiguration: HTTPClient.Configuration
    private let requestTimeout: Duration
    private let clock: any EpochClock
    private let logger: Logger

    init(keys: VAPIDKeys, policy: WebPushEndpointPolicy, requestTimeout: Duration, clock: any EpochClock, logger: Logger) {
        self.keys = keys
        self.policy = policy
        self.requestTimeout = requestTimeout
        self.clock = clock
        self.logger = logger
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.httpVersion = .automatic
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(Int64(requestTimeout.components.seconds) + 1))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        self.httpConfiguration = configuration
    }

    private var client: HTTPClient {
        self.http.withLock { http in
            if let http { return http }
            let made = HTTPClient(
                eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: self.httpConfiguration, backgroundActivityLogger: self.logger)
            http = made
            return made
        }
    }

    func shutdown() async {
        let client = self.http.withLock { http in
            defer { http = nil }
            return http
        }
        try? await client?.shutdown()
    }

    /// One request, made ready: where, what, and with which headers.
    private struct Prepared: Sendable {
        var index: Int
        var endpoint: String
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    func send(
        _ deliveries: [ClaimedDelivery], route: Route, lane: ClientLane, receipts: ReceiptID?, answer: (Int, TransportAnswer) -> Void
    ) async {
        guard let first = deliveries.first else { return }
        let key: VAPIDKey
        do throws(HeraldError) {
            key = try await self.keys.key(appID: first.appID)
        } catch {
            self.logger.warning("no VAPID key", metadata: ["herald.app": "\(first.appID)", "error": "\(error.message)"])
            self.answerAll(deliveries, error, answer: answer)
            return
        }
        let nowSeconds = self.clock.nowMilliseconds / 1000
        var prepared: [Prepared] = []
        prepared.reserveCapacity(deliveries.count)
        for (index, delivery) in deliveries.enumerated() {
            switch self.prepare(delivery, index: index, key: key, receipts: receipts, nowSeconds: nowSeconds) {
            case .success(let request): prepared.append(request)
            case .failure(let refusal): answer(index, refusal.answer)
            }
        }
        var counts: [String: Int64] = [:]
        await withTaskGroup(of: (Int, TransportAnswer).self) { group in
            var next = 0
            func startNext() {
                guard next < prepared.count else { return }
                let request = prepared[next]
                next += 1
                group.addTask { (request.index, await self.post(request)) }
            }
            for _ in 0..<min(Self.inFlight, prepared.count) { startNext() }
            while let (index, result) = await group.next() {
                answer(index, result)
                counts[Self.metricResult(result), default: 0] += 1
                startNext()
            }
        }
        for (result, count) in counts {
            Counter(label: "herald_webpush_messages_total", dimensions: [("app", first.appID), ("result", result)]).increment(by: count)
        }
    }

    private struct Refusal: Error {
        var answer: TransportAnswer
        init(_ reason: String, invalidate: Bool = false) {
            self.answer = .refused(status: nil, reason: reason, invalidate: invalidate, timestamp: nil)
        }
    }

    private func prepare(
        _ delivery: ClaimedDelivery, index: Int, key: VAPIDKey, receipts: ReceiptID?, nowSeconds: Int64
    ) -> Result<Prepared, Refusal> {
        guard let subscription = delivery.publicKey.flatMap(WebSubscription.init) else { return .failure(Refusal("NoSubscription")) }
        // Checked again at send: the allowed services may have changed since it registered.
        guard let origin = self.policy.allowedOrigin(subscription.endpoint) else { return .failure(Refusal("EndpointNotAllowed")) }
        guard let keys = try? WebPushSubscriptionKeys(p256dh: subscription.p256dh, auth: subscription.auth) else {
            return .failure(Refusal("BadSubscriptionKeys", invalidate: true))
        }
        guard !delivery.payload.isEmpty else { return .failure(Refusal("NoWebPushPart")) }
        var extra: [(String, String)] = []
        if let receipts, delivery.pushType == .alert || delivery.pushType == .background {
            extra.append((ReceiptID.payloadKey, receipts.id(appID: delivery.appID, deliveryID: delivery.id)))
        }
        let body: [UInt8]
        do {
            body = try WebPushEncryption.encrypt(WebPushPart.message(delivery.payload, extra: extra), for: keys)
        } catch {
            return .failure(Refusal("PayloadTooLarge"))
        }
        var headers = HTTPHeaders()
        headers.add(name: "Authorization", value: self.keys.authorization(appID: delivery.appID, key: key, origin: origin))
        headers.add(name: "Content-Encoding", value: "aes128gcm")
        headers.add(name: "Content-Type", value: "application/octet-stream")
        // Expiration 0 is now-or-never (TTL 0); otherwise what is left of it.
        let ttl = delivery.expiration.map { $0 == 0 ? 0 : min(max(0, $0 - nowSeconds), Self.maximumTTL) } ?? Self.maximumTTL
        headers.add(name: "TTL", value: String(ttl))
        headers.add(name: "Urgency", value: WebPushPart.urgency(delivery.priority))
        if let collapseID = delivery.collapseID { headers.add(name: "Topic", value: Self.topic(collapseID)) }
        return .success(Prepared(index: index, endpoint: subscription.endpoint, headers: headers, body: body))
    }

    /// RFC 8030's `Topic` for a collapse id: at most 32 characters of base64url — the first 32
    /// of its SHA-256, so that any collapse id gives a valid topic, the same one every time.
    static func topic(_ collapseID: String) -> String {
        String(Base64URL.encode(Array(SHA256.hash(data: Array(collapseID.utf8)))).prefix(32))
    }

    private func post(_ prepared: Prepared) async -> TransportAnswer {
        var request = HTTPClientRequest(url: prepared.endpoint)
        request.method = .POST
        request.headers = prepared.headers
        request.body = .bytes(ByteBuffer(bytes: prepared.body))
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await self.client.execute(request, timeout: .seconds(Int64(self.requestTimeout.components.seconds)))
            body = try await response.body.collect(upTo: 16_384)
        } catch {
            if Self.neverWritten(error) { return .retryLater(status: nil, reason: "ConnectFailed", after: nil) }
            return .unknown(status: nil)
        }
        let retryAfter = response.headers.first(name: "Retry-After").flatMap { Int64($0.filter { $0 != " " }) }.map { $0 * 1000 }
        return Self.answer(
            status: Int(response.status.code), body: Array(buffer: body), location: response.headers.first(name: "Location"), retryAfter: retryAfter)
    }

    /// Errors that leave no doubt the request was never sent: the connection was not made.
    private static func neverWritten(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError, error == .connectTimeout { return true }
        let text = String(describing: error)
        return text.contains("connectTimeout") || text.contains("Connection refused") || text.contains("connectionRefused")
            || text.contains("NIOConnectionError")
    }

    /// What a push service's answer means for the delivery, as RFC 8030 and the services
    /// (Apple's `reason`, Mozilla's `errno`, FCM's texts) document it.
    static func answer(status: Int, body: [UInt8], location: String?, retryAfter: Int64?) -> TransportAnswer {
        if (200..<300).contains(status) {
            return .sent(id: location.flatMap { $0.split(separator: "/").last.map(String.init) })
        }
        let reason = Self.reason(status: status, body: body)
        switch status {
        case 404, 410:
            return .refused(status: status, reason: reason, invalidate: true, timestamp: nil)
        case 429:
            return .retryLater(status: status, reason: reason, after: retryAfter)
        case 500..<600:
            return .retryLater(status: status, reason: reason, after: retryAfter)
        default:
            // A subscription made with another VAPID key (the app's key was rotated) can never be
            // used again: the browser must subscribe anew.
            return .refused(status: status, reason: reason, invalidate: reason == "VapidPkHashMismatch", timestamp: nil)
        }
    }

    /// A stable name for the refusal: Apple's `reason` as it is; Mozilla's `errno` by its meaning;
    /// otherwise by status.
    static func reason(status: Int, body: [UInt8]) -> String {
        let json = try? JSONValue.parse(body)
        if let reason = json?["reason"]?.stringValue, !reason.isEmpty, reason.utf8.count <= 64 { return reason }
        let message = (json?["message"]?.stringValue ?? String(decoding: body.prefix(512), as: UTF8.self)).lowercased()
        // A subscription made with another VAPID key: FCM's and autopush's wording.
        let keyMismatch = message.contains("do not correspond") || message.contains("token hash")
        if let errno = json?["errno"]?.intValue {
            switch errno {
            case 102: return "InvalidSubscription"
            case 103, 105, 106: return "Unsubscribed"
            case 104: return "PayloadTooLarge"
            // Mozilla's errno for every VAPID fault: the key only when its message says so.
            case 109: return keyMismatch ? "VapidPkHashMismatch" : "VapidUnauthorized"
            case 110: return "BadWebPushRequest"
            case 111, 112: return "BadTtl"
            case 113: return "BadWebPushTopic"
            case 114: return "BadAuthorizationHeader"
            default: return "Errno\(errno)"
            }
        }
        if status == 403 || status == 401, keyMismatch { return "VapidPkHashMismatch" }
        switch status {
        case 400: return "BadRequest"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "NotFound"
        case 410: return "Gone"
        case 413: return "PayloadTooLarge"
        case 429: return "TooManyRequests"
        default: return "Status\(status)"
        }
    }

    private static func metricResult(_ answer: TransportAnswer) -> String {
        switch answer {
        case .sent: "sent"
        case .refused(_, let reason, _, _): reason
        case .retryLater(_, let reason, _): reason
        case .unknown: "unknown"
        }
    }
}

/// A Web Push service emulator on 127.0.0.1 for the duration of `body`.
package func withWebPushEmulator<Result>(
    configuration: WebPushEmulator.Configuration, logger: Logger, _ body: (WebPushEmulator) async throws -> Result
) async throws -> Result {
    let emulator = WebPushEmulator(configuration: configuration, logger: logger)
    try await emulator.start()
    do {
        let result = try await body(emulator)
        await emulator.shutdown()
        return result
    } catch {
        await emulator.shutdown()
        throw error
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

/// Sends the webhook outbox: claims due messages under a lease (any process of a shared
/// database may send any message), POSTs each signed, and records the answer. A 2xx answer
/// acknowledges a message; anything else is retried with exponential back-off and jitter
/// until the message expires.
///
/// The signature: `Herald-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
final class WebhookDispatcher: Service, Sendable {
    struct Configuration: Sendable {
        var batchSize = 16
        var lease: Duration = .seconds(60)
        var timeout: Duration = .seconds(10)
        var pollInterval: Duration = .seconds(1)
        var retryBase: Duration = .seconds(1)
        var retryMaximum: Duration = .seconds(600)
        /// Let webhooks reach loopback and private addresses (a receiver on the same host or network).
        var allowInternal = false
    }

    private let store: any HeraldStore
    private let secrets: SecretBox
    private let clock: any EpochClock
    private let configuration: Configuration
    private let logger: Logger
    private let rung = Mutex(false)

    init(store: any HeraldStore, secrets: SecretBox, clock: any EpochClock, configuration: Configuration = .init(), logger: Logger) {
        self.store = store
        self.secrets = secrets
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    /// Messages were queued: look now rather than at the next poll.
    func ring() { self.rung.withLock { $0 = true } }

    func run() async throws {
        var failures = 0
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                let worked = try await self.runBatch()
                failures = 0
                if !worked { await self.idle() }
            } catch {
                failures += 1
                self.logger.error("webhook batch failed", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .milliseconds(min(5000, 100 << min(failures, 6))))
            }
        }
    }

    private func idle() async {
        for _ in 0..<max(1, self.configuration.pollInterval.wholeMilliseconds / 50) {
            if self.rung.withLock({ rung in
                defer { rung = false }
                return rung
            }) || Task.isShuttingDownGracefully || Task.isCancelled {
                return
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Claims, sends and records one batch; false when nothing was due.
    func runBatch() async throws -> Bool {
        let now = self.clock.nowMilliseconds
        let claimed = try await self.store.claimWebhookMessages(
            limit: self.configuration.batchSize, now: now, leaseMilliseconds: self.configuration.lease.wholeMilliseconds
        )
        guard !claimed.isEmpty else { return false }
        let attempts = await withTaskGroup(of: WebhookAttempt.self) { group in
            for message in claimed {
                group.addTask { await self.deliver(message) }
            }
            var all: [WebhookAttempt] = []
            for await attempt in group { all.append(attempt) }
            return all
        }
        try await self.store.recordWebhookAttempts(attempts, now: self.clock.nowMilliseconds)
        return true
    }

    private func deliver(_ message: ClaimedWebhookMessage) async -> WebhookAttempt {
        let now = self.clock.nowMilliseconds
        guard now < message.expiresAt else {
            return WebhookAttempt(
                messageID: message.id, attempt: message.attempt, delivered: false, status: nil, error: "expired before it was acknowledged",
                retryAt: nil)
        }
        var status: Int?
        var failure: String?
        do {
            let secret = try self.secrets.open(message.webhook.sealedSecret)
            let timestamp = now / 1000
            let headers = [
                ("Content-Type", "application/json"),
                ("User-Agent", "herald-webhooks"),
                ("Herald-Webhook-Id", message.webhook.id),
                ("Herald-Message-Id", "\(message.id)"),
                ("Herald-Attempt", "\(message.attempt)"),
                ("Herald-Signature", "t=\(timestamp),v1=\(Self.signature(secret: secret, timestamp: timestamp, body: message.body))"),
            ]
            status = try await WebhookPoster.post(
                url: message.webhook.url, headers: headers, body: message.body, timeout: self.configuration.timeout,
                allowInternal: self.configuration.allowInternal
            )
            if let status, (200..<300).contains(status) {
                return WebhookAttempt(messageID: message.id, attempt: message.attempt, delivered: true, status: status, error: nil, retryAt: nil)
            }
            failure = "answered \(status ?? 0)"
        } catch {
            failure = "\(error)"
        }
        let retryAt =
            self.clock.nowMilliseconds
            + backOffMilliseconds(attempt: message.attempt, base: self.configuration.retryBase, maximum: self.configuration.retryMaximum)
        self.logger.info(
            "webhook not acknowledged",
            metadata: ["herald.webhook": "\(message.webhook.id)", "herald.attempt": "\(message.attempt)", "error": "\(failure ?? "")"]
        )
        guard retryAt < message.expiresAt else {
            return WebhookAttempt(
                messageID: message.id, attempt: message.attempt, delivered: false, status: status,
                error: "gave up at expiry after \(message.attempt) attempts: \(failure ?? "")", retryAt: nil
            )
        }
        return WebhookAttempt(messageID: message.id, attempt: message.attempt, delivered: false, status: status, error: failure, retryAt: retryAt)
    }

    /// Hex HMAC-SHA256 of `"<timestamp>.<body>"` under the webhook's secret.
    static func signature(secret: [UInt8], timestamp: Int64, body: [UInt8]) -> String {
        let message = Array("\(timestamp).".utf8) + body
        return APIKeySecret.hex(Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret))))
    }
}

/// A minimal HTTP/1.1 POST over NIO (TLS with the system's trust roots for https).
enum WebhookPoster {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static let tls: Result<NIOSSLContext, any Error> = Result { try NIOSSLContext(configuration: .makeClientConfiguration()) }

    /// `host` as URLComponents gives it, without an IPv6 literal's brackets.
    static func bareHost(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// Whether a (bare) host is an IP address rather than a name.
    static func isAddressLiteral(_ host: String) -> Bool {
        host.contains(":") || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    }

    /// Loopback, private, link-local (cloud metadata), carrier-grade NAT and unspecified
    /// addresses: a webhook must not reach into the server's own network unless allowed.
    static func isInternal(_ address: String) -> Bool {
        let text = address.lowercased()
        if text.contains(":") {
            if text.hasPrefix("::ffff:"), text.dropFirst(7).contains(".") { return Self.isInternal(String(text.dropFirst(7))) }
            return text == "::" || text == "::1" || text.hasPrefix("fe8") || text.hasPrefix("fe9") || text.hasPrefix("fea") || text.hasPrefix("feb")
                || text.hasPrefix("fc") || text.hasPrefix("fd")
        }
        let parts = text.split(separator: ".").compactMap { UInt8($0) }
        guard parts.count == 4 else { return true }
        switch (parts[0], parts[1]) {
        case (0, _), (10, _), (127, _), (169, 254), (192, 168): return true
        case (172, 16...31), (100, 64...127): return true
        default: return parts[0] >= 224
        }
    }

    /// Posts `body` and returns the answer's status code. The host is resolved once and the
    /// connection goes to the address checked (no second lookup a DNS answer could change).
    static func post(url text: String, headers: [(String, String)], body: [UInt8], timeout: Duration, allowInternal: Bool) async throws -> Int {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { throw Failure(description: "not an http(s) URL") }
        let secure = scheme == "https"
        let port = url.port ?? (secure ? 443 : 80)
        var target = url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath
        if let query = url.percentEncodedQuery { target += "?" + query }
        let context = try secure ? Self.tls.get() : nil
        let bare = Self.bareHost(host)
        let address: SocketAddress
        do {
            address = try await NIOThreadPool.singleton.runIfActive { try SocketAddress.makeAddressResolvingHost(bare, port: port) }
        } catch {
            throw Failure(description: "cannot resolve the host: \(error)")
        }
        if !allowInternal, Self.isInternal(address.ipAddress ?? "") {
            throw Failure(description: "the host is an internal address (\(address.ipAddress ?? "?")); allow with --webhook-allow-internal")
        }
        // A name is checked against the certificate (and sent as SNI); an address literal is not a name.
        let isAddress = Self.isAddressLiteral(bare)
        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: Int.self)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : bare))
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseHandler(promise: promise))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(to: address).get()
        } catch {
            promise.fail(error)
            throw Failure(description: "cannot connect: \(error)")
        }
        let deadline = channel.eventLoop.scheduleTask(in: .milliseconds(timeout.wholeMilliseconds)) {
            promise.fail(Failure(description: "no answer within \(timeout)"))
            channel.close(promise: nil)
        }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: target)
        head.headers.add(name: "Host", value: url.port.map { "\(host):\($0)" } ?? host)
        head.headers.add(name: "Content-Length", value: "\(body.count)")
        head.headers.add(name: "Connection", value: "close")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer {
            deadline.cancel()
            channel.close(promise: nil)
        }
        return try await promise.futureResult.get()
    }

    private final class ResponseHandler: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        let promise: EventLoopPromise<Int>
        var status: Int?

        init(promise: EventLoopPromise<Int>) {
            self.promise = promise
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head(let head): self.status = Int(head.status.code)
            case .body: break
            case .end:
                if let status = self.status { self.promise.succeed(status) }
                context.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.promise.fail(Failure(description: "the connection closed before a complete answer"))
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            self.promise.fail(error)
            context.close(promise: nil)
        }
    }
}

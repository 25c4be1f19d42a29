// SPDX-License-Identifier: Apache-2.0
public import APNSModels
public import Logging
public import NIOCore
public import NIOPosix
import NIOSSL
public import ServiceLifecycle
import Synchronization

/// An APNs client: one credential, one environment, a pool of HTTP/2 connections.
///
/// ```swift
/// try await withAPNSClient(configuration: configuration) { client in
///     let delivery = try await client.send(request)
/// }
/// ```
///
/// `send` pushes one notification and returns APNs's answer; `send(_:maxInFlight:onResult:)`
/// pushes an async sequence of them, keeping the wire full. Requests are checked locally first
/// (``APNSRequest/validate(certificateAuthentication:)``), so a bad one never reaches APNs.
/// Each has a deadline (``APNSClientConfiguration/requestTimeout`` unless given).
///
/// The client resends on its own only what APNs cannot have processed: refused streams, streams
/// above a GOAWAY's last-stream-id, requests handed back unwritten, and once after
/// `ExpiredProviderToken`. A request written and left unanswered (its connection lost, its
/// deadline passed) comes back with ``APNSClientError/outcomeUnknown`` set, never resent here:
/// APNs may have delivered it. Everything else comes back with a ``FailureClass`` for the
/// caller to act on.
///
/// As a `Service` it runs until graceful shutdown, then finishes what it holds and closes.
public final class APNSClient: Service, Sendable {
    public let configuration: APNSClientConfiguration
    private let intake: Intake
    private let pool: NIOLoopBoundBox<ConnectionPool>
    private let loop: any EventLoop
    private let usesCertificate: Bool
    /// The channel-management pool, made on first use (nil until then), and how to make it.
    private let management: Mutex<ManagementLane>
    private let makeManagementPool: @Sendable (Intake) -> ConnectionPool

    private struct ManagementLane {
        var lane: (intake: Intake, pool: NIOLoopBoundBox<ConnectionPool>)?
        var shutDown = false
    }

    /// - Parameters:
    ///   - eventLoopGroup: where the connections live; one event loop of it carries the pool.
    ///   - clock: wall-clock time for provider tokens (`iat`); tests move it.
    public init(
        configuration: APNSClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        clock: any EpochClock = SystemEpochClock(),
        logger: Logger = Logger(label: "herald.apns-client")
    ) throws(APNSClientError) {
        try configuration.validate()
        self.configuration = configuration
        self.usesCertificate = configuration.credential.usesCertificate
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        // A peer that never answers close_notify (a dead connection) holds a close this long at most.
        tls.shutdownTimeout = .seconds(1)
        switch configuration.trustRoots {
        case .system: break
        case .certificates(let certificates): tls.trustRoots = .certificates(certificates)
        case .pemFile(let path): tls.trustRoots = .file(path)
        }
        var tokenSource: ProviderTokenSource?
        var token: ProviderToken?
        switch configuration.credential {
        case .token(let key, _):
            let source = ProviderTokenSource(
                key: key,
                clock: clock,
                refreshAfterSeconds: Int64(configuration.tokenRefreshInterval.components.seconds)
            )
            do {
                token = try source.current()  // signed now, not on the first request's path
            } catch {
                throw APNSClientError(code: .badConfiguration, message: "cannot sign a provider token: \(error)")
            }
            tokenSource = source
        case .certificate(let chain, let privateKey):
            tls.certificateChain = chain.map { .certificate($0) }
            tls.privateKey = .privateKey(privateKey)
        }
        let sslContext: NIOSSLContext
        do {
            sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw APNSClientError(code: .badConfiguration, message: "cannot set up TLS: \(error)")
        }
        let loop = eventLoopGroup.next()
        self.loop = loop
        self.intake = Intake(capacity: configuration.maximumQueuedRequests)
        var logger = logger
        logger[metadataKey: "apns.environment"] = "\(configuration.environment)"
        let pool = ConnectionPool(
            loop: loop,
            configuration: configuration,
            intake: self.intake,
            sslContext: sslContext,
            tokenSource: tokenSource,
            token: token,
            clock: clock,
            logger: logger
        )
        // The pool is created here but only ever used on `loop`.
        self.pool = NIOLoopBoundBox.makeBoxSendingValue(pool, eventLoop: loop)
        self.management = Mutex(ManagementLane())
        let managementConfiguration = configuration.channelManagement
        var managementLogger = logger
        managementLogger[metadataKey: "apns.pool"] = "channel-management"
        self.makeManagementPool = { [tokenSource, token, clock, managementLogger] intake in
            ConnectionPool(
                loop: loop,
                configuration: managementConfiguration,
                intake: intake,
                sslContext: sslContext,
                tokenSource: tokenSource,
                token: token,
                clock: clock,
                logger: managementLogger
            )
        }
    }

    /// Pushes one notification. Returns APNs's acceptance; throws ``APNSClientError`` for a local
    /// refusal, APNs's rejection, a missed deadline, a connection failure or a shut-down client.
    @discardableResult
    public func send(_ request: APNSRequest, timeout: Duration? = nil) async throws(APNSClientError) -> APNSDelivery {
        do {
            try request.validate(certificateAuthentication: self.usesCertificate)
        } catch {
            throw APNSClientError.invalid(error)
        }
        guard await self.intake.reserve() else {
            throw APNSClientError(code: .shutdown, message: "the client is shut down")
        }
        let timeout = TimeAmount(timeout ?? self.configuration.requestTimeout)
        let result = await withUnsafeContinuation { (continuation: UnsafeContinuation<APNSResult, Never>) in
            let now = NIODeadline.now()
            self.enqueue(Pending(request: request, completion: .continuation(continuation), submitted: now, deadline: now + timeout))
        }
        return try result.get()
    }

    /// Hands a validated request with a reserved place to the pool.
    func enqueue(_ pending: Pending) {
        switch self.intake.enqueue(pending) {
        case .queued(let wake):
            if wake {
                self.loop.execute { [pool = self.pool] in pool.value.dispatch() }
            }
        case .closed:
            pending.complete(.failure(APNSClientError(code: .shutdown, message: "the client is shut down")))
        }
    }

    /// Validates and queues one request of a bulk send; its result goes to `completion`.
    /// `checkedPayload` is the last payload found to be JSON, not parsed again.
    func submit(
        _ request: APNSRequest, timeout: TimeAmount, checkedPayload: inout [UInt8]?, completion: @escaping @Sendable (APNSRequest, APNSResult) -> Void
    ) async {
        do {
            try request.validate(certificateAuthentication: self.usesCertificate, checkedPayload: &checkedPayload)
        } catch {
            return completion(request, .failure(APNSClientError.invalid(error)))
        }
        guard await self.intake.reserve() else {
            return completion(request, .failure(APNSClientError(code: .shutdown, message: "the client is shut down")))
        }
        let now = NIODeadline.now()
        self.enqueue(Pending(request: request, completion: .callback(completion), submitted: now, deadline: now + timeout))
    }

    /// Runs until graceful shutdown, then shuts the client down.
    public func run() async throws {
        try? await gracefulShutdown()
        await self.shutdown()
    }

    /// Stops taking requests, sends what it holds (each within its deadline), closes the
    /// connections. Safe to call more than once.
    /// Connections open or being opened now.
    public func openConnections() async -> Int {
        (try? await self.loop.submit { [pool = self.pool] in pool.value.openConnections }.get()) ?? 0
    }

    public func shutdown() async {
        let management = self.management.withLock { state in
            state.shutDown = true
            return state.lane?.pool
        }
        let promise = self.loop.makePromise(of: Void.self)
        self.loop.execute { [pool = self.pool] in pool.value.shutdown(promise: promise) }
        try? await promise.futureResult.get()
        if let management {
            let promise = self.loop.makePromise(of: Void.self)
            self.loop.execute { management.value.shutdown(promise: promise) }
            try? await promise.futureResult.get()
        }
    }

    // MARK: broadcast and channel management

    /// Sends a request that is not a device push on the device pool (broadcasts) or the
    /// channel-management pool, with the client's auth and deadlines. Returns APNs's answer.
    func sendExtra(
        _ extra: ExtraRequest, payload: [UInt8], management: Bool, timeout: Duration?
    ) async throws(APNSClientError) -> (APNSDelivery, ExtraRequest.Answer) {
        let intake: Intake
        let pool: NIOLoopBoundBox<ConnectionPool>
        if management {
            guard let lane = self.managementLane() else { throw APNSClientError(code: .shutdown, message: "the client is shut down") }
            (intake, pool) = lane
        } else {
            (intake, pool) = (self.intake, self.pool)
        }
        guard await intake.reserve() else {
            throw APNSClientError(code: .shutdown, message: "the client is shut down")
        }
        let request = APNSRequest(
            deviceToken: ExtraRequest.placeholder, headers: NotificationHeaders(pushType: .liveactivity, topic: ""), payload: payload)
        let timeout = TimeAmount(timeout ?? self.configuration.requestTimeout)
        let result = await withUnsafeContinuation { (continuation: UnsafeContinuation<APNSResult, Never>) in
            let now = NIODeadline.now()
            let pending = Pending(request: request, completion: .continuation(continuation), submitted: now, deadline: now + timeout, extra: extra)
            switch intake.enqueue(pending) {
            case .queued(let wake):
                if wake { self.loop.execute { pool.value.dispatch() } }
            case .closed:
                pending.complete(.failure(APNSClientError(code: .shutdown, message: "the client is shut down")))
            }
        }
        return (try result.get(), extra.result)
    }

    /// The channel-management pool, made now if this is its first use; nil once shut down.
    private func managementLane() -> (Intake, NIOLoopBoundBox<ConnectionPool>)? {
        self.management.withLock { state in
            guard !state.shutDown else { return nil }
            if let lane = state.lane { return lane }
            let intake = Intake(capacity: self.configuration.maximumQueuedRequests)
            let lane = (intake: intake, pool: NIOLoopBoundBox.makeBoxSendingValue(self.makeManagementPool(intake), eventLoop: self.loop))
            state.lane = lane
            return lane
        }
    }
}

/// Creates a client, runs `body` with it, and shuts it down afterwards, whatever `body` does.
public func withAPNSClient<Result>(
    configuration: APNSClientConfiguration,
    eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
    clock: any EpochClock = SystemEpochClock(),
    logger: Logger = Logger(label: "herald.apns-client"),
    _ body: (APNSClient) async throws -> Result
) async throws -> Result {
    let client = try APNSClient(configuration: configuration, eventLoopGroup: eventLoopGroup, clock: clock, logger: logger)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}

extension TimeAmount {
    /// Saturates instead of trapping: a timeout of centuries means "never", not a crash.
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow {
            self = .nanoseconds(seconds < 0 ? .min : .max)
            return
        }
        let (total, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        self = .nanoseconds(overflowAgain ? (whole < 0 ? .min : .max) : total)
    }
}

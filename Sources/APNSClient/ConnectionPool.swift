// SPDX-License-Identifier: Apache-2.0
import APNSModels
import CoreMetrics
import DequeModule
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// The connections of one client and everything that decides what goes on which, confined to
/// one event loop: no locks inside, only the ``Intake`` at its door.
///
/// It keeps `connections` connections open once the first request arrives (Apple asks for
/// long-lived connections), replaces ones that fail, drain or stop answering PINGs, reconnects
/// with exponential back-off and jitter, resends what APNs never processed, reports what it may
/// have processed without an answer as an unknown outcome (``ResendPolicy``), and fails requests
/// whose deadline passes — queued, waiting for a resend, or in flight.
final class ConnectionPool {
    let loop: any EventLoop
    let configuration: APNSClientConfiguration
    let intake: Intake
    let tokenSource: ProviderTokenSource?
    /// The shared provider token every connection sends (token auth).
    private(set) var token: ProviderToken?
    let authority: String
    let metrics: ClientMetrics
    private let sslContext: NIOSSLContext
    private let clock: any EpochClock
    private var logger: Logger

    private var connections: [APNSConnection] = []
    /// Requests to put on the wire again, ahead of the intake.
    private var retries = Deque<Pending>()
    private var nextConnectionID = 0
    private var consecutiveFailures = 0
    private var reconnect: Scheduled<Void>?
    private var sweeper: RepeatedTask?
    private var started = false
    private var lastConnectionError: String?
    private var shutdownPromise: EventLoopPromise<Void>?
    private var shutDown = false
    private var roundRobin = 0
    private let resendPolicy: ResendPolicy

    init(
        loop: any EventLoop,
        configuration: APNSClientConfiguration,
        intake: Intake,
        sslContext: NIOSSLContext,
        tokenSource: ProviderTokenSource?,
        token: ProviderToken?,
        clock: any EpochClock,
        logger: Logger
    ) {
        self.loop = loop
        self.configuration = configuration
        self.intake = intake
        self.sslContext = sslContext
        self.tokenSource = tokenSource
        self.token = token
        self.clock = clock
        self.logger = logger
        self.metrics = ClientMetrics(environment: configuration.environment.rawValue)
        self.resendPolicy = ResendPolicy(maximumResends: configuration.maximumResends)
        let host = configuration.resolvedHost
        self.authority = configuration.port == 443 ? host : "\(host):\(configuration.port)"
    }

    var openConnections: Int { self.connections.reduce(0) { $0 + ($1.state == .connecting || $1.state == .ready ? 1 : 0) } }

    // MARK: dispatch

    /// Puts waiting requests on connections with free streams, resends first, then the intake,
    /// spreading them round-robin; one flush per connection.
    func dispatch() {
        if !self.started { self.start() }
        guard !self.connections.isEmpty else {
            self.ensureConnections()
            if self.shutdownPromise != nil { self.checkShutdown() }
            return
        }
        // A snapshot: a flush that fails closes its channel at once, which changes `connections`.
        let snapshot = self.connections
        let count = snapshot.count
        for offset in 0..<count {
            let connection = snapshot[(self.roundRobin + offset) % count]
            guard connection.state == .ready else { continue }
            var wrote = false
            var capacity = connection.capacity
            while capacity > 0, let pending = self.retries.popFirst() {
                connection.send(pending)
                capacity = connection.capacity
                wrote = true
            }
            if capacity > 0 {
                for pending in self.intake.take(upTo: capacity) {
                    connection.send(pending)
                    wrote = true
                }
            }
            if wrote { connection.flush() }
        }
        self.roundRobin &+= 1
        self.ensureConnections()
        if self.shutdownPromise != nil { self.checkShutdown() }
    }

    private func start() {
        self.started = true
        let interval = Self.sweepInterval(for: self.configuration)
        self.sweeper = self.loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) {
            [bound = NIOLoopBound(self, eventLoop: self.loop)] _ in
            bound.value.sweep()
        }
    }

    static func sweepInterval(for configuration: APNSClientConfiguration) -> TimeAmount {
        let quarter = TimeAmount.nanoseconds(TimeAmount(configuration.requestTimeout).nanoseconds / 4)
        return min(max(quarter, .milliseconds(10)), .milliseconds(250))
    }

    /// Opens connections up to the configured count, unless a back-off is pending.
    private func ensureConnections() {
        guard !self.shutDown else { return }
        guard self.shutdownPromise == nil || !self.intake.isEmpty || !self.retries.isEmpty else { return }
        guard self.reconnect == nil else { return }
        while self.openConnections < self.configuration.connections {
            if self.consecutiveFailures > 0 {
                self.scheduleReconnect()
                return
            }
            self.connect()
        }
    }

    private func scheduleReconnect() {
        let backoff = self.configuration.reconnectBackoff
        let exponent = min(self.consecutiveFailures - 1, 16)
        let base = min(TimeAmount.nanoseconds(TimeAmount(backoff.initial).nanoseconds << exponent), TimeAmount(backoff.maximum))
        let delay = TimeAmount.nanoseconds(Int64(Double(base.nanoseconds) * Double.random(in: 0.5...1.0)))
        self.logger.debug("reconnecting after back-off", metadata: ["apns.backoff_ms": "\(delay.nanoseconds / 1_000_000)"])
        self.reconnect = self.loop.scheduleTask(in: delay) { [bound = NIOLoopBound(self, eventLoop: self.loop)] in
            let pool = bound.value
            pool.reconnect = nil
            guard !pool.shutDown else { return }
            while pool.openConnections < pool.configuration.connections { pool.connect() }
        }
    }

    private func connect() {
        self.nextConnectionID += 1
        let connection = APNSConnection(
            id: self.nextConnectionID,
            pool: self,
            usesToken: self.tokenSource != nil,
            streamCap: self.configuration.maximumStreamsPerConnection ?? .max,
            logger: self.logger,
            allocator: ByteBufferAllocator()
        )
        self.connections.append(connection)
        self.metrics.connectionsOpened.increment()
        let host = self.configuration.resolvedHost
        // SNI takes names only; an IP address is checked against the certificate's IP entries.
        let serverName: String? = Self.isIPAddress(host) ? nil : host
        let context = self.sslContext
        let bound = NIOLoopBound((self, connection), eventLoop: self.loop)
        // A new bootstrap per connection: `connect(host:port:)` resolves the name afresh each time,
        // as Apple asks, so new connections spread over APNs's servers.
        ClientBootstrap(group: self.loop)
            .connectTimeout(TimeAmount(self.configuration.connectTimeout))
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                do {
                    let tls = try NIOSSLClientHandler(context: context, serverHostname: serverName)
                    try channel.pipeline.syncOperations.addHandler(tls)
                    try channel.pipeline.syncOperations.addHandler(bound.value.1)
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
            .connect(host: host, port: self.configuration.port)
            .whenFailure { error in
                let (pool, connection) = bound.value
                pool.connectFailed(connection, error: error)
            }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }

    private func connectFailed(_ connection: APNSConnection, error: any Error) {
        guard let index = self.connections.firstIndex(where: { $0 === connection }) else { return }
        self.connections.remove(at: index)
        self.noteFailure("cannot connect to \(self.configuration.resolvedHost):\(self.configuration.port): \(error)")
        self.ensureConnections()
        if self.shutdownPromise != nil { self.checkShutdown() }
    }

    private func noteFailure(_ message: String) {
        self.consecutiveFailures += 1
        self.lastConnectionError = message
        self.metrics.connectionFailures.increment()
        self.logger.warning("APNs connection failed", metadata: ["error": "\(message)", "apns.failures": "\(self.consecutiveFailures)"])
    }

    // MARK: connection events

    func connectionReady(_ connection: APNSConnection) {
        self.consecutiveFailures = 0
        self.lastConnectionError = nil
        self.dispatch()
    }

    /// GOAWAY or a retirement: a replacement opens while the old one finishes its streams.
    func connectionDraining(_ connection: APNSConnection, failedBeforeReady: Bool) {
        if failedBeforeReady { self.noteFailure(connection.closeReason ?? "GOAWAY before the first request") }
        self.dispatch()
    }

    func connectionClosed(_ connection: APNSConnection, becameReady: Bool, unanswered: [Pending], reason: String) {
        self.connections.removeAll { $0 === connection }
        if !becameReady {
            self.noteFailure(reason)
        } else {
            self.logger.debug("APNs connection closed", metadata: ["apns.connection": "\(connection.id)", "reason": "\(reason)"])
        }
        // Written but never answered: APNs may have processed them. Reported as unknown outcomes,
        // never resent here: the caller decides, once.
        let now = NIODeadline.now()
        for pending in unanswered {
            self.apply(
                self.resendPolicy.decide(.connectionLost(reason: reason), sends: pending.sends, written: true, deadline: pending.deadline, now: now),
                to: pending)
        }
        self.dispatch()
    }

    // MARK: outcomes

    func succeeded(_ pending: Pending, _ delivery: APNSDelivery) {
        self.metrics.succeeded.increment()
        self.metrics.latency.recordNanoseconds(NIODeadline.now().uptimeNanoseconds - pending.submitted.uptimeNanoseconds)
        pending.complete(.success(delivery))
    }

    func failed(_ pending: Pending, _ error: APNSClientError) {
        self.metrics.failed(error.failureClass)
        if error.outcomeUnknown { self.metrics.unknownOutcomes.increment() }
        pending.complete(.failure(error))
    }

    /// `sent`: the deadline passed while it was on the wire, unanswered (an unknown outcome);
    /// otherwise it was queued, or waiting to be resent after APNs did not process it.
    func deadlineExceeded(_ pending: Pending, sent: Bool) {
        self.metrics.deadlines.increment()
        if sent { return self.failed(pending, ResendPolicy.deadlinePassedInFlight()) }
        let message: String
        if let error = self.lastConnectionError {
            message = "not sent before the deadline: \(error)"
        } else {
            message = "not sent before the deadline (no free stream)"
        }
        self.failed(pending, APNSClientError(code: .deadlineExceeded, message: message))
    }

    /// Puts a request APNs did not process on the wire again, at the front of the line, unless
    /// it was sent too often or its deadline passed (``ResendPolicy``).
    /// `countingSend`: it went on the wire (and counts against `maximumResends`); otherwise it
    /// was handed back before being written.
    func resend(_ pending: Pending, countingSend: Bool, reason: String = "not processed") {
        self.apply(
            self.resendPolicy.decide(
                .notProcessed(reason: reason), sends: pending.sends, written: countingSend, deadline: pending.deadline, now: .now()),
            to: pending)
    }

    private func apply(_ decision: ResendPolicy.Decision, to pending: Pending) {
        switch decision {
        case .resend(let counts):
            if counts { self.metrics.resent.increment() }
            self.retries.append(pending)
        case .fail(let error):
            if error.code == .deadlineExceeded { self.metrics.deadlines.increment() }
            self.failed(pending, error)
        }
    }

    /// `ExpiredProviderToken`: a new token, and the request once more on a fresh connection
    /// (the one that refused it may not switch tokens within 20 minutes).
    func providerTokenExpired(_ pending: Pending, token: ProviderToken?, on connection: APNSConnection) {
        var pending = pending
        guard !pending.tokenRetried, let source = self.tokenSource, let token else {
            return self.failed(
                pending,
                APNSClientError(
                    code: .rejected, message: "APNs answered 403 ExpiredProviderToken after a refresh", status: 403, reason: .expiredProviderToken)
            )
        }
        do {
            self.token = try source.refresh(replacing: token)
            self.metrics.tokenRefreshes.increment()
        } catch {
            return self.failed(pending, APNSClientError(code: .badConfiguration, message: "cannot sign a provider token: \(error)"))
        }
        pending.tokenRetried = true
        pending.sends = max(0, pending.sends - 1)
        connection.drain(reason: "APNs found its provider token expired")
        self.retries.append(pending)
    }

    // MARK: timers

    /// Deadlines, PING health checks, slow handshakes and provider-token refresh.
    private func sweep() {
        let now = NIODeadline.now()
        for pending in self.intake.removeExpired(now: now) { self.deadlineExceeded(pending, sent: false) }
        if self.retries.contains(where: { $0.deadline <= now }) {
            let expired = self.retries.filter { $0.deadline <= now }
            self.retries.removeAll { $0.deadline <= now }
            // Waiting for a resend: APNs never processed it (an unknown outcome is not resent).
            for pending in expired { self.deadlineExceeded(pending, sent: false) }
        }
        let pingInterval = TimeAmount(self.configuration.pingInterval)
        let pingTimeout = TimeAmount(self.configuration.pingTimeout)
        let connectTimeout = TimeAmount(self.configuration.connectTimeout)
        for connection in self.connections {
            connection.expire(now: now)
            switch connection.state {
            case .connecting where now - connection.openedAt > connectTimeout:
                connection.close(reason: "no HTTP/2 SETTINGS from APNs within the connect timeout")
            case .ready, .draining:
                if let sent = connection.pingSentAt {
                    if now - sent > pingTimeout { connection.close(reason: "PING unanswered; the connection is dead") }
                } else if now - connection.lastRead > pingInterval {
                    connection.ping(now: now)
                }
            default:
                break
            }
        }
        if let source = self.tokenSource, let token = self.token,
            self.clock.nowSeconds - token.issuedAt >= Int64(self.configuration.tokenRefreshInterval.components.seconds)
        {
            // Signing happens here, on the timer, never on a request's path.
            if let fresh = try? source.current(), fresh.generation != token.generation {
                self.token = fresh
                self.metrics.tokenRefreshes.increment()
            }
        }
        // Streams freed by deadlines, resends waiting, queued requests: put them on the wire.
        self.dispatch()
    }

    // MARK: shutdown

    /// Sends what is queued and in flight (each within its deadline), then closes every connection.
    func shutdown(promise: EventLoopPromise<Void>) {
        if let existing = self.shutdownPromise {
            existing.futureResult.cascade(to: promise)
            return
        }
        self.shutdownPromise = promise
        self.intake.close()
        self.checkShutdown()
    }

    private func checkShutdown() {
        guard let promise = self.shutdownPromise, !self.shutDown else { return }
        let busy = !self.intake.isEmpty || !self.retries.isEmpty || self.connections.contains { $0.inFlight > 0 }
        if busy {
            // Requests still waiting: make sure something carries them (or their deadlines end them).
            if self.started { return }
            self.dispatch()
            return
        }
        self.shutDown = true
        self.reconnect?.cancel()
        self.reconnect = nil
        self.sweeper?.cancel()
        self.sweeper = nil
        let closing = self.connections
        self.connections.removeAll()
        for connection in closing { connection.shutdown() }
        // Let the close callbacks run before reporting done.
        self.loop.execute { promise.succeed(()) }
    }
}

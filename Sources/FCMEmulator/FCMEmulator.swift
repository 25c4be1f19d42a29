// SPDX-License-Identifier: Apache-2.0
import Hummingbird
public import Logging
import NIOCore
public import ServiceLifecycle
import Synchronization

/// A local stand-in for Firebase Cloud Messaging's HTTP v1 API: Google's OAuth token endpoint
/// for service-account JWTs, `messages:send` with FCM's checks and error envelopes, virtual
/// Android devices with inboxes, and faults. One HTTP/1.1 listener; see `docs/fcm-emulator.md`.
///
/// Run it as a `Service`, or call ``start()`` and ``stop()`` around in-process tests.
public final class FCMEmulator: Service, Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        /// 0 lets the system pick a free port (read it from ``port`` after ``start()``).
        public var port = 0
        public init() {}
    }

    public let configuration: Configuration
    public let clock: FCMEmulatorClock
    let logger: Logger
    let state = FCMState()
    private let runtime = Mutex(Runtime())

    private struct Runtime: Sendable {
        enum Phase { case idle, running, stopped }
        var phase = Phase.idle
        var port: Int?
        /// Who waits for the listener to be bound (``start()``, ``waitUntilListening()``).
        var listenWaiters: [CheckedContinuation<Int, any Error>] = []
        var group: ServiceGroup?
        var task: Task<Void, Never>?
    }

    struct NotListening: Error, CustomStringConvertible {
        var description: String { "the FCM emulator is not listening (stopped, or it could not bind)" }
    }

    public init(configuration: Configuration = .init(), clock: FCMEmulatorClock = .system, logger: Logger = Logger(label: "fcm-emulator")) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
    }

    // MARK: addresses

    /// The bound port, after ``start()`` (or once ``run()`` listens).
    public var port: Int? { self.runtime.withLock { $0.port } }

    /// `http://<host>:<port>` (port 0 before the emulator listens).
    public var baseURL: String { "http://\(self.configuration.host):\(self.port ?? self.configuration.port)" }

    /// The OAuth token endpoint to put in a service account's `token_uri`.
    public var tokenURL: String { self.baseURL + "/token" }

    var tokenURLIfBound: String? { self.port == nil ? nil : self.tokenURL }

    // MARK: lifecycle

    /// Binds the listener and serves in the background until ``stop()``. Throws if the port cannot
    /// be bound. Calling it again while running does nothing.
    public func start() async throws {
        let group = ServiceGroup(configuration: .init(services: [Serving(emulator: self)], logger: self.logger))
        let claimed = try self.runtime.withLock { runtime in
            switch runtime.phase {
            case .idle:
                runtime.phase = .running
                runtime.group = group
                return true
            case .running: return false
            case .stopped: throw NotListening()
            }
        }
        if claimed {
            // The one task the emulator owns: it serves until stop() shuts the group down
            // gracefully, and stop() waits for it.
            let task = Task {
                do {
                    try await group.run()
                    self.served(error: nil)
                } catch {
                    self.served(error: error)
                }
            }
            self.runtime.withLock { $0.task = task }
        }
        _ = try await self.waitUntilListening()
    }

    /// Waits (without polling) until the listener is bound and returns its port; throws if the
    /// emulator stops or fails to bind first. For callers that run it as a `Service` on port 0.
    @discardableResult
    public func waitUntilListening() async throws -> Int {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
            let answer = self.runtime.withLock { runtime -> Result<Int, any Error>? in
                if let port = runtime.port, runtime.phase == .running { return .success(port) }
                if runtime.phase == .stopped { return .failure(NotListening()) }
                runtime.listenWaiters.append(continuation)
                return nil
            }
            if let answer { continuation.resume(with: answer) }
        }
    }

    /// Ends event streams, shuts the listener down gracefully and waits until it has.
    public func stop() async {
        let (group, task, waiters) = self.runtime.withLock { runtime in
            runtime.phase = .stopped
            defer { runtime.listenWaiters = [] }
            return (runtime.group, runtime.task, runtime.listenWaiters)
        }
        for waiter in waiters { waiter.resume(throwing: NotListening()) }
        self.state.endAllStreams()
        await group?.triggerGracefulShutdown()
        await task?.value
    }

    /// As a `Service`: serves until graceful shutdown (or cancellation), then stops.
    public func run() async throws {
        try self.runtime.withLock { runtime in
            guard runtime.phase == .idle else { throw NotListening() }
            runtime.phase = .running
        }
        do {
            try await self.serve()
            self.served(error: nil)
        } catch {
            self.served(error: error)
            throw error
        }
    }

    /// Runs the Hummingbird application until graceful shutdown.
    func serve() async throws {
        let application = Application(
            responder: FCMResponder(emulator: self),
            configuration: ApplicationConfiguration(address: .hostname(self.configuration.host, port: self.configuration.port)),
            onServerRunning: { [self] channel in self.listening(port: channel.localAddress?.port ?? self.configuration.port) },
            logger: self.logger
        )
        // Open event streams would hold their connections through the graceful shutdown.
        try await withGracefulShutdownHandler {
            try await application.run()
        } onGracefulShutdown: {
            self.state.endAllStreams()
        }
    }

    private func listening(port: Int) {
        let waiters = self.runtime.withLock { runtime in
            runtime.port = port
            defer { runtime.listenWaiters = [] }
            return runtime.listenWaiters
        }
        self.logger.info("FCM emulator listening", metadata: ["emulator.port": "\(port)"])
        for waiter in waiters { waiter.resume(returning: port) }
    }

    private func served(error: (any Error)?) {
        let waiters = self.runtime.withLock { runtime in
            runtime.phase = .stopped
            defer { runtime.listenWaiters = [] }
            return runtime.listenWaiters
        }
        self.state.endAllStreams()
        if let error { self.logger.error("FCM emulator stopped", metadata: ["error": "\(error)"]) }
        for waiter in waiters { waiter.resume(throwing: error ?? NotListening()) }
    }

    private struct Serving: Service {
        let emulator: FCMEmulator
        func run() async throws { try await self.emulator.serve() }
    }
}

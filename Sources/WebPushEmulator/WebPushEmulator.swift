// SPDX-License-Identifier: Apache-2.0
import Hummingbird
import HummingbirdWebSocket
package import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// A local Web Push service (RFC 8030): push endpoints that answer like Apple's, Mozilla's or
/// FCM's service, virtual browsers that decrypt what they receive, and the autopush WebSocket
/// protocol that real Firefox speaks. One HTTP/1.1 listener serves the push endpoints, the
/// control API (`/emulator/…`) and the WebSocket (`ws://<host>:<port>/`); see
/// `docs/webpush-emulator.md`.
///
/// Run it as a `Service`, or call ``start()`` and ``shutdown()`` around in-process tests.
package final class WebPushEmulator: Service, Sendable {
    package struct Configuration: Sendable {
        package var host = "127.0.0.1"
        /// 0 lets the system pick a free port (read it from ``port`` after ``start()``).
        package var port = 0
        package init() {}
    }

    package let configuration: Configuration
    package let clock: WebPushEmulatorClock
    let logger: Logger
    let state = WebPushState()
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
        var description: String { "the Web Push emulator is not listening (stopped, or it could not bind)" }
    }

    /// With no `logger`, it logs nothing.
    package init(configuration: Configuration = .init(), clock: WebPushEmulatorClock = .system, logger: Logger? = nil) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger ?? Logger(label: "webpush-emulator", factory: { _ in SwiftLogNoOpLogHandler() })
    }

    // MARK: addresses

    /// The bound port, after ``start()`` (or once ``run()`` listens).
    package var port: Int? { self.runtime.withLock { $0.port } }

    /// `http://<host>:<port>`: the push endpoints' origin, so the VAPID `aud` every endpoint
    /// expects (port 0 before the emulator listens).
    package var origin: String { "http://\(self.configuration.host):\(self.port ?? self.configuration.port)" }

    /// `ws://<host>:<port>/`: Firefox's `dom.push.serverURL`.
    package var webSocketURL: String { "ws://\(self.configuration.host):\(self.port ?? self.configuration.port)/" }

    // MARK: lifecycle

    /// Binds the listener and serves in the background until ``shutdown()``. Throws if the port
    /// cannot be bound. Calling it again while running does nothing.
    package func start() async throws {
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
            // The one task the emulator owns (as FCMEmulator.start does): it serves until
            // shutdown() shuts the group down gracefully, and shutdown() waits for it.
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
    package func waitUntilListening() async throws -> Int {
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

    /// Ends event streams, shuts the listener (and open WebSockets) down gracefully and waits
    /// until it has.
    package func shutdown() async {
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
    package func run() async throws {
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
            responder: WebPushResponder(emulator: self),
            server: .http1WebSocketUpgrade(
                configuration: .init(ws: .init(maxFrameSize: 1 << 16, closeTimeout: .seconds(2))),
                shouldUpgrade: { [self] request, _, _ in self.upgrade(request) }
            ),
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
        self.logger.info("Web Push emulator listening", metadata: ["emulator.port": "\(port)"])
        for waiter in waiters { waiter.resume(returning: port) }
    }

    private func served(error: (any Error)?) {
        let waiters = self.runtime.withLock { runtime in
            runtime.phase = .stopped
            defer { runtime.listenWaiters = [] }
            return runtime.listenWaiters
        }
        self.state.endAllStreams()
        if let error { self.logger.error("Web Push emulator stopped", metadata: ["error": "\(error)"]) }
        for waiter in waiters { waiter.resume(throwing: error ?? NotListening()) }
    }

    private struct Serving: Service {
        let emulator: WebPushEmulator
        func run() async throws { try await self.emulator.serve() }
    }
}

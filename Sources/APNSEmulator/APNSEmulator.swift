// SPDX-License-Identifier: Apache-2.0
public import APNSModels
public import Logging
public import NIOCore
import NIOHTTP2
public import NIOPosix
import NIOSSL
public import ServiceLifecycle
import Synchronization

/// A local stand-in for Apple Push Notification service: an HTTP/2 server that validates
/// requests the way APNs does and delivers accepted notifications to virtual devices.
///
/// Run it as a `Service`, or scoped with ``withAPNSEmulator(configuration:clock:logger:_:)``.
/// Drive it through ``state`` in-process, or through the control API over HTTP.
public final class APNSEmulator: Service, Sendable {
    public let configuration: Configuration
    public let clock: EmulatorClock
    public let state: EmulatorState
    public let authority: CertificateAuthority
    let logger: Logger
    let group: any EventLoopGroup
    let tokenCache = VerifiedTokenCache()
    private let runtime = Mutex<Runtime>(Runtime())

    struct Runtime: Sendable {
        var serverChannels: [any Channel] = []
        var ports: [APNSEnvironment: Int] = [:]
        var h2cPorts: [APNSEnvironment: Int] = [:]
        var controlPort: Int?
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// Connections accepted over the emulator's whole life. Unlike the `connections` counter,
        /// `DELETE /v1/counters` does not reset it: it seeds each connection's id generator, so
        /// generated `apns-id`s and `apns-unique-id`s never repeat after a reset.
        var connectionSerial: UInt64 = 0
        var started = false
        var stopped = false
    }

    /// - Parameters:
    ///   - logger: Where the emulator logs; without one it logs nothing.
    public init(
        configuration: Configuration = Configuration(),
        clock: EmulatorClock = EmulatorClock(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger? = nil
    ) throws {
        self.configuration = configuration
        self.clock = clock
        self.group = eventLoopGroup
        self.logger = logger ?? Logger(label: "herald.emulator", factory: { _ in SwiftLogNoOpLogHandler() })
        self.state = EmulatorState(
            inboxCapacity: configuration.inboxCapacity,
            logCapacity: configuration.requestLogCapacity,
            seed: configuration.randomSeed
        )
        if let directory = configuration.dataDirectory {
            self.authority = try CertificateAuthority.loadOrCreate(in: directory)
        } else {
            self.authority = try CertificateAuthority()
        }
    }

    /// The bound TLS port of each environment (after start).
    public var ports: [APNSEnvironment: Int] { self.runtime.withLock { $0.ports } }
    /// The bound cleartext (h2c) port of each environment (after start).
    public var cleartextPorts: [APNSEnvironment: Int] { self.runtime.withLock { $0.h2cPorts } }
    /// The bound control-API port (after start).
    public var controlPort: Int? { self.runtime.withLock { $0.controlPort } }

    /// The CA certificate (PEM) that signed the emulator's server certificate.
    public var certificateAuthorityPEM: String { self.authority.certificatePEM }

    /// Trusts a signing key, as registering it in a developer account does.
    public func register(key: SigningKey, environments: Set<APNSEnvironment> = [.development, .production], topics: [String]? = nil) {
        self.state.register(
            key: RegisteredKey(
                teamID: key.teamID, keyID: key.keyID, publicKey: key.publicKey, environments: environments, topics: topics
            )
        )
    }

    // MARK: lifecycle

    /// Binds every listener. Throws if a port cannot be bound (nothing stays bound then).
    public func start() async throws {
        guard
            self.runtime.withLock({ state in
                defer { state.started = true }
                return !state.started
            })
        else { return }
        do {
            let tlsContext = try self.makeTLSContext()
            for listener in self.configuration.listeners {
                let channel = try await self.bindAPNS(listener, tlsContext: listener.tls ? tlsContext : nil)
                let port = channel.localAddress?.port ?? listener.port
                self.runtime.withLock { runtime in
                    runtime.serverChannels.append(channel)
                    if listener.tls { runtime.ports[listener.environment] = port } else { runtime.h2cPorts[listener.environment] = port }
                }
                self.logger.info(
                    "APNs emulator listening",
                    metadata: [
                        "emulator.environment": "\(listener.environment)", "emulator.port": "\(port)",
                        "emulator.tls": "\(listener.tls)",
                    ]
                )
            }
            if let controlPort = self.configuration.controlPort {
                let channel = try await ControlServer(emulator: self).bind(host: self.configuration.controlHost, port: controlPort)
                let port = channel.localAddress?.port ?? controlPort
                self.runtime.withLock { runtime in
                    runtime.serverChannels.append(channel)
                    runtime.controlPort = port
                }
                self.logger.info("APNs emulator control API listening", metadata: ["emulator.port": "\(port)"])
            }
        } catch {
            await self.stop()
            throw error
        }
    }

    /// Sends GOAWAY `Shutdown` on every connection, closes the listeners and waits for them.
    public func stop() async {
        let (servers, connections) = self.runtime.withLock { runtime -> ([any Channel], [any Channel]) in
            guard !runtime.stopped else { return ([], []) }
            runtime.stopped = true
            return (runtime.serverChannels, Array(runtime.connections.values))
        }
        for server in servers { try? await server.close() }
        for connection in connections {
            connection.eventLoop.execute {
                if let handler = try? connection.pipeline.syncOperations.handler(type: APNSConnectionHandler.self) {
                    handler.shutdown()
                } else {
                    connection.close(promise: nil)
                }
            }
        }
        for connection in connections { try? await connection.closeFuture.get() }
    }

    /// Serves until the task is cancelled or a graceful shutdown is triggered.
    public func run() async throws {
        try await self.start()
        try? await gracefulShutdown()
        await self.stop()
    }

    // MARK: plumbing

    private func makeTLSContext() throws -> NIOSSLContext {
        do {
            let server = try self.authority.issueServerCertificate()
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: [
                    .certificate(try NIOSSLCertificate(bytes: Array(server.certificatePEM.utf8), format: .pem)),
                    .certificate(try NIOSSLCertificate(bytes: Array(self.authority.certificatePEM.utf8), format: .pem)),
                ],
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(server.privateKeyPEM.utf8), format: .pem))
            )
            tls.minimumTLSVersion = .tlsv12
            tls.applicationProtocols = ["h2"]
            // Ask for a client certificate but do not require one: one port serves both auth modes.
            tls.certificateVerification = .optionalVerification
            tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(self.authority.certificatePEM.utf8), format: .pem)])
            tls.sendCANameList = true
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw EmulatorError(.tls, "cannot set up TLS", cause: error)
        }
    }

    private func bindAPNS(_ listener: Listener, tlsContext: NIOSSLContext?) async throws -> any Channel {
        let processor = RequestProcessor(
            configuration: self.configuration, state: self.state, clock: self.clock, tokenCache: self.tokenCache
        )
        // APNs's SETTINGS: table 4096, one stream until the first authenticated request, window
        // 65535, frames of 16384, header lists of 8000.
        let settings: [(UInt16, Int)] = [(1, 4096), (3, 1), (4, 65_535), (5, HTTP2ServerCodec.maxFrameSize), (6, HTTP2ServerCodec.maxHeaderListSize)]
        let seedBase = self.configuration.randomSeed ?? UInt64.random(in: 0...UInt64.max)
        do {
            return try await ServerBootstrap(group: self.group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    let (id, serial) = self.connectionOpened(channel)
                    return channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if let tlsContext { try sync.addHandler(NIOSSLServerHandler(context: tlsContext)) }
                        // The emulator's own lean HTTP/2 framing (see HTTP2ServerCodec for why).
                        try sync.addHandler(
                            HTTP2ServerCodec(settings: settings, streamCap: self.configuration.maxConcurrentStreams, allocator: channel.allocator)
                        )
                        try sync.addHandler(
                            APNSConnectionHandler(processor: processor, listener: listener, connectionID: id, seed: seedBase &+ serial)
                        )
                    }
                }
                .bind(host: listener.host, port: listener.port)
                .get()
        } catch {
            throw EmulatorError(.bind, "cannot listen on \(listener.host):\(listener.port)", cause: error)
        }
    }

    /// Registers an accepted connection: its id as the counters number it (restarts after a
    /// counter reset) and its serial over the emulator's life (never repeats).
    private func connectionOpened(_ channel: any Channel) -> (id: Int, serial: UInt64) {
        let key = ObjectIdentifier(channel)
        let (stopped, serial) = self.runtime.withLock { runtime in
            runtime.connections[key] = channel
            runtime.connectionSerial += 1
            return (runtime.stopped, runtime.connectionSerial)
        }
        if stopped { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in
            _ = self.runtime.withLock { $0.connections.removeValue(forKey: key) }
        }
        var id = 0
        self.state.count { counters in
            counters.connections += 1
            id = counters.connections
        }
        return (id, serial)
    }
}

/// Starts an emulator, hands it to `body`, and stops it on every way out.
public func withAPNSEmulator<Result>(
    configuration: APNSEmulator.Configuration = .testing(),
    clock: EmulatorClock = EmulatorClock(),
    logger: Logger? = nil,
    _ body: (APNSEmulator) async throws -> Result
) async throws -> Result {
    let emulator = try APNSEmulator(configuration: configuration, clock: clock, logger: logger)
    try await emulator.start()
    do {
        let result = try await body(emulator)
        await emulator.stop()
        return result
    } catch {
        await emulator.stop()
        throw error
    }
}

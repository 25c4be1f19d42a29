// SPDX-License-Identifier: Apache-2.0
package import APNSEmulator
package import APNSModels
package import FCMEmulator
import Foundation
package import HeraldCore
import HeraldPostgres
import HeraldSQLite
import Hummingbird
package import Logging
import NIOCore
import NIOPosix
package import Prometheus
import ServiceLifecycle
import Synchronization
package import WebPushEmulator

/// `herald serve`: the API, the delivery engine and (without Apple credentials) a built-in
/// emulator, over one SQLite file or a PostgreSQL database shared by several processes.
package struct ServerConfiguration: Sendable {
    package var host = "127.0.0.1"
    /// 0 picks a free port (see ``RunningServer/port``).
    package var port = 8080
    /// Holds the database, the master key (unless given) and the emulator's CA.
    package var dataDirectory = ".herald"
    /// A SQLite file, or a `postgres://` URL; default: `<dataDirectory>/herald.sqlite`.
    package var database: String?
    /// 32 bytes sealing stored credentials; default: `HERALD_MASTER_KEY`, else a key generated
    /// once into `<dataDirectory>/master.key` (mode 0600).
    package var masterKey: [UInt8]?
    /// Keys that may have sealed what is stored, during a change of master key.
    package var previousMasterKeys: [[UInt8]] = []
    /// Start an emulator in-process for apps without credentials of their own.
    package var builtInEmulator = true
    /// The built-in emulator's ports (0 = free ports).
    package var emulatorPorts: (development: Int, production: Int, control: Int) = (2197, 2196, 2198)
    /// The built-in FCM emulator's port (0 = a free one): its token, send and control endpoints.
    package var fcmEmulatorPort = 2199
    /// Send every app's FCM messages to this origin instead of Google's (an external emulator
    /// in tests, a proxy); the service account's `token_uri` still says where tokens come from.
    package var fcmEndpoint: String?
    /// The built-in Web Push service emulator's port (0 = a free one): its push endpoints, its
    /// control API, and the WebSocket Firefox's push client speaks (`dom.push.serverURL`).
    package var webPushEmulatorPort = 2200
    /// The contact every VAPID token names (`sub`): `mailto:` or `https:`, as Apple and Mozilla
    /// require (Apple refuses `localhost` addresses).
    package var webPushSubject = "mailto:webpush@example.com"
    /// The hosts Web Push subscriptions may name over https (the browsers' push services; add a
    /// UnifiedPush server's).
    package var webPushHosts = WebPushEndpointPolicy.browserServices
    /// Whole origins subscriptions may name besides (an external emulator in development); the
    /// built-in emulator's is added when it runs.
    package var webPushOrigins: [String] = []
    /// Origins whose pages may call the register-key doors directly (CORS): the web app's own.
    package var webOrigins: [String] = []
    package var engine = DeliveryEngine.Configuration()
    /// How long finished delivery records are kept; nil keeps them forever.
    package var retention: Duration? = .seconds(30 * 86_400)
    /// Send every app's pushes to this host instead of Apple's (a proxy, or an external
    /// emulator in tests), trusting the CA in `caFile`.
    package var apnsOverride: (host: String, port: Int, caFile: String?)?
    /// How long an unacknowledged webhook message is retried before it is given up.
    package var webhookExpiry: Duration = .seconds(86_400)
    /// Let webhooks reach loopback, private and link-local addresses (off: a webhook URL cannot
    /// be used to reach into the server's own network).
    package var webhookAllowInternal = false
    /// Serve the dashboard at `/dashboard` (sign-in with an admin key).
    package var dashboard = true
    /// Served at `/metrics` on the metrics listener (``metricsPort``) when both are set, never on
    /// the API's port (which apps reach to register); bootstrap swift-metrics with a factory on the
    /// same registry.
    package var metrics: PrometheusCollectorRegistry?
    /// The metrics listener's address: loopback unless an operator opens it to a scraper.
    package var metricsHost = "127.0.0.1"
    /// The metrics listener's port (0 picks a free one, see ``RunningServer/metricsPort``); nil:
    /// no metrics listener.
    package var metricsPort: Int?
    /// How long a client has, from the first byte of a request, to send the whole request head;
    /// past it the connection is answered 408 and closed. nil: no bound (a client could hold a
    /// connection open for ever by sending its head a byte at a time).
    package var requestHeadTimeout: Duration? = .seconds(10)
    /// A connection with no request in progress is closed after this long without traffic
    /// (a new one that sends nothing too). A streaming response (`/v1/events`) is not idle.
    /// nil: kept open for as long as the client likes.
    package var idleTimeout: Duration? = .seconds(60)
    /// Open API connections at most; one over it is closed at once. Keep it below the process's
    /// file-descriptor limit (`ulimit -n`) minus the database and APNs connections. nil: no cap.
    package var maxConnections: Int? = 512
    /// For tests: an API answer whose status its operation does not declare (as `openapi.yaml`
    /// must) becomes a 500 `undeclared_status`.
    package var refuseUndeclaredStatuses = false
    /// Token buckets per API key and per client address on registration and sending (see
    /// ``RateLimits``); ``RateLimits/off`` for none.
    package var rateLimits = RateLimits()
    /// Answer registrations in the ``RegistrationLane`` (the same answers as the router's, for
    /// less work per request); false: through the router like every other route.
    package var registrationLane = true

    package init() {}
}

/// What a started server tells its caller.
package struct RunningServer: Sendable {
    package let port: Int
    /// The admin key created on first start (shown once), or nil when keys existed already.
    package let initialAdminKey: String?
    package let emulator: APNSEmulator?
    /// The built-in FCM emulator, when it runs.
    package let fcmEmulator: FCMEmulator?
    /// The built-in Web Push service emulator, when it runs.
    package let webPushEmulator: WebPushEmulator?
    package let store: any HeraldStore
    /// Every route the server answers, as `METHOD /path/{parameter}`.
    package let routes: [String]
    /// The metrics listener's port, when it runs.
    package let metricsPort: Int?
}

/// Opens the store `database` names — a `postgres://` URL, else a SQLite file (default
/// `<dataDirectory>/herald.sqlite`) — migrated, for the duration of `body`.
package func withHeraldStore<Result: Sendable>(
    database: String?, dataDirectory: String, logger: Logger, _ body: (any HeraldStore) async throws -> Result
) async throws -> Result {
    if let database, isShared(database: database) {
        return try await PostgresStore.withStore(url: database, logger: logger) { try await body($0) }
    }
    try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    return try await body(try await SQLiteStore(path: database ?? dataDirectory + "/herald.sqlite"))
}

/// Whether `database` names a store several processes share: a PostgreSQL URL, not a SQLite file.
package func isShared(database: String?) -> Bool {
    database.map { $0.hasPrefix("postgres://") || $0.hasPrefix("postgresql://") } ?? false
}

/// Opens the store, prepares keys and the emulator, runs the API and the delivery engine until
/// `body` returns (tests) or graceful shutdown (the CLI passes a body that waits for it).
package func withHeraldServer<Result: Sendable>(
    configuration: ServerConfiguration,
    clock: any EpochClock = SystemEpochClock(),
    logger: Logger = Logger(label: "herald"),
    _ body: @escaping @Sendable (RunningServer) async throws -> Result
) async throws -> Result {
    try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
    // Processes sharing a database must share the master key too: it is never generated for one.
    let generate = !isShared(database: configuration.database)
    let keys =
        try configuration.masterKey.map { ($0, configuration.previousMasterKeys) }
        ?? loadMasterKeys(directory: configuration.dataDirectory, generate: generate)
    let secrets = try SecretBox(masterKey: keys.0, previous: keys.1)
    return try await withHeraldStore(database: configuration.database, dataDirectory: configuration.dataDirectory, logger: logger) { store in
        try await runHeraldServer(configuration: configuration, store: store, secrets: secrets, clock: clock, logger: logger, body)
    }
}

private func runHeraldServer<Result: Sendable>(
    configuration: ServerConfiguration, store: any HeraldStore, secrets: SecretBox, clock: any EpochClock, logger: Logger,
    _ body: @escaping @Sendable (RunningServer) async throws -> Result
) async throws -> Result {
    let initialAdminKey = try await bootstrapAdminKey(store: store, clock: clock)

    func serve(
        _ emulatorTarget: EmulatorTarget?, _ emulator: APNSEmulator?, _ fcmEmulator: FCMEmulator?, _ webPushEmulator: WebPushEmulator?
    ) async throws -> Result {
        let vapidKeys = VAPIDKeys(store: store, secrets: secrets, clock: clock, subject: configuration.webPushSubject)
        let webPushPolicy = WebPushEndpointPolicy(
            hosts: configuration.webPushHosts, origins: Set(configuration.webPushOrigins + (webPushEmulator.map { [$0.origin] } ?? [])))
        let webPush = WebPushTransport(
            keys: vapidKeys, policy: webPushPolicy, requestTimeout: configuration.engine.effectiveAPNSTimeout, clock: clock, logger: logger)
        let fcmClients = FCMClientProvider(
            store: store, secrets: secrets, endpoint: configuration.fcmEndpoint, emulator: fcmEmulator,
            requestTimeout: configuration.engine.effectiveAPNSTimeout, clock: clock, logger: logger)
        let clients = ClientProvider(
            store: store, secrets: secrets, emulator: emulatorTarget,
            override: configuration.apnsOverride.map { EmulatorTarget.Override(host: $0.host, port: $0.port, caFile: $0.caFile) },
            requestTimeout: configuration.engine.effectiveAPNSTimeout, resendStreams: configuration.engine.resendStreams, logger: logger
        )
        var dispatcherConfiguration = WebhookDispatcher.Configuration()
        dispatcherConfiguration.allowInternal = configuration.webhookAllowInternal
        let dispatcher = WebhookDispatcher(store: store, secrets: secrets, clock: clock, configuration: dispatcherConfiguration, logger: logger)
        let events = DeliveryEvents(
            store: store, clock: clock, webhookExpiry: configuration.webhookExpiry.wholeMilliseconds, logger: logger,
            webhookDoorbell: { dispatcher.ring() }
        )
        let engine = DeliveryEngine(
            store: store, clients: clients, fcmClients: fcmClients, webPush: webPush, configuration: configuration.engine, clock: clock,
            logger: logger, events: events, secrets: secrets)
        let appDeletions = AppDeletions(store: store, clock: clock, logger: logger)
        let router = Router(context: APIRequestContext.self)
        if configuration.refuseUndeclaredStatuses { router.add(middleware: DeclaredStatusMiddleware()) }
        let api = API(
            store: store, secrets: secrets, engine: engine, clients: clients, clock: clock, events: events,
            appDeletions: appDeletions,
            webhookAllowInternal: configuration.webhookAllowInternal,
            rateLimit: configuration.rateLimits.isOff ? nil : RateLimitGate(limits: configuration.rateLimits, store: store, clock: clock),
            vapidKeys: vapidKeys, webPushEndpoints: webPushPolicy, webOrigins: Set(configuration.webOrigins),
            authenticationFailures: AuthenticationFailures(
                limit: configuration.rateLimits.failedAuthentication, maxBuckets: configuration.rateLimits.maxBuckets)
        )
        api.register(on: router)
        if configuration.dashboard {
            try Dashboard(api: api, clients: clients, emulator: emulator, fcmClients: fcmClients, fcmEmulator: fcmEmulator).register(on: router)
        }
        let routes = router.routes.map { "\($0.method.rawValue) \($0.path)" }
        let listening = ListeningPort()
        let serverName = "herald"
        let eventLoopGroup = MultiThreadedEventLoopGroup.singleton
        let lane =
            configuration.registrationLane
            ? RegistrationLane(
                authenticator: api.authenticator, devices: api.devices, eventLoopGroup: eventLoopGroup,
                refuseUndeclaredStatuses: configuration.refuseUndeclaredStatuses, serverName: serverName, logger: logger) : nil
        let application = Application(
            router: router,
            server: configuration.httpServer(lane: lane),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: serverName),
            onServerRunning: { channel in listening.resume(.success(channel.localAddress?.port ?? 0)) },
            eventLoopGroupProvider: .shared(eventLoopGroup),
            logger: logger
        )
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: application), .init(service: engine), .init(service: dispatcher), .init(service: StreamCloser(events: events)),
            .init(service: appDeletions), .init(service: FCMTokenRenewal(clients: fcmClients)),
        ]
        // Services stop in the reverse order: the lane after the API server, which hands it requests.
        if let lane { services.insert(.init(service: lane), at: 0) }
        let metricsListening = ListeningPort()
        let metricsServer = configuration.metrics.flatMap { registry in
            configuration.metricsPort.map { port in
                MetricsServer.application(
                    registry: registry, host: configuration.metricsHost, port: port, eventLoopGroup: eventLoopGroup, logger: logger,
                    onRunning: { metricsListening.resume(.success($0)) })
            }
        }
        if let metricsServer { services.append(.init(service: metricsServer)) }
        if configuration.masterKey == nil {
            services.append(.init(service: MasterKeyReloader(secrets: secrets, store: store, directory: configuration.dataDirectory, logger: logger)))
        }
        if !configuration.rateLimits.isOff, let shared = store as? any RateBucketStore {
            services.append(.init(service: RateBucketPruner(store: shared, logger: logger)))
        }
        if let keep = configuration.retention {
            services.append(.init(service: Retention(store: store, keep: keep, interval: .seconds(3600), clock: clock, logger: logger)))
        }
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            // A port in use (or any failure before listening) ends the wait with its error.
            let port = try await withCheckedThrowingContinuation { continuation in
                listening.wait(continuation)
                let address = "\(configuration.host):\(configuration.port)"
                tasks.addTask {
                    do {
                        try await group.run()
                    } catch {
                        listening.resume(.failure(HeraldError(code: "listen_failed", "cannot listen on \(address): \(error)")))
                        metricsListening.resume(.failure(HeraldError(code: "listen_failed", "cannot listen for metrics: \(error)")))
                        throw error
                    }
                    listening.resume(.failure(HeraldError(code: "listen_failed", "the server stopped before listening on \(address)")))
                    metricsListening.resume(.failure(HeraldError(code: "listen_failed", "the server stopped before listening for metrics")))
                }
            }
            var metricsPort: Int?
            if metricsServer != nil {
                metricsPort = try await withCheckedThrowingContinuation { metricsListening.wait($0) }
            }
            logger.info("herald serving", metadata: ["herald.port": "\(port)", "herald.metrics_port": "\(metricsPort.map(String.init) ?? "off")"])
            var outcome: Swift.Result<Result, any Error>
            do {
                outcome = .success(
                    try await body(
                        RunningServer(
                            port: port, initialAdminKey: initialAdminKey, emulator: emulator, fcmEmulator: fcmEmulator,
                            webPushEmulator: webPushEmulator, store: store, routes: routes, metricsPort: metricsPort))
                )
            } catch {
                outcome = .failure(error)
            }
            // Each step of the shutdown is logged, so that one that does not end shows which it was.
            logger.debug("stopping the API, the delivery engine and the background services")
            await group.triggerGracefulShutdown()
            do {
                try await tasks.waitForAll()
            } catch {
                if case .success = outcome { outcome = .failure(error) }
            }
            logger.debug("services stopped; closing APNs connections")
            await clients.shutdown()
            await fcmClients.shutdown()
            await webPush.shutdown()
            logger.debug("APNs, FCM and Web Push connections closed")
            return try outcome.get()
        }
    }

    guard configuration.builtInEmulator else { return try await serve(nil, nil, nil, nil) }
    var emulatorConfiguration = APNSEmulator.Configuration(
        listeners: [
            .init(environment: .development, host: "127.0.0.1", port: configuration.emulatorPorts.development, tls: true),
            .init(environment: .production, host: "127.0.0.1", port: configuration.emulatorPorts.production, tls: true),
        ],
        controlPort: configuration.emulatorPorts.control
    )
    emulatorConfiguration.dataDirectory = configuration.dataDirectory + "/emulator"
    return try await withAPNSEmulator(configuration: emulatorConfiguration, logger: logger) { emulator in
        let key = SigningKey.generate(keyID: "HERALD0001", teamID: "HERALDTEAM")
        emulator.register(key: key)
        let caFile = configuration.dataDirectory + "/emulator/ca.pem"
        try emulator.certificateAuthorityPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        var ports: [APNSEnvironment: Int] = [:]
        for (environment, port) in emulator.ports { ports[environment] = port }
        logger.info(
            "built-in APNs emulator (apps without credentials push here)",
            metadata: ["emulator.control_port": "\(emulator.controlPort ?? 0)", "emulator.ca": "\(caFile)"]
        )
        var fcmConfiguration = FCMEmulator.Configuration()
        fcmConfiguration.port = configuration.fcmEmulatorPort
        return try await withFCMEmulator(configuration: fcmConfiguration, logger: logger) { fcmEmulator in
            logger.info("built-in FCM emulator (apps without a service account send here)", metadata: ["emulator.fcm_url": "\(fcmEmulator.baseURL)"])
            var webPushConfiguration = WebPushEmulator.Configuration()
            webPushConfiguration.port = configuration.webPushEmulatorPort
            return try await withWebPushEmulator(configuration: webPushConfiguration, logger: logger) { webPushEmulator in
                logger.info(
                    "built-in Web Push emulator (its subscriptions may register; Firefox's dom.push.serverURL: ws://…)",
                    metadata: ["emulator.webpush_url": "\(webPushEmulator.origin)"])
                return try await serve(
                    EmulatorTarget(host: "127.0.0.1", ports: ports, caFile: caFile, key: key), emulator, fcmEmulator, webPushEmulator)
            }
        }
    }
}

/// The master key and, during a change of master key, the previous ones, from the environment:
/// `HERALD_MASTER_KEY` (64 hex digits or base64) or `HERALD_MASTER_KEY_FILE` (a file holding it,
/// such as a mounted secret), else `<directory>/master.key`, generated there once when `generate`;
/// and `HERALD_PREVIOUS_MASTER_KEY` or `HERALD_PREVIOUS_MASTER_KEY_FILE`.
package func loadMasterKeys(directory: String, generate: Bool = true) throws -> (current: [UInt8], previous: [[UInt8]]) {
    let environment = ProcessInfo.processInfo.environment
    func key(_ name: String) throws -> [UInt8]? {
        let direct = environment[name]
        let file = environment[name + "_FILE"]
        guard direct == nil || file == nil else { throw HeraldError(code: "bad_master_key", "set \(name) or \(name)_FILE, not both") }
        if let direct {
            guard let key = SecretBox.parseMasterKey(direct) else {
                throw HeraldError(code: "bad_master_key", "\(name) must be 32 bytes as 64 hex digits or base64")
            }
            return key
        }
        guard let file else { return nil }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw HeraldError(code: "bad_master_key", "cannot read \(file)") }
        guard let key = SecretBox.parseMasterKey(text) else { throw HeraldError(code: "bad_master_key", "\(file) does not hold a 32-byte key") }
        return key
    }
    let previous = try key("HERALD_PREVIOUS_MASTER_KEY").map { [$0] } ?? []
    if let current = try key("HERALD_MASTER_KEY") { return (current, previous) }
    let path = directory + "/master.key"
    if let text = try? String(contentsOfFile: path, encoding: .utf8) {
        guard let key = SecretBox.parseMasterKey(text) else {
            throw HeraldError(code: "bad_master_key", "\(path) does not hold a 32-byte key")
        }
        return (key, previous)
    }
    guard generate else {
        throw HeraldError(
            code: "master_key_required",
            "with a shared PostgreSQL database every process needs the same master key: set HERALD_MASTER_KEY or HERALD_MASTER_KEY_FILE (or put it in \(path))"
        )
    }
    let key = SecretBox.generateMasterKey()
    let hex = key.map { String(format: "%02x", $0) }.joined()
    guard FileManager.default.createFile(atPath: path, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o600]) else {
        throw HeraldError(code: "bad_master_key", "cannot write \(path)")
    }
    return (key, previous)
}

/// The first admin key, when there is no key at all yet.
func bootstrapAdminKey(store: any HeraldStore, clock: any EpochClock) async throws -> String? {
    guard try await !store.hasAPIKeys() else { return nil }
    let secret = APIKeySecret.generate()
    // Processes starting together on one database: only the first creates (and prints) it.
    guard try await store.createFirstAPIKey(id: secret.id, hash: secret.hash, name: "initial admin", now: clock.nowMilliseconds) else { return nil }
    return secret.token
}

/// Ends the live event streams when shutdown begins, so the HTTP server's drain is not held
/// open by them.
struct StreamCloser: Service {
    let events: DeliveryEvents

    func run() async throws {
        try? await gracefulShutdown()
        self.events.finishAll()
    }
}

/// A listener's port once it listens, or the error that stopped it first: one wait, resumed
/// once (a result that comes before the wait is kept for it).
private final class ListeningPort: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Int, any Error>)
        case done(Swift.Result<Int, any Error>)
        case resumed
    }

    private let state = Mutex<State>(.idle)

    func wait(_ continuation: CheckedContinuation<Int, any Error>) {
        let early = self.state.withLock { state -> Swift.Result<Int, any Error>? in
            guard case .done(let result) = state else {
                state = .waiting(continuation)
                return nil
            }
            state = .resumed
            return result
        }
        if let early { continuation.resume(with: early) }
    }

    /// The first call resumes the wait; later ones do nothing.
    func resume(_ result: Swift.Result<Int, any Error>) {
        let waiting = self.state.withLock { state -> CheckedContinuation<Int, any Error>? in
            switch state {
            case .idle:
                state = .done(result)
                return nil
            case .waiting(let continuation):
                state = .resumed
                return continuation
            case .done, .resumed:
                return nil
            }
        }
        waiting?.resume(with: result)
    }
}

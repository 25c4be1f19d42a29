// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import ArgumentParser
import CoreMetrics
import FCMEmulator
import Foundation
import HeraldCore
import HeraldServer
import Logging
import Prometheus
import ServiceLifecycle
import UnixSignals
import WebPushEmulator

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run Herald: the API, the delivery engine, and built-in APNs and FCM emulators for apps without credentials of their own.",
        discussion: """
            Everything lives in --data-dir: the SQLite database (WAL), the master key that seals stored \
            credentials (unless HERALD_MASTER_KEY is set), and the built-in emulator's CA. With \
            --database postgres://… several processes share the work; give them all the same HERALD_MASTER_KEY. On first start an \
            admin API key is printed once. SIGTERM or SIGINT stop claiming work, finish what is in flight, and exit; \
            a second one exits at once.
            """
    )

    @Option(help: "A JSON configuration file (keys as below, e.g. {\"port\": 8080}).") var config: String?
    @Option(help: "Address to listen on [HERALD_HOST, host; 127.0.0.1].") var host: String?
    @Option(help: "API port, 0 for a free one [HERALD_PORT, port; 8080].") var port: Int?
    @Option(help: "Data directory [HERALD_DATA_DIR, dataDir; .herald].") var dataDir: String?
    @Option(
        help:
            "A SQLite file, or a postgres://user:password@host:port/database URL shared by several processes [HERALD_DATABASE, database; <data-dir>/herald.sqlite]."
    ) var database: String?
    @Flag(help: "Do not start the built-in APNs emulator [HERALD_NO_EMULATOR=1, noEmulator].") var noEmulator = false
    @Option(help: "Built-in emulator: development port [HERALD_EMULATOR_PORT, emulatorPort; 2197].") var emulatorPort: Int?
    @Option(help: "Built-in emulator: production port [HERALD_EMULATOR_PRODUCTION_PORT, emulatorProductionPort; 2196].") var emulatorProductionPort:
        Int?
    @Option(help: "Built-in emulator: control API port [HERALD_EMULATOR_CONTROL_PORT, emulatorControlPort; 2198].") var emulatorControlPort: Int?
    @Option(help: "Built-in FCM emulator: its port, for tokens, sends and control [HERALD_FCM_EMULATOR_PORT, fcmEmulatorPort; 2199].")
    var fcmEmulatorPort: Int?
    @Option(
        help: "Send every app's FCM messages to this origin instead of Google's: a proxy, an external emulator [HERALD_FCM_ENDPOINT, fcmEndpoint].")
    var fcmEndpoint: String?
    @Option(
        name: .customLong("webpush-emulator-port"),
        help:
            "Built-in Web Push emulator: its port, for push endpoints, control and Firefox's WebSocket [HERALD_WEBPUSH_EMULATOR_PORT, webPushEmulatorPort; 2200]."
    )
    var webPushEmulatorPort: Int?
    @Option(
        name: .customLong("webpush-subject"),
        help:
            "The contact in every VAPID token (mailto: or https:; Apple refuses localhost) [HERALD_WEBPUSH_SUBJECT, webPushSubject; mailto:webpush@example.com]."
    )
    var webPushSubject: String?
    @Option(
        name: .customLong("webpush-host"),
        help:
            "Also allow Web Push subscriptions on this https host (a UnifiedPush server; *.domain for its subdomains); repeatable [HERALD_WEBPUSH_HOSTS, webPushHosts: comma-separated]."
    )
    var webPushHost: [String] = []
    @Option(
        name: .customLong("webpush-origin"),
        help:
            "Also allow Web Push subscriptions on this whole origin, any scheme (an external emulator in development); repeatable [HERALD_WEBPUSH_ORIGINS, webPushOrigins: comma-separated]."
    )
    var webPushOrigin: [String] = []
    @Option(
        help:
            "A web app's origin whose pages may call the register-key doors directly (CORS); repeatable [HERALD_WEB_ORIGINS, webOrigins: comma-separated]."
    )
    var webOrigin: [String] = []
    @Option(help: "Send every app's pushes to this host instead of Apple's: a proxy, an external emulator [HERALD_APNS_HOST, apnsHost].")
    var apnsHost: String?
    @Option(help: "Port for --apns-host [HERALD_APNS_PORT, apnsPort; 443].") var apnsPort: Int?
    @Option(help: "CA (PEM) to trust for --apns-host [HERALD_APNS_CA_FILE, apnsCaFile].") var apnsCaFile: String?
    @Option(help: "Seconds a claimed delivery stays leased [HERALD_LEASE_SECONDS, leaseSeconds; 60].") var leaseSeconds: Int?
    @Option(
        help:
            "Seconds to wait for APNs to answer a request, at most half the lease [HERALD_APNS_TIMEOUT_SECONDS, apnsTimeoutSeconds; 10, or half the lease if shorter]."
    ) var apnsTimeoutSeconds: Int?
    @Option(help: "Delivery workers, each with a batch of up to 1000 in flight [HERALD_WORKERS, workers; 4].") var workers: Int?
    @Option(
        help:
            "Streams in flight on the one connection per app that resends pushes whose outcome was unknown: a lost connection takes at most this many resends with it [HERALD_RESEND_STREAMS, resendStreams; 8]."
    ) var resendStreams: Int?
    @Option(help: "Days finished delivery records are kept, 0 for ever [HERALD_RETENTION_DAYS, retentionDays; 30].") var retentionDays: Int?
    @Option(help: "Hours an unacknowledged webhook message is retried before it is given up [HERALD_WEBHOOK_EXPIRY_HOURS, webhookExpiryHours; 24].")
    var webhookExpiryHours: Int?
    @Flag(help: "Let webhooks reach loopback, private and link-local addresses [HERALD_WEBHOOK_ALLOW_INTERNAL=1, webhookAllowInternal].")
    var webhookAllowInternal = false
    @Flag(help: "Do not serve the dashboard at /dashboard [HERALD_NO_DASHBOARD=1, noDashboard].") var noDashboard = false
    @Option(
        help:
            "Seconds a client has, from a request's first byte, to send the whole head (then 408 and close); 0: no bound [HERALD_REQUEST_HEAD_TIMEOUT_SECONDS, requestHeadTimeoutSeconds; 10]."
    ) var requestHeadTimeoutSeconds: Int?
    @Option(
        help: "Seconds an API connection with no request in progress stays open; 0: no bound [HERALD_IDLE_TIMEOUT_SECONDS, idleTimeoutSeconds; 60].")
    var idleTimeoutSeconds: Int?
    @Option(help: "Open API connections at most; more are closed at once; 0: no cap [HERALD_MAX_CONNECTIONS, maxConnections; 512].")
    var maxConnections: Int?
    @Flag(help: "No rate limits on registration and sending [HERALD_NO_RATE_LIMITS=1, noRateLimits].") var noRateLimits = false
    @Flag(
        help:
            "Answer device registrations through the router like other routes, not the registration lane (the same answers, more work per request) [HERALD_NO_REGISTRATION_LANE=1, noRegistrationLane]."
    ) var noRegistrationLane = false
    @Option(help: "Rate limit per register key, BURST/PER_SECOND, 0: none [HERALD_REGISTER_KEY_LIMIT, registerKeyLimit; 100000/20000].")
    var registerKeyLimit: String?
    @Option(help: "Rate limit per send key, BURST/PER_SECOND, 0: none [HERALD_SEND_KEY_LIMIT, sendKeyLimit; 100000/20000].") var sendKeyLimit: String?
    @Option(help: "Rate limit per admin key, BURST/PER_SECOND, 0: none [HERALD_ADMIN_KEY_LIMIT, adminKeyLimit; 100000/20000].") var adminKeyLimit:
        String?
    @Option(
        help:
            "Rate limit per client address using a register key, BURST/PER_SECOND, 0: none [HERALD_REGISTER_ADDRESS_LIMIT, registerAddressLimit; 60/1]."
    ) var registerAddressLimit: String?
    @Option(help: "Rate limit per client address using a send key, BURST/PER_SECOND, 0: none [HERALD_SEND_ADDRESS_LIMIT, sendAddressLimit; 0].")
    var sendAddressLimit: String?
    @Option(
        help:
            "Comma-separated IP addresses or CIDR ranges (10.0.0.0/8, fd00::/8) of proxies whose X-Forwarded-For names the client for the rate limits; none: the header is ignored [HERALD_TRUSTED_PROXIES, trustedProxies]."
    ) var trustedProxies: String?
    @Option(
        help:
            "Failed authentications per client address (unknown, wrong, revoked or expired keys, refused dashboard sign-ins), BURST/PER_SECOND, 0: none [HERALD_FAILED_AUTH_LIMIT, failedAuthLimit; 30/0.5]."
    ) var failedAuthLimit: String?
    @Option(
        help:
            "Serve Prometheus metrics at /metrics on this port, apart from the API (0: a free port); none: no metrics listener [HERALD_METRICS_PORT, metricsPort]."
    ) var metricsPort: Int?
    @Option(help: "The metrics listener's address [HERALD_METRICS_HOST, metricsHost; 127.0.0.1].") var metricsHost: String?
    @Option(help: "Log level [HERALD_LOG_LEVEL, logLevel; info].") var logLevel: String?

    func run() async throws {
        let settings = try Settings(file: self.config)
        guard let level = Logger.Level(rawValue: settings.string(self.logLevel, "logLevel") ?? "info") else {
            throw ValidationError("the log level must be trace, debug, info, notice, warning, error or critical")
        }
        // Metadata formatted when a line is written, not at each request's id (`HeraldLogHandler`).
        var logger = Logger(label: "herald", factory: HeraldLogHandler.standardError)
        logger.logLevel = level
        var configuration = ServerConfiguration()
        configuration.host = settings.string(self.host, "host") ?? "127.0.0.1"
        configuration.port = try settings.int(self.port, "port") ?? 8080
        configuration.dataDirectory = settings.string(self.dataDir, "dataDir") ?? ".herald"
        configuration.database = settings.string(self.database, "database")
        configuration.builtInEmulator = !(self.noEmulator || settings.flag("noEmulator"))
        configuration.emulatorPorts = (
            try settings.int(self.emulatorPort, "emulatorPort") ?? 2197,
            try settings.int(self.emulatorProductionPort, "emulatorProductionPort") ?? 2196,
            try settings.int(self.emulatorControlPort, "emulatorControlPort") ?? 2198
        )
        configuration.fcmEmulatorPort = try settings.int(self.fcmEmulatorPort, "fcmEmulatorPort") ?? 2199
        if let endpoint = settings.string(self.fcmEndpoint, "fcmEndpoint") {
            guard endpoint.hasPrefix("https://") || endpoint.hasPrefix("http://") else {
                throw ValidationError("fcmEndpoint must be an http(s) origin, like https://fcm.googleapis.com")
            }
            configuration.fcmEndpoint = endpoint
        }
        configuration.webPushEmulatorPort = try settings.int(self.webPushEmulatorPort, "webPushEmulatorPort") ?? 2200
        if let subject = settings.string(self.webPushSubject, "webPushSubject") {
            guard subject.hasPrefix("mailto:") || subject.hasPrefix("https://") else {
                throw ValidationError("webPushSubject must be a mailto: or https: contact")
            }
            configuration.webPushSubject = subject
        }
        func list(_ flags: [String], _ key: String) -> [String] {
            flags.isEmpty
                ? (settings.string(nil, key) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                : flags
        }
        configuration.webPushHosts += list(self.webPushHost, "webPushHosts")
        configuration.webPushOrigins = list(self.webPushOrigin, "webPushOrigins")
        configuration.webOrigins = list(self.webOrigin, "webOrigins")
        for origin in configuration.webPushOrigins + configuration.webOrigins where !(origin.hasPrefix("https://") || origin.hasPrefix("http://")) {
            throw ValidationError("\(origin) is not an http(s) origin")
        }
        if let host = settings.string(self.apnsHost, "apnsHost") {
            configuration.apnsOverride = (host, try settings.int(self.apnsPort, "apnsPort") ?? 443, settings.string(self.apnsCaFile, "apnsCaFile"))
        }
        let lease = try settings.int(self.leaseSeconds, "leaseSeconds") ?? 60
        guard (1...3600).contains(lease) else { throw ValidationError("the lease must be 1 to 3600 seconds") }
        configuration.engine.lease = .seconds(lease)
        if let timeout = try settings.int(self.apnsTimeoutSeconds, "apnsTimeoutSeconds") {
            guard timeout >= 1, timeout * 2 <= lease else {
                throw ValidationError("the APNs timeout must be at least 1 second and at most half the lease (\(lease) s)")
            }
            configuration.engine.apnsTimeout = .seconds(timeout)
        }
        let workers = try settings.int(self.workers, "workers") ?? 4
        guard (1...64).contains(workers) else { throw ValidationError("workers must be 1 to 64") }
        configuration.engine.workers = workers
        let resendStreams = try settings.int(self.resendStreams, "resendStreams") ?? 8
        guard (1...1000).contains(resendStreams) else { throw ValidationError("resend streams must be 1 to 1000") }
        configuration.engine.resendStreams = resendStreams
        let retention = try settings.int(self.retentionDays, "retentionDays") ?? 30
        guard (0...36_500).contains(retention) else { throw ValidationError("retentionDays must be 0 (for ever) to 36500") }
        configuration.retention = retention == 0 ? nil : .seconds(Int64(retention) * 86_400)
        let webhookExpiry = try settings.int(self.webhookExpiryHours, "webhookExpiryHours") ?? 24
        guard (1...720).contains(webhookExpiry) else { throw ValidationError("webhookExpiryHours must be 1 to 720") }
        configuration.webhookExpiry = .seconds(Int64(webhookExpiry) * 3600)
        configuration.dashboard = !(self.noDashboard || settings.flag("noDashboard"))
        configuration.webhookAllowInternal = self.webhookAllowInternal || settings.flag("webhookAllowInternal")
        let headTimeout = try settings.int(self.requestHeadTimeoutSeconds, "requestHeadTimeoutSeconds") ?? 10
        guard (0...3600).contains(headTimeout) else { throw ValidationError("requestHeadTimeoutSeconds must be 0 (no bound) to 3600") }
        configuration.requestHeadTimeout = headTimeout == 0 ? nil : .seconds(headTimeout)
        let idleTimeout = try settings.int(self.idleTimeoutSeconds, "idleTimeoutSeconds") ?? 60
        guard (0...86_400).contains(idleTimeout) else { throw ValidationError("idleTimeoutSeconds must be 0 (no bound) to 86400") }
        configuration.idleTimeout = idleTimeout == 0 ? nil : .seconds(idleTimeout)
        let maxConnections = try settings.int(self.maxConnections, "maxConnections") ?? 512
        guard (0...1_000_000).contains(maxConnections) else { throw ValidationError("maxConnections must be 0 (no cap) to 1000000") }
        configuration.maxConnections = maxConnections == 0 ? nil : maxConnections
        configuration.rateLimits = try self.rateLimits(settings)
        configuration.registrationLane = !(self.noRegistrationLane || settings.flag("noRegistrationLane"))
        for (name, port) in [
            ("port", configuration.port), ("emulatorPort", configuration.emulatorPorts.development),
            ("fcmEmulatorPort", configuration.fcmEmulatorPort), ("webPushEmulatorPort", configuration.webPushEmulatorPort),
        ] {
            guard (0...65_535).contains(port) else { throw ValidationError("\(name) must be 0 to 65535") }
        }
        let listenHost = configuration.host
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        configuration.metrics = registry
        configuration.metricsHost = settings.string(self.metricsHost, "metricsHost") ?? "127.0.0.1"
        configuration.metricsPort = try settings.int(self.metricsPort, "metricsPort")
        if let port = configuration.metricsPort, !(0...65_535).contains(port) { throw ValidationError("metricsPort must be 0 to 65535") }
        let metricsHost = configuration.metricsHost
        // Trapped from here on. The first SIGTERM or SIGINT stops Herald gracefully; a second one
        // during that shutdown exits at once (what was in flight is sent again after its lease).
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let (stop, stopping) = AsyncStream.makeStream(of: Void.self)
        let signalLogger = logger
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var received = 0
                for await signal in signals {
                    received += 1
                    if received == 1 {
                        signalLogger.info(
                            "shutting down: finishing the work in flight (a second signal exits at once)", metadata: ["signal": "\(signal)"])
                        stopping.finish()
                    } else {
                        signalLogger.warning("second signal: exiting now; deliveries in flight are sent again after their lease")
                        Foundation.exit(1)
                    }
                }
            }
            try await withHeraldServer(configuration: configuration, logger: logger) { server in
                if let key = server.initialAdminKey {
                    say("Admin API key (shown once; keep it secret):\n  \(key)")
                }
                say("Herald listening on http://\(listenHost):\(server.port)")
                if let port = server.metricsPort { say("Metrics at http://\(metricsHost):\(port)/metrics") }
                if let emulator = server.emulator, let control = emulator.controlPort {
                    say("Built-in APNs emulator: control API http://127.0.0.1:\(control)")
                }
                if let fcm = server.fcmEmulator {
                    say("Built-in FCM emulator: http://127.0.0.1:\(fcm.port ?? 0) (token, send and control API)")
                }
                if let webPush = server.webPushEmulator {
                    say("Built-in Web Push emulator: \(webPush.origin) (push endpoints, control API; Firefox: ws://127.0.0.1:\(webPush.port ?? 0)/)")
                }
                for await _ in stop {}
            }
            group.cancelAll()
        }
        logger.info("stopped")
    }
}

extension ServeCommand {
    /// The rate limits from the flags, the environment or the file, over ``RateLimits``'s defaults.
    func rateLimits(_ settings: Settings) throws -> RateLimits {
        if self.noRateLimits || settings.flag("noRateLimits") { return .off }
        var limits = RateLimits()
        func limit(_ flag: String?, _ key: String) throws -> TokenBucket.Limit?? {
            guard let text = settings.string(flag, key) else { return .none }
            if text == "0" || text == "off" { return .some(nil) }
            guard let limit = TokenBucket.Limit(parsing: text) else {
                throw ValidationError("\(key) must be BURST/PER_SECOND (such as 60/1), or 0 for none")
            }
            return .some(limit)
        }
        if let value = try limit(self.registerKeyLimit, "registerKeyLimit") { limits.perKey[.register] = value }
        if let value = try limit(self.sendKeyLimit, "sendKeyLimit") { limits.perKey[.send] = value }
        if let value = try limit(self.adminKeyLimit, "adminKeyLimit") { limits.perKey[.admin] = value }
        if let value = try limit(self.registerAddressLimit, "registerAddressLimit") { limits.perAddress[.register] = value }
        if let value = try limit(self.sendAddressLimit, "sendAddressLimit") { limits.perAddress[.send] = value }
        if let value = try limit(self.failedAuthLimit, "failedAuthLimit") { limits.failedAuthentication = value }
        if let proxies = settings.string(self.trustedProxies, "trustedProxies") {
            limits.trustedProxies = try proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.map {
                guard let range = IPRange($0) else { throw ValidationError("trustedProxies: '\($0)' is not an IP address or CIDR range") }
                return range
            }
        }
        return limits
    }
}

/// Writes a line to standard output at once (unbuffered), so it shows in a pipe or a log file.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Where a setting comes from: the command line, else `HERALD_<KEY>`, else the JSON file, else
/// the default the caller gives.
struct Settings {
    private let file: JSONValue?
    private let environment = ProcessInfo.processInfo.environment

    init(file path: String?) throws {
        guard let path else {
            self.file = nil
            return
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
        do {
            let value = try JSONValue.parse(Array(data))
            guard case .object = value else { throw ValidationError("\(path) must hold a JSON object") }
            self.file = value
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("\(path) is not JSON: \(error)")
        }
    }

    /// `logLevel` → `HERALD_LOG_LEVEL`.
    private static func variable(_ key: String) -> String {
        "HERALD_"
            + key.reduce(into: "") { name, character in
                if character.isUppercase { name += "_" }
                name += character.uppercased()
            }
    }

    func string(_ flag: String?, _ key: String) -> String? {
        flag ?? self.environment[Self.variable(key)] ?? self.file?[key]?.stringValue
    }

    func int(_ flag: Int?, _ key: String) throws -> Int? {
        if let flag { return flag }
        if let text = self.environment[Self.variable(key)] {
            guard let value = Int(text) else { throw ValidationError("\(Self.variable(key)) must be a number") }
            return value
        }
        guard let value = self.file?[key] else { return nil }
        guard let number = value.intValue else { throw ValidationError("\(key) in the configuration file must be a number") }
        return Int(number)
    }

    func flag(_ key: String) -> Bool {
        if let text = self.environment[Self.variable(key)] { return text == "1" || text == "true" }
        return self.file?[key]?.boolValue ?? false
    }
}

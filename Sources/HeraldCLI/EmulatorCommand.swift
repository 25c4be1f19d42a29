// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
public import ArgumentParser
import FCMEmulator
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals
import WebPushEmulator

struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulator",
        abstract: "Run the APNs and FCM emulators: servers that answer like APNs and FCM HTTP v1, with virtual devices.",
        discussion: """
            On first start it creates a CA in the data directory and writes ca.pem there: make your
            client trust that file. Register your signing key (--key-file/--key-id/--team-id, or
            POST /v1/keys on the control port), create devices with POST /v1/devices, push to
            https://127.0.0.1:<port>/3/device/<token>. docs/emulator.md describes the control API.
            The FCM emulator (--fcm-port) serves Google's token endpoint, FCM's messages:send and
            its control API under /emulator/ (POST /emulator/service-accounts makes a service
            account whose token_uri points at it): docs/fcm-emulator.md.
            """
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "TLS port playing APNs development (sandbox); 0 picks a free one (logged).")
    var port = 2197

    @Option(help: "TLS port playing APNs production; 0 picks a free one (logged).")
    var productionPort = 2196

    @Flag(help: "Do not listen for production.")
    var noProduction = false

    @Option(help: "Cleartext HTTP/2 (h2c) port playing development; off unless given.")
    var h2cPort: Int?

    @Option(help: "Port of the control API (JSON over HTTP/1.1); 0 picks a free one (logged).")
    var controlPort = 2198

    @Option(help: "Where the CA certificate and key are kept.")
    var dataDir = ".herald/emulator"

    @Option(help: "A .p8 signing key to trust at start (needs --key-id and --team-id).")
    var keyFile: String?

    @Option(help: "Key id of --key-file.")
    var keyId: String?

    @Option(help: "Team id of --key-file.")
    var teamId: String?

    @Option(help: "MAX_CONCURRENT_STREAMS after the first authenticated request.")
    var maxStreams = 1000

    @Option(help: "Close connections idle this many seconds with GOAWAY IdleTimeout.")
    var idleTimeout: Int64?

    @Flag(help: "Accept pushes to tokens no virtual device holds (load testing).")
    var acceptUnknownTokens = false

    @Flag(help: "Drop the stream limit to 1 after a rejected request, as APNs was seen to do.")
    var dropStreamsAfterRejection = false

    @Option(help: "Port of the FCM emulator (token, send and control endpoints over HTTP/1.1); 0 picks a free one (logged).")
    var fcmPort = 2199

    @Flag(help: "Do not run the FCM emulator.")
    var noFcm = false

    @Option(
        name: .customLong("webpush-port"),
        help: "Port of the Web Push service emulator (push endpoints, control API, Firefox's WebSocket); 0 picks a free one (logged).")
    var webPushPort = 2200

    @Flag(name: .customLong("no-webpush"), help: "Do not run the Web Push emulator.")
    var noWebPush = false

    @Option(help: "Log level (trace, debug, info, notice, warning, error).")
    var logLevel: Logger.Level = .info

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = self.logLevel
            return handler
        }
        let logger = Logger(label: "herald.emulator")
        var configuration = APNSEmulator.Configuration(
            listeners: [], controlHost: self.host, controlPort: self.controlPort, dataDirectory: self.dataDir)
        configuration.listeners.append(.init(environment: .development, host: self.host, port: self.port))
        if !self.noProduction {
            configuration.listeners.append(.init(environment: .production, host: self.host, port: self.productionPort))
        }
        if let h2cPort = self.h2cPort { configuration.listeners.append(.init(environment: .development, host: self.host, port: h2cPort, tls: false)) }
        configuration.maxConcurrentStreams = self.maxStreams
        configuration.idleTimeoutSeconds = self.idleTimeout
        configuration.acceptUnknownTokens = self.acceptUnknownTokens
        configuration.dropStreamLimitAfterRejection = self.dropStreamsAfterRejection

        let emulator = try APNSEmulator(configuration: configuration, logger: logger)
        if let keyFile = self.keyFile {
            guard let keyId = self.keyId, let teamId = self.teamId else {
                throw ValidationError("--key-file needs --key-id and --team-id")
            }
            let key = try SigningKey(pem: try String(contentsOfFile: keyFile, encoding: .utf8), keyID: keyId, teamID: teamId)
            emulator.register(key: key)
            logger.info("trusting signing key", metadata: ["key.id": "\(keyId)", "key.team": "\(teamId)"])
        }
        logger.info("CA certificate for clients to trust", metadata: ["emulator.ca": "\(self.dataDir)/ca.pem"])
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: emulator)]
        if !self.noFcm {
            var fcmConfiguration = FCMEmulator.Configuration()
            fcmConfiguration.host = self.host
            fcmConfiguration.port = self.fcmPort
            let fcm = FCMEmulator(configuration: fcmConfiguration, logger: logger)
            services.append(.init(service: fcm))
        }
        if !self.noWebPush {
            var webPushConfiguration = WebPushEmulator.Configuration()
            webPushConfiguration.host = self.host
            webPushConfiguration.port = self.webPushPort
            services.append(.init(service: WebPushEmulator(configuration: webPushConfiguration, logger: logger)))
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

// SPDX-License-Identifier: Apache-2.0
public import APNSModels

extension APNSEmulator {
    /// One listening socket that speaks APNs.
    public struct Listener: Sendable, Hashable {
        /// The APNs environment this port plays: tokens of the other environment get `BadDeviceToken`.
        public var environment: APNSEnvironment
        public var host: String
        /// 0 picks a free port; read the bound one from ``APNSEmulator/ports``.
        public var port: Int
        /// TLS (ALPN `h2`, or prior knowledge after the handshake) or cleartext HTTP/2 (h2c prior knowledge).
        public var tls: Bool

        public init(environment: APNSEnvironment, host: String = "127.0.0.1", port: Int, tls: Bool = true) {
            self.environment = environment
            self.host = host
            self.port = port
            self.tls = tls
        }
    }

    /// The checks of a device push, in the order the emulator applies them. The first failing
    /// check answers; change the order to mimic another server.
    public enum ValidationStage: String, Sendable, Hashable, CaseIterable {
        /// `:method` must be POST (405 `MethodNotAllowed`).
        case method
        /// `:path` must be `/3/device/<token>` (404 `BadPath`, 400 `MissingDeviceToken`).
        case path
        /// An `apns-*` or `authorization` header sent twice (400 `DuplicateHeaders`).
        case duplicateHeaders
        /// The provider token or client certificate (403s and 429 `TooManyProviderTokenUpdates`).
        case authentication
        /// `apns-id`, `apns-expiration`, `apns-priority`, `apns-push-type`, `apns-collapse-id` syntax.
        case headerSyntax
        /// `apns-topic` present, well-formed, and with the suffix its push type needs.
        case topic
        /// Body empty, too large, or not JSON.
        case payload
        /// The token: well-formed, known, of this environment and topic, still registered.
        case tokenState
        /// Per-token request rate (429 `TooManyRequests`).
        case rate
    }

    public struct Configuration: Sendable {
        /// The APNs ports. Default: development on 2197 with TLS.
        public var listeners: [Listener]
        /// The control API (JSON over HTTP/1.1); `nil` turns it off.
        public var controlHost: String
        public var controlPort: Int?
        /// Where the generated CA and server certificate are kept across restarts; `nil` keeps them in memory.
        public var dataDirectory: String?
        /// `MAX_CONCURRENT_STREAMS` after the first authenticated request (APNs: 1 before it).
        public var maxConcurrentStreams: Int
        /// The order of the device-push checks.
        public var validationOrder: [ValidationStage]
        /// Send `apns-unique-id` on development responses, as APNs does.
        public var uniqueIDInDevelopment: Bool
        /// Refuse `background` pushes at priority 10 with `BadPriority` (Apple calls them an error).
        public var rejectBackgroundAtPriority10: Bool
        /// Treat a request without `apns-push-type` as `alert` (true) or refuse it with `InvalidPushType`.
        public var defaultPushTypeToAlert: Bool
        /// The reason for a push type whose topic lacks (or has the wrong) suffix.
        public var topicSuffixMismatchReason: APNSReason
        /// The reason for a body that is not a JSON object (APNs documents none for device pushes).
        public var invalidJSONReason: APNSReason
        /// Accept pushes to tokens no virtual device holds (for load tests); they are counted, not delivered.
        public var acceptUnknownTokens: Bool
        /// Per-token limit: at most `count` requests per `seconds`, then 429 `TooManyRequests`.
        public var perTokenRateLimit: (count: Int, seconds: Int)?
        /// Drop `MAX_CONCURRENT_STREAMS` to 1 after a rejected request and restore it after the next
        /// accepted one, as observed on APNs in 2016.
        public var dropStreamLimitAfterRejection: Bool
        /// Close idle connections with GOAWAY `{"reason":"IdleTimeout"}` after this many seconds; `nil` never.
        public var idleTimeoutSeconds: Int64?
        /// The connection-level receive window the emulator grants (bytes).
        public var connectionWindowSize: Int
        /// How many notifications each virtual device keeps in its inbox.
        public var inboxCapacity: Int
        /// How many request outcomes the inspection log keeps.
        public var requestLogCapacity: Int
        /// Seed for the fault injector's random choices (fractional faults); `nil` seeds from the system.
        public var randomSeed: UInt64?

        public init(
            listeners: [Listener] = [Listener(environment: .development, port: 2197)],
            controlHost: String = "127.0.0.1",
            controlPort: Int? = 2198,
            dataDirectory: String? = nil
        ) {
            self.listeners = listeners
            self.controlHost = controlHost
            self.controlPort = controlPort
            self.dataDirectory = dataDirectory
            self.maxConcurrentStreams = 1000
            self.validationOrder = [
                .method, .path, .duplicateHeaders, .authentication, .headerSyntax, .topic, .payload, .tokenState, .rate,
            ]
            self.uniqueIDInDevelopment = true
            self.rejectBackgroundAtPriority10 = true
            self.defaultPushTypeToAlert = true
            self.topicSuffixMismatchReason = .topicDisallowed
            self.invalidJSONReason = .badRequestPayload
            self.acceptUnknownTokens = false
            self.perTokenRateLimit = nil
            self.dropStreamLimitAfterRejection = false
            self.idleTimeoutSeconds = nil
            self.connectionWindowSize = 1 << 20
            self.inboxCapacity = 100
            self.requestLogCapacity = 1000
            self.randomSeed = nil
        }

        /// Everything on port 0 of 127.0.0.1 with in-memory certificates: what tests want.
        public static func testing(
            environments: [APNSEnvironment] = [.development, .production],
            tls: Bool = true
        ) -> Configuration {
            var configuration = Configuration(
                listeners: environments.map { Listener(environment: $0, port: 0, tls: tls) },
                controlPort: 0
            )
            configuration.randomSeed = 42
            return configuration
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
public import APNSModels
public import NIOSSL

/// How an ``APNSClient`` reaches APNs: one credential, one environment, one pool of connections.
public struct APNSClientConfiguration: Sendable {
    /// How the client proves who it is.
    public enum Credential: Sendable {
        /// Token authentication: a `.p8` key, signed into a provider token shared by every connection.
        /// `environment` restricts the key to one environment, as Apple lets a key be created;
        /// the client then refuses to use it against the other.
        case token(SigningKey, restrictedTo: APNSEnvironment? = nil)
        /// Certificate authentication: the client certificate chain and its private key.
        case certificate(chain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey)

        /// A PEM certificate (chain) and a PEM private key, from files.
        public static func certificate(pemFile: String, privateKeyFile: String) throws(APNSClientError) -> Credential {
            do {
                return .certificate(
                    chain: try NIOSSLCertificate.fromPEMFile(pemFile),
                    privateKey: try NIOSSLPrivateKey(file: privateKeyFile, format: .pem)
                )
            } catch {
                throw APNSClientError(code: .badConfiguration, message: "cannot read the certificate or key: \(error)")
            }
        }

        /// A PKCS#12 bundle (`.p12`), as Keychain Access exports it.
        public static func pkcs12(file: String, passphrase: String?) throws(APNSClientError) -> Credential {
            do {
                let bundle = try NIOSSLPKCS12Bundle(file: file, passphrase: passphrase.map { Array($0.utf8) } ?? [])
                return .certificate(chain: bundle.certificateChain, privateKey: bundle.privateKey)
            } catch {
                throw APNSClientError(code: .badConfiguration, message: "cannot read the PKCS#12 bundle: \(error)")
            }
        }

        var usesCertificate: Bool {
            if case .certificate = self { return true }
            return false
        }
    }

    /// Which certificates the client trusts for the server.
    public enum TrustRoots: Sendable {
        /// The system's roots (APNs chains to USERTrust RSA).
        case system
        /// Only these (an emulator's CA, a pinned root).
        case certificates([NIOSSLCertificate])
        /// Only the certificates in this PEM file.
        case pemFile(String)
    }

    public var credential: Credential
    /// Which APNs environment the pushes are for. With the default host it also picks the host.
    public var environment: APNSEnvironment
    /// The host to connect to: Apple's host for the environment unless set (an emulator, say).
    public var host: String?
    /// 443 unless set; Apple also listens on 2197.
    public var port: Int
    /// Where channel management goes (a second pool, opened on first use): Apple's
    /// channel-management host and port for the environment (2195, 2196) unless set; with a
    /// custom `host` (an emulator), that host and `port`.
    public var channelManagementHost: String?
    public var channelManagementPort: Int?
    public var trustRoots: TrustRoots
    /// Connections in the pool. One carries ~1000 concurrent streams; more spread the load.
    public var connections: Int
    /// At most this many streams in flight on one connection, below what the server allows; nil
    /// for the server's limit. A small window exposes fewer requests to one lost connection
    /// (each of them an unknown outcome), at the cost of throughput: one round trip per window.
    public var maximumStreamsPerConnection: Int?
    /// Requests waiting for a stream beyond which `send` suspends its caller (back-pressure).
    public var maximumQueuedRequests: Int
    /// The default time a request may take from `send` to APNs's answer.
    public var requestTimeout: Duration
    /// The time a connection may take to connect, finish TLS and receive the server's SETTINGS.
    public var connectTimeout: Duration
    /// A connection that has heard nothing for this long is sent a PING.
    public var pingInterval: Duration
    /// A PING unanswered for this long marks the connection dead; it is replaced.
    public var pingTimeout: Duration
    /// Reconnect back-off after failures: the first delay, doubled per failure up to `maximum`, with jitter.
    public var reconnectBackoff: (initial: Duration, maximum: Duration)
    /// How often one request may be put on the wire again after APNs did not process it (a
    /// refused stream, a stream above a GOAWAY's last-stream-id), before it fails with
    /// `connectionFailed`. A request written and unanswered when its connection ends is never
    /// resent by the client: it fails with `unknownOutcome`.
    public var maximumResends: Int
    /// When the shared provider token is replaced (20–59 minutes; 50 by default).
    public var tokenRefreshInterval: Duration

    public init(
        credential: Credential,
        environment: APNSEnvironment,
        host: String? = nil,
        port: Int = 443,
        trustRoots: TrustRoots = .system
    ) {
        self.credential = credential
        self.environment = environment
        self.host = host
        self.port = port
        self.trustRoots = trustRoots
        self.connections = 1
        self.maximumQueuedRequests = 10_000
        self.requestTimeout = .seconds(5)
        self.connectTimeout = .seconds(10)
        self.pingInterval = .seconds(60)
        self.pingTimeout = .seconds(5)
        self.reconnectBackoff = (.seconds(1), .seconds(60))
        self.maximumResends = 3
        self.tokenRefreshInterval = .seconds(50 * 60)
    }

    /// The host actually used.
    public var resolvedHost: String { self.host ?? self.environment.host }

    /// The configuration of the channel-management pool: one connection to its host and port.
    var channelManagement: APNSClientConfiguration {
        var configuration = self
        configuration.host = self.channelManagementHost ?? self.host ?? self.environment.channelManagementHost
        configuration.port = self.channelManagementPort ?? (self.host == nil ? self.environment.channelManagementPort : self.port)
        configuration.connections = 1
        return configuration
    }

    func validate() throws(APNSClientError) {
        func bad(_ message: String) -> APNSClientError { APNSClientError(code: .badConfiguration, message: message) }
        guard (1...65_535).contains(self.port) else { throw bad("port \(self.port) is not a TCP port") }
        if let port = self.channelManagementPort, !(1...65_535).contains(port) { throw bad("port \(port) is not a TCP port") }
        guard (1...64).contains(self.connections) else { throw bad("connections must be 1 to 64, not \(self.connections)") }
        if let streams = self.maximumStreamsPerConnection, streams < 1 {
            throw bad("maximumStreamsPerConnection must be at least 1, not \(streams)")
        }
        guard self.maximumQueuedRequests >= 1 else { throw bad("maximumQueuedRequests must be at least 1") }
        guard self.requestTimeout > .zero, self.connectTimeout > .zero, self.pingInterval > .zero, self.pingTimeout > .zero else {
            throw bad("timeouts and intervals must be positive")
        }
        guard self.reconnectBackoff.initial > .zero, self.reconnectBackoff.maximum >= self.reconnectBackoff.initial else {
            throw bad("the reconnect back-off needs 0 < initial <= maximum")
        }
        guard self.maximumResends >= 0 else { throw bad("maximumResends cannot be negative") }
        if case .token(_, let restriction?) = self.credential, restriction != self.environment {
            throw bad("the key is restricted to \(restriction); it cannot push to \(self.environment)")
        }
    }
}

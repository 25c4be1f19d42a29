// SPDX-License-Identifier: Apache-2.0
import APNSClient
package import APNSModels
import HeraldCore
import Logging
import NIOSSL
import Synchronization

/// Where pushes for an app and environment go when the app has no credentials of its own.
package struct EmulatorTarget: Sendable {
    package var host: String
    package var ports: [APNSEnvironment: Int]
    package var caFile: String
    package var key: SigningKey

    /// Where apps with credentials connect instead of Apple.
    struct Override: Sendable {
        var host: String
        var port: Int
        var caFile: String?
    }

    package init(host: String, ports: [APNSEnvironment: Int], caFile: String, key: SigningKey) {
        self.host = host
        self.ports = ports
        self.caFile = caFile
        self.key = key
    }
}

/// Which of an app's two clients (per environment) a push goes through.
enum ClientLane: String, Sendable {
    /// First sends and ordinary retries: the pool's connections, as many streams as APNs allows.
    case main
    /// Resends of pushes whose outcome was unknown: one connection of its own with a small
    /// window of streams, so that a resend, the last chance of its delivery, shares its
    /// connection's fate with few others when that connection is lost.
    case resend
}

/// One APNs client per (app, environment, lane), made on first use from the app's sealed
/// credentials — or pointed at the built-in emulator when the app has none — and reused after.
final class ClientProvider: Sendable {
    fileprivate struct Entry: Sendable {
        var sealed: [UInt8]?
        var client: APNSClient
    }

    private let store: any HeraldStore
    private let secrets: SecretBox
    private let emulator: EmulatorTarget?
    private let override: EmulatorTarget.Override?
    /// At most half the delivery lease: a batch is answered or failed before its lease can run
    /// out, so no other worker claims (and sends again) what is still in flight.
    private let requestTimeout: Duration
    /// Streams in flight on the resend lane's connection.
    private let resendStreams: Int
    private let logger: Logger
    fileprivate let clients = Mutex<[String: Entry]>([:])

    init(
        store: any HeraldStore, secrets: SecretBox, emulator: EmulatorTarget?, override: EmulatorTarget.Override?,
        requestTimeout: Duration, resendStreams: Int, logger: Logger
    ) {
        self.requestTimeout = requestTimeout
        self.resendStreams = resendStreams
        self.store = store
        self.secrets = secrets
        self.emulator = emulator
        self.override = override
        self.logger = logger
    }

    /// The client for `appID` in `environment` on `lane`; a new one if the credentials changed.
    func client(appID: String, environment: APNSEnvironment, lane: ClientLane = .main) async throws(HeraldError) -> APNSClient {
        let key = "\(appID)/\(environment.rawValue)/\(lane.rawValue)"
        let sealed: [UInt8]?
        do {
            sealed = try await self.store.credentials(appID: appID)[.apns(environment)]
        } catch {
            throw HeraldError(code: "store_unavailable", "cannot read credentials: \(error)")
        }
        if let entry = self.clients.withLock({ $0[key] }), entry.sealed == sealed { return entry.client }
        var configuration = try self.configuration(sealed: sealed, environment: environment, appID: appID)
        if lane == .resend {
            configuration.connections = 1
            configuration.maximumStreamsPerConnection = self.resendStreams
        }
        let client: APNSClient
        do {
            var logger = self.logger
            logger[metadataKey: "herald.app"] = "\(appID)"
            if lane != .main { logger[metadataKey: "herald.lane"] = "\(lane.rawValue)" }
            client = try APNSClient(configuration: configuration, logger: logger)
        } catch {
            throw HeraldError(code: "credentials_unusable", error.message)
        }
        let replaced = self.clients.withLock { clients -> APNSClient? in
            let old = clients[key]?.client
            clients[key] = Entry(sealed: sealed, client: client)
            return old
        }
        if let replaced { await replaced.shutdown() }
        return client
    }

    private func configuration(sealed: [UInt8]?, environment: APNSEnvironment, appID: String) throws(HeraldError) -> APNSClientConfiguration {
        guard let sealed else {
            guard let emulator = self.emulator, let port = emulator.ports[environment] else {
                throw HeraldError(code: "no_credentials", "app '\(appID)' has no \(environment) credentials")
            }
            var configuration = APNSClientConfiguration(
                credential: .token(emulator.key), environment: environment, host: emulator.host, port: port,
                trustRoots: .pemFile(emulator.caFile)
            )
            configuration.requestTimeout = self.requestTimeout
            return configuration
        }
        let material: CredentialMaterial
        do {
            material = try CredentialCoding.decode(try self.secrets.open(sealed))
        } catch {
            throw HeraldError(code: "credentials_unreadable", "stored credentials cannot be opened with this master key")
        }
        let credential: APNSClientConfiguration.Credential
        switch material {
        case .token(let keyID, let teamID, let pem, let restriction):
            do {
                credential = .token(try SigningKey(pem: pem, keyID: keyID, teamID: teamID), restrictedTo: restriction)
            } catch {
                throw HeraldError(code: "credentials_unusable", error.description)
            }
        case .certificate(let certificatePEM, let keyPEM):
            do {
                credential = .certificate(
                    chain: try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)),
                    privateKey: try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
                )
            } catch {
                throw HeraldError(code: "credentials_unusable", "the certificate or key cannot be read")
            }
        }
        var configuration = APNSClientConfiguration(credential: credential, environment: environment)
        if let override = self.override {
            configuration.host = override.host
            configuration.port = override.port
            if let caFile = override.caFile { configuration.trustRoots = .pemFile(caFile) }
        }
        configuration.requestTimeout = self.requestTimeout
        return configuration
    }

    func shutdown() async {
        let clients = self.clients.withLock { clients -> [APNSClient] in
            let all = clients.values.map(\.client)
            clients.removeAll()
            return all
        }
        for client in clients { await client.shutdown() }
    }
}

extension ClientProvider {
    /// Each (app, environment) with a client made so far, and the connections open on its lanes.
    func connections() async -> [(appID: String, environment: String, open: Int)] {
        let clients = self.clients.withLock { $0.map { ($0.key, $0.value.client) } }.sorted { $0.0 < $1.0 }
        var result: [(appID: String, environment: String, open: Int)] = []
        for (key, client) in clients {
            // "app/environment/lane": an app id has no "/" (validated), so the last two parts are known.
            let parts = key.split(separator: "/").map(String.init)
            let appID = parts.dropLast(2).joined(separator: "/")
            let environment = parts.count >= 2 ? parts[parts.count - 2] : ""
            let open = await client.openConnections()
            if let last = result.last, last.appID == appID, last.environment == environment {
                result[result.count - 1].open += open
            } else {
                result.append((appID, environment, open))
            }
        }
        return result
    }
}

/// Credential material as JSON, sealed before it is stored.
enum CredentialCoding {
    static func encode(_ material: CredentialMaterial) -> [UInt8] {
        switch material {
        case .token(let keyID, let teamID, let pem, let restriction):
            var members: [(String, JSONValue)] = [
                ("type", "token"), ("keyId", .string(keyID)), ("teamId", .string(teamID)), ("privateKey", .string(pem)),
            ]
            if let restriction { members.append(("restrictedTo", .string(restriction.rawValue))) }
            return JSONValue.object(members).serialized()
        case .certificate(let certificate, let key):
            return JSONValue.object([("type", "certificate"), ("certificate", .string(certificate)), ("privateKey", .string(key))]).serialized()
        }
    }

    struct Unreadable: Error {}

    static func decode(_ bytes: [UInt8]) throws -> CredentialMaterial {
        let value = try JSONValue.parse(bytes)
        switch value["type"]?.stringValue {
        case "token":
            guard let keyID = value["keyId"]?.stringValue, let teamID = value["teamId"]?.stringValue, let pem = value["privateKey"]?.stringValue
            else {
                throw Unreadable()
            }
            return .token(
                keyID: keyID, teamID: teamID, privateKeyPEM: pem,
                restrictedTo: value["restrictedTo"]?.stringValue.flatMap(APNSEnvironment.init(rawValue:)))
        case "certificate":
            guard let certificate = value["certificate"]?.stringValue, let key = value["privateKey"]?.stringValue else { throw Unreadable() }
            return .certificate(certificatePEM: certificate, privateKeyPEM: key)
        default:
            throw Unreadable()
        }
    }
}

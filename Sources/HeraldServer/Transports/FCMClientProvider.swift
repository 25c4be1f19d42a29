// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMClient
package import FCMEmulator
import HeraldCore
package import Logging
import ServiceLifecycle
import Synchronization

/// One FCM client per app, made on first use from the app's sealed service account — or, for an
/// app without one, from a service account of the built-in FCM emulator made for it — and reused
/// until the credential changes.
final class FCMClientProvider: Sendable {
    private struct Entry: Sendable {
        var sealed: [UInt8]?
        var client: FCMClient
    }

    private let store: any HeraldStore
    private let secrets: SecretBox
    /// FCM's origin for apps with credentials; nil: Google's.
    private let endpoint: String?
    private let emulator: FCMEmulator?
    private let requestTimeout: Duration
    private let clock: any EpochClock
    private let logger: Logger
    private let clients = Mutex<[String: Entry]>([:])

    init(
        store: any HeraldStore, secrets: SecretBox, endpoint: String?, emulator: FCMEmulator?, requestTimeout: Duration, clock: any EpochClock,
        logger: Logger
    ) {
        self.store = store
        self.secrets = secrets
        self.endpoint = endpoint
        self.emulator = emulator
        self.requestTimeout = requestTimeout
        self.clock = clock
        self.logger = logger
    }

    /// The client for `appID`; a new one if its credential changed.
    func client(appID: String) async throws(HeraldError) -> FCMClient {
        let sealed: [UInt8]?
        do {
            sealed = try await self.store.credentials(appID: appID)[.fcm]
        } catch {
            throw HeraldError(code: "store_unavailable", "cannot read credentials: \(error)")
        }
        if let entry = self.clients.withLock({ $0[appID] }), entry.sealed == sealed { return entry.client }
        var configuration = FCMClient.Configuration()
        configuration.requestTimeout = self.requestTimeout
        let key: FCMServiceAccountKey
        if let sealed {
            key = try Self.open(sealed, secrets: self.secrets)
            if let endpoint = self.endpoint { configuration.endpoint = endpoint }
            // An account of the built-in emulator (a development set-up): sent to the emulator too.
            if let emulator = self.emulator, key.tokenURI.hasPrefix(emulator.baseURL + "/") { configuration.endpoint = emulator.baseURL }
            // The JSON names where its assertion goes: Herald posts there only if it is Google's
            // (or the FCM endpoint's origin set by the operator), never an address an uploader chose.
            guard self.allows(tokenURI: key.tokenURI) else {
                throw HeraldError(
                    code: "credentials_unusable",
                    "the service account's token_uri is not Google's (\(FCMServiceAccountKey.googleTokenAudience)) nor on --fcm-endpoint's origin")
            }
        } else {
            guard let emulator = self.emulator else {
                throw HeraldError(code: "no_credentials", "app '\(appID)' has no FCM service account")
            }
            do {
                key = try FCMServiceAccountKey(json: Array(try emulator.makeServiceAccount(projectID: Self.projectID(appID: appID)).json.utf8))
            } catch {
                throw HeraldError(code: "credentials_unusable", "the FCM emulator's service account cannot be used: \(error)")
            }
            configuration.endpoint = emulator.baseURL
        }
        var logger = self.logger
        logger[metadataKey: "herald.app"] = "\(appID)"
        let client = FCMClient(key: key, configuration: configuration, clock: self.clock, logger: logger)
        let replaced = self.clients.withLock { clients -> FCMClient? in
            let old = clients[appID]?.client
            clients[appID] = Entry(sealed: sealed, client: client)
            return old
        }
        if let replaced { await replaced.shutdown() }
        return client
    }

    /// Whether Herald may post assertions to `uri`: Google's token endpoint, the built-in
    /// emulator's, or one on the origin the operator pointed FCM at (`--fcm-endpoint`: an
    /// emulator serves both).
    func allows(tokenURI uri: String) -> Bool {
        if uri == FCMServiceAccountKey.googleTokenAudience { return true }
        if let emulator = self.emulator, uri.hasPrefix(emulator.baseURL + "/") { return true }
        guard let endpoint = self.endpoint else { return false }
        let origin = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        return uri.hasPrefix(origin + "/")
    }

    /// The emulator's project for an app without a service account: its id as a project id.
    static func projectID(appID: String) -> String {
        String(appID.lowercased().map { $0 == "_" ? "-" : $0 })
    }

    /// Gets a new access token for every client whose token expires within `margin`: the send
    /// path then finds a valid one (a 401 still renews once, on the spot).
    func renewAll(within margin: Duration) async {
        let all = self.clients.withLock { $0.map { ($0.key, $0.value.client) } }
        for (appID, client) in all {
            do {
                try await client.renewAccessToken(within: margin)
            } catch {
                self.logger.warning("FCM access token not renewed", metadata: ["herald.app": "\(appID)", "error": "\(error.code)"])
            }
        }
    }

    func shutdown() async {
        let all = self.clients.withLock { clients in
            defer { clients = [:] }
            return clients.values.map(\.client)
        }
        for client in all { await client.shutdown() }
    }

    // MARK: the sealed form

    /// The stored (then sealed) form of a service account: its JSON as uploaded.
    static func encode(serviceAccount json: [UInt8]) -> [UInt8] {
        JSONValue.object([("type", "fcm"), ("serviceAccount", .string(String(decoding: json, as: UTF8.self)))]).serialized()
    }

    static func open(_ sealed: [UInt8], secrets: SecretBox) throws(HeraldError) -> FCMServiceAccountKey {
        let plain: [UInt8]
        do {
            plain = try secrets.open(sealed)
        } catch {
            throw HeraldError(code: "credentials_unreadable", "stored credentials cannot be opened with this master key")
        }
        guard let value = try? JSONValue.parse(plain), value["type"]?.stringValue == "fcm", let json = value["serviceAccount"]?.stringValue else {
            throw HeraldError(code: "credentials_unreadable", "the stored FCM credential is not one Herald wrote")
        }
        do {
            return try FCMServiceAccountKey(json: Array(json.utf8))
        } catch {
            throw HeraldError(code: "credentials_unusable", error.description)
        }
    }
}

/// Renews FCM access tokens before they expire, off the send path: every minute, each client's
/// token that has less than ten minutes left.
struct FCMTokenRenewal: Service {
    let clients: FCMClientProvider
    var interval: Duration = .seconds(60)
    var margin: Duration = .seconds(600)

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            await self.clients.renewAll(within: self.margin)
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
            } catch {
                return  // shut down, or cancelled (the group ends when a service fails)
            }
        }
    }
}

/// Runs `body` with an FCM emulator listening, and stops it after.
package func withFCMEmulator<Result>(
    configuration: FCMEmulator.Configuration, logger: Logger, _ body: (FCMEmulator) async throws -> Result
) async throws -> Result {
    let emulator = FCMEmulator(configuration: configuration, logger: logger)
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

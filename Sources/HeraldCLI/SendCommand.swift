// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Push one notification, or many read from standard input.",
        discussion: """
            With --token, one notification goes to that device. Without it, standard input is \
            read line by line: each line is a device token (hex), or a JSON object such as \
            {"token":"…","payload":{…},"pushType":"alert","topic":"…","priority":10,"collapseId":"…","expiration":0,"apnsId":"…"} \
            whose keys override the command line. Blank lines and lines starting with # are skipped.

            The payload is --payload (JSON), or built from --title/--body/--badge/--sound and friends.
            Exit status: 0 when every notification was accepted, 1 when any failed, 64 on bad options.
            Against the emulator: --host 127.0.0.1 --port 2197 --ca-file .herald/emulator/ca.pem.

            With --simulator-file, nothing is sent: the payload is written as an .apns file (with             "Simulator Target Bundle" from --topic) for `xcrun simctl push booted <file>`; no             credentials are needed. Simulator pushes hold at most 4096 bytes.
            """
    )

    @OptionGroup(title: "Credentials (token or certificate)") var credentials: Credentials
    @OptionGroup(title: "Where") var target: Target
    @OptionGroup(title: "Notification") var notification: NotificationOptions

    @Option(help: "Device token (hex). Without it, tokens or JSON lines are read from standard input.")
    var token: String?

    @Option(help: "Broadcast one Live Activity update or end to this channel (its base64 id) instead; --topic is the bundle id.")
    var channel: String?

    @Option(help: "Connections to APNs.")
    var connections = 1

    @Option(help: "Write an .apns file for `xcrun simctl push` instead of sending.")
    var simulatorFile: String?

    @Option(help: "Seconds each notification may take.")
    var timeout: Double = 10

    @Flag(help: "Print nothing but failures and the summary.")
    var quiet = false

    @Option(help: "Log level for the client (trace, debug, info, warning, error).")
    var logLevel: Logger.Level = .warning

    func run() async throws {
        if let file = self.simulatorFile {
            try self.writeSimulatorFile(file)
            return
        }
        var logger = Logger(label: "herald.send")
        logger.logLevel = self.logLevel
        var configuration = try self.target.clientConfiguration(self.credentials, timeout: self.timeout)
        configuration.connections = self.connections
        let defaults = try self.notification.defaults()
        var broadcast: APNSBroadcastRequest?
        if let channel = self.channel {
            broadcast = try self.broadcastRequest(channel: channel, defaults: defaults)
        }
        let client: APNSClient
        do {
            client = try APNSClient(configuration: configuration, logger: logger)
        } catch {
            throw ValidationError(error.message)
        }
        let failed: Bool
        if let broadcast {
            failed = await self.broadcastOne(client, broadcast)
        } else if let token = self.token {
            failed = await self.sendOne(client, try defaults.request(token: token, line: nil, tag: 0))
        } else {
            failed = try await self.sendMany(client, defaults: defaults)
        }
        await client.shutdown()
        if failed { throw ExitCode(1) }
    }

    /// The most `xcrun simctl push` takes.
    static let simulatorLimit = 4096

    /// Writes the notification as an .apns file: the payload plus `Simulator Target Bundle`.
    private func writeSimulatorFile(_ path: String) throws {
        guard self.token == nil else { throw ValidationError("--simulator-file writes a file; --token does not apply") }
        let defaults = try self.notification.defaults()
        guard [.alert, .background].contains(defaults.headers.pushType) else {
            throw ValidationError("a simulator takes alert and background pushes, not \(defaults.headers.pushType.rawValue)")
        }
        guard case .object(var members) = try JSONValue.parse(defaults.payload) else {
            throw ValidationError("the payload must be a JSON object")
        }
        members.removeAll { $0.0 == "Simulator Target Bundle" }
        members.append(
            ("Simulator Target Bundle", .string(defaults.headers.pushType.bundleID(fromTopic: defaults.headers.topic) ?? defaults.headers.topic)))
        let bytes = JSONValue.object(members).serialized()
        guard bytes.count <= Self.simulatorLimit else {
            throw ValidationError("the .apns file would be \(bytes.count) bytes; xcrun simctl push takes at most \(Self.simulatorLimit)")
        }
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw ValidationError("cannot write \(path): \(error.localizedDescription)")
        }
        if !self.quiet { print("wrote \(path) (\(bytes.count) bytes) for: xcrun simctl push booted \(path)") }
    }

    /// The broadcast `--channel` asks for: the payload as given, priority 10 and expiration 0
    /// unless set, `--apns-id` as its `apns-request-id`.
    private func broadcastRequest(channel: String, defaults: NotificationDefaults) throws -> APNSBroadcastRequest {
        guard self.token == nil else { throw ValidationError("--channel broadcasts to a channel; --token does not apply") }
        guard let channelID = APNSChannelID(rawValue: channel) else { throw ValidationError("--channel must be a base64 channel id") }
        guard self.notification.pushType == "liveactivity" else { throw ValidationError("--channel needs --push-type liveactivity") }
        guard self.notification.collapseId == nil else { throw ValidationError("broadcasts take no --collapse-id") }
        let expiration: Int64
        switch defaults.headers.expiration {
        case .storagePolicy, .immediately: expiration = 0
        case .at(let seconds): expiration = seconds
        }
        let request = APNSBroadcastRequest(
            channelID: channelID, bundleID: defaults.headers.topic, payload: defaults.payload,
            priority: defaults.headers.priority ?? .immediate, expiration: expiration, requestID: defaults.headers.apnsID)
        do {
            try request.validate()
        } catch {
            throw ValidationError(error.description)
        }
        return request
    }

    private func broadcastOne(_ client: APNSClient, _ request: APNSBroadcastRequest) async -> Bool {
        do {
            let delivery = try await client.broadcast(request)
            if !self.quiet {
                print("accepted apns-request-id=\(delivery.requestID ?? "-")" + (delivery.uniqueID.map { " apns-unique-id=\($0)" } ?? ""))
            }
            return false
        } catch {
            printError("failed: \(Self.describe(error))")
            return true
        }
    }

    private func sendOne(_ client: APNSClient, _ request: APNSRequest) async -> Bool {
        do {
            let delivery = try await client.send(request)
            if !self.quiet {
                print("accepted apns-id=\(delivery.apnsID ?? "-")" + (delivery.uniqueID.map { " apns-unique-id=\($0)" } ?? ""))
            }
            return false
        } catch {
            printError("failed: \(Self.describe(error))")
            return true
        }
    }

    private func sendMany(_ client: APNSClient, defaults: NotificationDefaults) async throws -> Bool {
        let progress = Progress(interactive: isatty(2) == 1 && !self.quiet)
        let lines = StandardInputLines()
        let requests = lines.compactMap { (number, line) -> APNSRequest? in
            let text = line.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty, !text.hasPrefix("#") else { return nil }
            do {
                return try defaults.request(line: text, number: number)
            } catch {
                progress.invalidLine(number, error)
                return nil
            }
        }
        try await client.send(requests) { outcome in
            progress.record(outcome)
        }
        progress.finish()
        return progress.anyFailed
    }

    static func describe(_ error: APNSClientError) -> String {
        var text = error.description
        text += " [\(error.failureClass.rawValue)]"
        if let timestamp = error.timestampMilliseconds { text += " timestamp=\(timestamp)" }
        return text
    }
}

struct Credentials: ParsableArguments {
    @Option(help: "Token auth: the .p8 signing key.") var keyFile: String?
    @Option(help: "Token auth: the key's id.") var keyId: String?
    @Option(help: "Token auth: your team id.") var teamId: String?
    @Option(help: "Certificate auth: the PEM certificate (chain).") var certificate: String?
    @Option(help: "Certificate auth: the PEM private key.") var privateKey: String?
    @Option(help: "Certificate auth: a PKCS#12 (.p12) bundle instead of PEM files.") var pkcs12: String?
    @Option(help: "Environment variable holding the PKCS#12 passphrase (kept off the command line).")
    var passphraseEnv = "HERALD_P12_PASSPHRASE"

    func credential() throws -> APNSClientConfiguration.Credential {
        do {
            if let keyFile {
                guard let keyId, let teamId else { throw ValidationError("--key-file needs --key-id and --team-id") }
                let pem: String
                do {
                    pem = try String(contentsOfFile: keyFile, encoding: .utf8)
                } catch {
                    throw ValidationError("cannot read \(keyFile)")
                }
                return .token(try SigningKey(pem: pem, keyID: keyId, teamID: teamId))
            }
            if let pkcs12 {
                return try .pkcs12(file: pkcs12, passphrase: ProcessInfo.processInfo.environment[self.passphraseEnv])
            }
            if let certificate, let privateKey {
                return try .certificate(pemFile: certificate, privateKeyFile: privateKey)
            }
        } catch let error as APNSClientError {
            throw ValidationError(error.message)
        } catch let error as APNSValidationError {
            throw ValidationError(error.description)
        }
        throw ValidationError("give --key-file/--key-id/--team-id, --certificate/--private-key, or --pkcs12")
    }
}

struct Target: ParsableArguments {
    @Option(help: "development or production.") var environment = "development"

    func apnsEnvironment() throws -> APNSEnvironment {
        guard let environment = APNSEnvironment(rawValue: self.environment) else {
            throw ValidationError("--environment must be development or production")
        }
        return environment
    }
    @Option(help: "Host to connect to (default: Apple's host for the environment).") var host: String?
    @Option(help: "Port (default 443).") var port: Int?
    @Option(help: "Trust only the certificates in this PEM file (an emulator's CA).") var caFile: String?

    /// The client configuration `herald send` and `herald channels` share: `credentials`, this
    /// target, and requests that may take `timeout` seconds (more than 0, at most 3600).
    func clientConfiguration(_ credentials: Credentials, timeout: Double) throws -> APNSClientConfiguration {
        var configuration = APNSClientConfiguration(
            credential: try credentials.credential(),
            environment: try self.apnsEnvironment(),
            host: self.host,
            port: self.port ?? 443,
            trustRoots: self.caFile.map { .pemFile($0) } ?? .system
        )
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
        configuration.requestTimeout = .milliseconds(Int64(timeout * 1000))
        return configuration
    }
}

struct NotificationOptions: ParsableArguments {
    @Option(help: "Topic: the bundle id, plus the push type's suffix (.voip, …).") var topic: String
    @Option(help: "Push type: alert, background, voip, liveactivity, …") var pushType = "alert"
    @Option(help: "Priority: 10, 5 or 1 (default: APNs's).") var priority: Int?
    @Option(help: "apns-expiration: UNIX seconds, or 0 for one attempt only.") var expiration: Int64?
    @Option(help: "apns-collapse-id.") var collapseId: String?
    @Option(help: "apns-id (a UUID).") var apnsId: String?
    @Option(help: "The whole payload as JSON.") var payload: String?
    @Option(help: "Alert title.") var title: String?
    @Option(help: "Alert subtitle.") var subtitle: String?
    @Option(help: "Alert body.") var body: String?
    @Option(help: "Badge number.") var badge: Int?
    @Option(help: "Sound name (\"default\").") var sound: String?
    @Option(help: "Notification category.") var category: String?
    @Option(help: "Thread id for grouping.") var threadId: String?
    @Flag(help: "Set content-available (background update).") var contentAvailable = false
    @Flag(help: "Set mutable-content (notification service extension).") var mutableContent = false

    func defaults() throws -> NotificationDefaults {
        guard let pushType = PushType(rawValue: self.pushType) else {
            throw ValidationError("--push-type must be one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var priority: Priority?
        if let value = self.priority {
            guard let parsed = Priority(rawValue: value) else { throw ValidationError("--priority must be 10, 5 or 1") }
            priority = parsed
        }
        let payload: [UInt8]
        if let text = self.payload {
            let built = [self.title, self.subtitle, self.body, self.sound, self.category, self.threadId].contains { $0 != nil }
            guard !built, self.badge == nil, !self.contentAvailable, !self.mutableContent else {
                throw ValidationError("give either --payload or the alert flags, not both")
            }
            do {
                payload = try JSONValue.parse(text).serialized()
            } catch {
                throw ValidationError("--payload is not JSON: \(error)")
            }
        } else {
            var aps = APS()
            if self.title != nil || self.subtitle != nil || self.body != nil {
                aps.alert = .fields(AlertFields(title: self.title, subtitle: self.subtitle, body: self.body))
            }
            aps.badge = self.badge
            aps.sound = self.sound.map { .named($0) }
            aps.category = self.category
            aps.threadID = self.threadId
            aps.contentAvailable = self.contentAvailable
            aps.mutableContent = self.mutableContent
            do {
                payload = try Payload(aps: aps).encode(for: pushType)
            } catch {
                throw ValidationError(error.description)
            }
        }
        return NotificationDefaults(
            headers: NotificationHeaders(
                pushType: pushType,
                topic: self.topic,
                priority: priority,
                expiration: self.expiration.map { $0 == 0 ? .immediately : .at(epochSeconds: $0) } ?? .storagePolicy,
                collapseID: self.collapseId,
                apnsID: self.apnsId
            ),
            payload: payload
        )
    }
}

/// The command line's notification, which input lines may override.
struct NotificationDefaults: Sendable {
    var headers: NotificationHeaders
    var payload: [UInt8]

    struct LineError: Error, CustomStringConvertible {
        var description: String
    }

    func request(token: String, line: Int?, tag: Int) throws -> APNSRequest {
        do {
            return APNSRequest(deviceToken: try DeviceToken(hex: token), headers: self.headers, payload: self.payload, tag: tag)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// A line: a hex token, or a JSON object with `token` and optional overrides.
    func request(line: String, number: Int) throws -> APNSRequest {
        guard line.hasPrefix("{") else {
            return APNSRequest(deviceToken: try Self.token(line), headers: self.headers, payload: self.payload, tag: number)
        }
        let object: JSONValue
        do {
            object = try JSONValue.parse(line)
        } catch {
            throw LineError(description: "not JSON: \(error)")
        }
        guard let token = object["token"]?.stringValue else { throw LineError(description: "no \"token\"") }
        var headers = self.headers
        if let value = object["pushType"] {
            guard let type = value.stringValue.flatMap(PushType.init(rawValue:)) else { throw LineError(description: "unknown pushType") }
            headers.pushType = type
        }
        if let value = object["topic"] {
            guard let topic = value.stringValue else { throw LineError(description: "topic must be a string") }
            headers.topic = topic
        }
        if let value = object["priority"] {
            guard let priority = value.intValue.flatMap({ Priority(rawValue: Int($0)) }) else {
                throw LineError(description: "priority must be 10, 5 or 1")
            }
            headers.priority = priority
        }
        if let value = object["expiration"] {
            guard let seconds = value.intValue, seconds >= 0 else { throw LineError(description: "expiration must be UNIX seconds or 0") }
            headers.expiration = seconds == 0 ? .immediately : .at(epochSeconds: seconds)
        }
        if let value = object["collapseId"] {
            guard let collapseID = value.stringValue else { throw LineError(description: "collapseId must be a string") }
            headers.collapseID = collapseID
        }
        if let value = object["apnsId"] {
            guard let apnsID = value.stringValue else { throw LineError(description: "apnsId must be a string") }
            headers.apnsID = apnsID
        }
        let payload = object["payload"].map { $0.serialized() } ?? self.payload
        return APNSRequest(deviceToken: try Self.token(token), headers: headers, payload: payload, tag: number)
    }

    private static func token(_ text: String) throws -> DeviceToken {
        do {
            return try DeviceToken(hex: text)
        } catch {
            throw LineError(description: error.description)
        }
    }
}

/// Counts outcomes, prints failures as they come, a progress line on a terminal, and a summary.
final class Progress: Sendable {
    private struct State {
        var sent = 0
        var ok = 0
        var failed = 0
        var invalidLines = 0
        var byClass: [String: Int] = [:]
        var lastPrint = ContinuousClock.now
    }

    private let state = Mutex(State())
    private let interactive: Bool
    private let start = ContinuousClock.now

    init(interactive: Bool) {
        self.interactive = interactive
    }

    var anyFailed: Bool { self.state.withLock { $0.failed > 0 || $0.invalidLines > 0 } }

    func invalidLine(_ number: Int, _ error: any Error) {
        self.state.withLock { $0.invalidLines += 1 }
        printError("line \(number): not sent: \(error)")
    }

    func record(_ outcome: APNSOutcome) {
        let line: String? = self.state.withLock { state in
            state.sent += 1
            switch outcome.result {
            case .success:
                state.ok += 1
            case .failure(let error):
                state.failed += 1
                state.byClass[error.failureClass.rawValue, default: 0] += 1
            }
            guard self.interactive, ContinuousClock.now - state.lastPrint > .milliseconds(250) else { return nil }
            state.lastPrint = ContinuousClock.now
            return "\rsent \(state.sent)  ok \(state.ok)  failed \(state.failed)  \(self.rate(state.sent))/s "
        }
        if case .failure(let error) = outcome.result {
            let clear = self.interactive ? "\r\u{1B}[K" : ""
            printError("\(clear)line \(outcome.request.tag) (\(outcome.request.deviceToken.redacted)): \(SendCommand.describe(error))")
        }
        if let line { FileHandle.standardError.write(Data(line.utf8)) }
    }

    private func rate(_ count: Int) -> Int {
        let elapsed = ContinuousClock.now - self.start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0 ? Int(Double(count) / seconds) : 0
    }

    func finish() {
        let summary = self.state.withLock { state in
            let classes = state.byClass.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            let elapsed = ContinuousClock.now - self.start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return "sent \(state.sent), accepted \(state.ok), failed \(state.failed)" + (classes.isEmpty ? "" : " (\(classes))")
                + (state.invalidLines > 0 ? ", \(state.invalidLines) invalid lines not sent" : "")
                + String(format: " in %.2f s (%d/s)", seconds, self.rate(state.sent))
        }
        if self.interactive { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        printError(summary)
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Standard input as numbered lines, read in 64 KiB blocks on NIO's thread pool so the
/// cooperative pool never blocks; works for pipes, terminals and redirected files alike.
struct StandardInputLines: AsyncSequence, Sendable {
    typealias Element = (Int, String)

    struct AsyncIterator: AsyncIteratorProtocol {
        var pending: [UInt8] = []
        var number = 0
        var done = false

        mutating func next() async throws -> (Int, String)? {
            while true {
                if let newline = self.pending.firstIndex(of: UInt8(ascii: "\n")) {
                    var line = self.pending[..<newline]
                    if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
                    let text = String(decoding: line, as: UTF8.self)
                    self.pending.removeSubrange(...newline)
                    self.number += 1
                    return (self.number, text)
                }
                if self.done {
                    guard !self.pending.isEmpty else { return nil }
                    let text = String(decoding: self.pending, as: UTF8.self)
                    self.pending = []
                    self.number += 1
                    return (self.number, text)
                }
                let block = try await NIOThreadPool.singleton.runIfActive { () -> [UInt8] in
                    var buffer = [UInt8](repeating: 0, count: 65_536)
                    let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                    return count > 0 ? Array(buffer[..<count]) : []
                }
                if block.isEmpty { self.done = true } else { self.pending += block }
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator() }
}

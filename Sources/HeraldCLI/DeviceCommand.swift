// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Crypto
import Foundation
import HeraldKit
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `herald device`: a phone with the app on it, in a terminal. It gets a token from the emulator,
/// registers it with Herald through HeraldKit, and prints each notification the emulator delivers
/// as a person would see it, after the device-side rules: authorization, foreground
/// presentation, categories and actions, silent pushes, Live Activities, and a notification
/// service extension for `mutable-content`.
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "A virtual device: registers with Herald and shows what arrives.",
        discussion: """
            Needs a running herald serve with its built-in emulator (or herald emulator). Example:
              herald device --app demo --key hk_… --user ann --encrypt
            Authorization: authorized (banners), provisional (delivered quietly to Notification \
            Center), denied or not-determined (nothing shown; background pushes still wake the app).
            """
    )

    enum Authorization: String, ExpressibleByArgument, CaseIterable {
        case authorized, provisional, denied
        case notDetermined = "not-determined"
    }

    @Option(help: "Herald's API.") var server = "http://127.0.0.1:8080"
    @Option(help: "The emulator's control API.") var control = "http://127.0.0.1:2198"
    @Option(help: "The app's id in Herald.") var app: String
    @Option(help: "The app's bundle id (default: read from Herald is not possible with a register key, so give it).") var bundleId = "com.example.app"
    @Option(help: "A register-scoped API key for the app.") var key: String
    @Option(help: "The signed-in user.") var user: String?
    @Option(help: "Tags, comma-separated.") var tags: String?
    @Option(help: "sandbox or production.") var environment = "sandbox"
    @Option(help: "Notification permission.") var authorization: Authorization = .authorized
    @Flag(help: "The app is in the foreground (banners are shown while it runs).") var foreground = false
    @Flag(help: "Register an X25519 key: end-to-end encrypted notifications are decrypted by the service extension.") var encrypt = false
    @Option(help: "Registered categories and their actions: MESSAGE=REPLY+ARCHIVE;INVITE=ACCEPT") var categories: String?
    @Option(help: "Tap this action on every notification that offers it (reported on standard output).") var tap: String?
    @Option(help: "Exit after this many notifications (default: run until interrupted).") var count: Int?

    func run() async throws {
        guard let serverURL = URL(string: self.server), let controlURL = URL(string: self.control) else {
            throw ValidationError("--server and --control are URLs")
        }
        let categories = try self.parsedCategories()
        // 1. A token from APNs (the emulator), as the system would hand it over.
        let created = try await Self.json("POST", controlURL.appendingPathComponent("v1/devices"), body: [
            "bundleId": self.bundleId, "environment": self.environment == "production" ? "production" : "development",
        ])
        guard let token = created["token"] as? String, let data = PushToken.data(hex: token) else {
            throw ValidationError("the emulator did not create a device: \(created)")
        }
        // 2. Registered with Herald through HeraldKit.
        let privateKey = self.encrypt ? EncryptedPayload.PrivateKey.x25519(Curve25519.KeyAgreement.PrivateKey()) : nil
        let client = HeraldClient(serverURL: serverURL, appID: self.app, registerKey: self.key)
        do {
            try await client.register(.device(data), DeviceDetails(
                environment: self.environment == "production" ? .production : .sandbox, userID: self.user,
                tags: self.tags.map { $0.split(separator: ",").map(String.init) } ?? [], platform: "herald device",
                encryptionKey: privateKey?.publicKey
            ))
        } catch {
            throw ValidationError("Herald refused the registration: \(error)")
        }
        say("device \(token.prefix(8))… registered\(self.user.map { " for \($0)" } ?? "") (\(self.authorization.rawValue)\(self.foreground ? ", in the foreground" : "")\(self.encrypt ? ", end-to-end key" : ""))")
        // 3. The emulator's live stream, shown as it arrives.
        let handler = NotificationServiceHandler(privateKey: privateKey, deadline: .seconds(25)) { url in
            try await URLSession.shared.data(from: url).0
        }
        var shown = 0
        for try await line in EventStream(url: controlURL.appendingPathComponent("v1/devices/\(token)/events"), onOpen: {
            say("listening for notifications")
        }).events() {
            guard let event = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any], let payloadObject = event["payload"], JSONSerialization.isValidJSONObject(payloadObject),
                let payload = try? JSONSerialization.data(withJSONObject: payloadObject)
            else { continue }
            let pushType = event["pushType"] as? String ?? "alert"
            say(await self.render(payload, pushType: pushType, handler: handler, categories: categories))
            shown += 1
            if let count = self.count, shown >= count { return }
        }
    }

    /// MESSAGE=REPLY+ARCHIVE;INVITE=ACCEPT
    func parsedCategories() throws -> [String: [String]] {
        guard let text = self.categories else { return [:] }
        var result: [String: [String]] = [:]
        for entry in text.split(separator: ";") {
            let parts = entry.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty else { throw ValidationError("--categories: CATEGORY=ACTION+ACTION;…") }
            result[String(parts[0])] = parts[1].split(separator: "+").map(String.init)
        }
        return result
    }

    /// One notification as the person holding the phone would see it (or why they would not).
    func render(_ payload: Data, pushType: String, handler: NotificationServiceHandler, categories: [String: [String]]) async -> String {
        guard let received = try? ReceivedNotification(jsonData: payload) else { return "[unreadable payload]" }
        if pushType == "liveactivity" {
            let state = received.contentState.flatMap { try? String(decoding: JSONEncoder().encode($0), as: UTF8.self) } ?? "{}"
            return "[Live Activity] \(received.event ?? "update"): \(state)" + (received.alert.map { " — alert: \($0.title ?? "") \($0.body ?? "")" } ?? "")
        }
        if received.alert == nil, received.badge == nil, received.sound == nil {
            let custom = received.custom.keys.sorted().joined(separator: ", ")
            return received.contentAvailable ? "[background] the app was woken" + (custom.isEmpty ? "" : " with \(custom)") : "[empty notification]"
        }
        switch self.authorization {
        case .denied: return "[not shown: notifications are turned off for this app]"
        case .notDetermined: return "[not shown: the app never asked for permission]"
        case .authorized, .provisional: break
        }
        var content = (try? NotificationContent(payload: payload)) ?? NotificationContent()
        var note = ""
        if received.mutableContent {
            let before = content
            content = await handler.process(content)
            note = content == before ? " (service extension: left as sent)" : " (service extension: rewritten)"
        }
        var lines: [String] = []
        let place = self.authorization == .provisional ? "delivered quietly to Notification Center" : self.foreground ? "banner over the running app" : "banner"
        var header = "┌ \(self.bundleId) — \(place)"
        if let level = received.interruptionLevel { header += " • \(level)" }
        lines.append(header + note)
        for text in [content.title, content.subtitle, content.body] where !text.isEmpty { lines.append("│ \(text)") }
        var footer: [String] = []
        if let badge = content.badge { footer.append("badge \(badge)") }
        if let sound = content.sound, self.authorization == .authorized { footer.append("sound \(sound)") }
        if !content.threadID.isEmpty { footer.append("thread \(content.threadID)") }
        if !content.attachments.isEmpty { footer.append("\(content.attachments.count) attachment(s)") }
        if let actions = categories[content.categoryID] {
            footer.append("actions: " + actions.map { "[\($0)]" }.joined(separator: " "))
            if let tap = self.tap, actions.contains(tap) { footer.append("tapped \(tap)") }
        }
        lines.append("└ " + (footer.isEmpty ? "" : footer.joined(separator: " • ")))
        return lines.joined(separator: "\n")
    }

    static func json(_ method: String, _ url: URL, body: [String: Any]) async throws -> [String: Any] {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        request.setValue("application/json", forHTTPHeaderField: "content-type")
        let (data, _) = try await URLSession.shared.data(for: request)
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }
}

/// Server-sent events from the emulator's control API, read through a URLSession data delegate
/// (swift-corelibs-foundation has no `bytes(for:)`): each `data:` line's JSON.
final class EventStream: NSObject, URLSessionDataDelegate, Sendable {
    let url: URL
    let onOpen: @Sendable () -> Void
    private let state = Mutex<(buffer: [UInt8], continuation: AsyncThrowingStream<Data, any Error>.Continuation?)>(([], nil))

    init(url: URL, onOpen: @escaping @Sendable () -> Void) {
        self.url = url
        self.onOpen = onOpen
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        if (response as? HTTPURLResponse)?.statusCode == 200 { self.onOpen() }
        completionHandler(.allow)
    }

    func events() -> AsyncThrowingStream<Data, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        self.state.withLock { $0.continuation = continuation }
        let session = URLSession(configuration: .default, delegate: self, delegateQueue: nil)
        var request = URLRequest(url: self.url)
        request.timeoutInterval = 24 * 3600
        let task = session.dataTask(with: request)
        continuation.onTermination = { _ in
            task.cancel()
            session.invalidateAndCancel()
        }
        task.resume()
        return stream
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let (events, continuation) = self.state.withLock { state -> ([Data], AsyncThrowingStream<Data, any Error>.Continuation?) in
            state.buffer += data
            var events: [Data] = []
            while let newline = state.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = state.buffer[..<newline]
                state.buffer.removeSubrange(...newline)
                guard line.starts(with: Array("data:".utf8)) else { continue }
                events.append(Data(line.dropFirst(5)))
            }
            return (events, state.continuation)
        }
        for event in events { continuation?.yield(event) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let continuation = self.state.withLock { $0.continuation }
        if let error { continuation?.finish(throwing: error) } else { continuation?.finish() }
    }
}

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
struct DeviceCommand: AsyncParsableCommand, Sendable {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "A virtual device: registers with Herald and shows what arrives.",
        discussion: """
            Needs a running herald serve with its built-in emulator (or herald emulator). Example:
              herald device --app demo --key hk_… --user ann --encrypt
            Authorization: authorized (banners), provisional (delivered quietly to Notification \
            Center: no sound, no banner, no badge), denied or not-determined (nothing shown; \
            background pushes still wake the app).
            Local notifications the app schedules, shown beside remote ones: --local SPEC, SPEC \
            being after=SECONDS (time interval) or at=HH:MM[:SS] (calendar; weekday=1…7 narrows \
            it), repeat, title=…, body=…, badge=N, sound=NAME, id=…, separated by ';'. Example:
              --local 'after=5;title=Stand up;body=Time to stretch' --local 'at=09:30;repeat;title=Standup'
            With --platform android: an Android phone through the FCM emulator (--fcm), registered as the app \
            does from onNewToken, printing each message as Android handles it, one line per event.
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
    @Option(
        help:
            "The app's backend route that hands a signed-in user their assertion for a device token: GET <url>?user=<id>&token=<hex> answers the assertion as text (needed to bind the device to --user when the app verifies users)."
    )
    var userAssertionUrl: String?
    @Option(help: "Tags, comma-separated.") var tags: String?
    @Option(help: "sandbox or production.") var environment = "sandbox"
    @Option(help: "Notification permission.") var authorization: Authorization = .authorized
    @Flag(help: "The app is in the foreground (banners are shown while it runs).") var foreground = false
    @Flag(help: "Register an X25519 key: end-to-end encrypted notifications are decrypted by the service extension.") var encrypt = false
    @Option(help: "Registered categories and their actions: MESSAGE=REPLY+ARCHIVE;INVITE=ACCEPT") var categories: String?
    @Option(help: "Tap this action on every notification that offers it (reported on standard output, and to Herald as opened).") var tap: String?
    @Flag(help: "Open every notification shown (reported to Herald as opened, as the app does from its notification-response handler).")
    var open = false
    @Flag(
        inversion: .prefixedNo,
        help: "Report each push received to Herald through HeraldKit (its receipt id), as the app's service extension does (default: on)."
    )
    var receipts = true
    @Option(help: "Exit after this many notifications (default: run until interrupted).") var count: Int?
    @Flag(help: "Also register a PushKit VoIP token (incoming calls).") var voip = false
    @Option(
        help:
            "Accept Live Activities of this ActivityAttributes type started by push (registers a push-to-start token; each activity started registers its update token)."
    )
    var liveActivities: String?
    @Option(help: "A local notification the app schedules (repeatable): after=SECONDS or at=HH:MM[:SS], repeat, title=, body=, badge=, sound=, id=.")
    var local: [String] = []
    @OptionGroup(title: "Platform") var android: AndroidOptions

    /// Asks the app's backend for a user assertion, as a signed-in app would.
    func assertionSource() throws -> (@Sendable (String, String) async throws -> String)? {
        guard let text = self.userAssertionUrl else { return nil }
        guard let base = URLComponents(string: text), base.scheme != nil else { throw ValidationError("--user-assertion-url is a URL") }
        return { user, token in
            var url = base
            url.queryItems = (base.queryItems ?? []) + [URLQueryItem(name: "user", value: user), URLQueryItem(name: "token", value: token)]
            guard let address = url.url else { throw ValidationError("--user-assertion-url is a URL") }
            let (data, response) = try await URLSession.shared.data(from: address)
            guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                throw ValidationError("the backend answered \((response as? HTTPURLResponse)?.statusCode ?? 0) for a user assertion")
            }
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    func run() async throws {
        if self.android.platform == .android { return try await AndroidDevice(command: self).run() }
        guard let serverURL = URL(string: self.server), let controlURL = URL(string: self.control) else {
            throw ValidationError("--server and --control are URLs")
        }
        let categories = try self.parsedCategories()
        let locals = try self.local.map { spec in
            do { return try LocalNotification(spec: spec) } catch let error as LocalNotification.Invalid { throw ValidationError(error.description) }
        }
        let details = DeviceDetails(
            environment: self.environment == "production" ? .production : .sandbox, userID: self.user,
            tags: self.tags.map { $0.split(separator: ",").map(String.init) } ?? [], platform: "herald device"
        )
        let client = HeraldClient(
            serverURL: serverURL, appID: self.app, registerKey: self.key, persistence: .memoryOnly, userAssertions: try self.assertionSource())
        // 1. A token from APNs (the emulator), as the system would hand it over, registered with
        // Herald through HeraldKit.
        let privateKey = self.encrypt ? EncryptedPayload.PrivateKey.x25519(Curve25519.KeyAgreement.PrivateKey()) : nil
        var withKey = details
        withKey.encryptionKey = privateKey?.publicKey
        let token = try await self.token(controlURL, kind: "device") { data in .device(data) }
        try await Self.register(client, token.push, withKey)
        say(
            "device \(token.hex.prefix(8))… registered\(self.user.map { " for \($0)" } ?? "") (\(self.authorization.rawValue)\(self.foreground ? ", in the foreground" : "")\(self.encrypt ? ", end-to-end key" : ""))"
        )
        var streams: [(hex: String, role: Role)] = [(token.hex, .app)]
        if self.voip {
            let call = try await self.token(controlURL, kind: "voip") { data in .voip(data) }
            try await Self.register(client, call.push, details)
            say("voip token \(call.hex.prefix(8))… registered")
            streams.append((call.hex, .voip))
        }
        if let attributesType = self.liveActivities {
            let starter = try await self.token(controlURL, kind: "push-to-start") { data in .pushToStart(data, attributesType: attributesType) }
            try await Self.register(client, starter.push, details)
            say("push-to-start token \(starter.hex.prefix(8))… registered for \(attributesType)")
            streams.append((starter.hex, .pushToStart))
        }
        // 2. Every stream at once: the app's, push-to-start's, and one per Live Activity started.
        var extensionCore = NotificationServiceHandler(privateKey: privateKey, deadline: 25) { url in
            try await URLSession.shared.data(from: url).0
        }
        // The service extension reports what it handles (mutable-content alerts); the device
        // reports the other pushes itself (see `report`).
        if self.receipts { extensionCore.receipts = client }
        let handler = extensionCore
        let tally = Tally()
        let expected = streams.count
        let (added, addedContinuation) = AsyncStream<(hex: String, role: Role)>.makeStream()
        for stream in streams { addedContinuation.yield(stream) }
        await withTaskGroup(of: Void.self) { group in
            for local in locals {
                say("local notification \(local.identifier) scheduled")
                group.addTask {
                    await self.schedule(local, handler: handler, categories: categories, tally: tally, more: addedContinuation)
                }
            }
            for await stream in added {
                group.addTask {
                    do {
                        try await self.follow(
                            stream, control: controlURL, client: client, details: details, handler: handler,
                            categories: categories, tally: tally, expected: expected, more: addedContinuation)
                    } catch  where Task.isCancelled || error is CancellationError || (error as? URLError)?.code == .cancelled {
                        // --count reached: the other streams are closed on purpose; not an error.
                    } catch {
                        say("[stream of \(stream.hex.prefix(8))… ended: \(error)]")
                    }
                }
            }
            // --count reached: stop following the others.
            group.cancelAll()
        }
    }

    /// Shows what arrives on one token's stream; a start adds the new activity's stream to `more`.
    func follow(
        _ stream: (hex: String, role: Role), control controlURL: URL, client: HeraldClient, details: DeviceDetails,
        handler: NotificationServiceHandler,
        categories: [String: [String]], tally: Tally, expected: Int, more addedContinuation: AsyncStream<(hex: String, role: Role)>.Continuation
    ) async throws {
        let url = controlURL.appendingPathComponent("v1/devices/\(stream.hex)/events")
        let events = EventStream(url: url) {
            // Ready once the first streams are open; a started activity's once its own is.
            let opened = tally.opened.withLock { count in
                count += 1
                return count
            }
            if case .activity(let id) = stream.role {
                say("[Live Activity \(id)] listening")
            } else if opened == expected {
                say("listening for notifications")
            }
        }
        for try await line in events.events() {
            guard let event = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any], let object = event["payload"],
                JSONSerialization.isValidJSONObject(object), let payload = try? JSONSerialization.data(withJSONObject: object)
            else { continue }
            let pushType = event["pushType"] as? String ?? "alert"
            let (text, started, ended) = await self.render(
                payload, pushType: pushType, role: stream.role, channel: event["channelId"] as? String, tally: tally, handler: handler,
                categories: categories)
            say(text)
            await self.report(payload, pushType: pushType, client: client, categories: categories)
            if let started {
                // The system starts the activity and hands over its update token.
                let update = try await self.token(controlURL, kind: "liveactivity") { data in .liveActivity(data, activityID: started) }
                try await Self.register(client, update.push, details)
                say("[Live Activity \(started)] update token \(update.hex.prefix(8))… registered")
                addedContinuation.yield((update.hex, .activity(started)))
            }
            if tally.showOne(reaching: self.count) {
                addedContinuation.finish()
                return
            }
            if ended { return }
        }
    }

    /// Shows `local` each time its trigger fires, until it fires no more (or --count is reached).
    func schedule(
        _ local: LocalNotification, handler: NotificationServiceHandler, categories: [String: [String]], tally: Tally,
        more addedContinuation: AsyncStream<(hex: String, role: Role)>.Continuation
    ) async {
        let scheduled = Date()
        var last: Date?
        while let next = local.nextFire(scheduled: scheduled, last: last, calendar: .current) {
            let wait = next.timeIntervalSinceNow
            if wait > 0 {
                do { try await Task.sleep(nanoseconds: UInt64(wait * 1_000_000_000)) } catch { return }
            }
            last = next
            guard let received = try? ReceivedNotification(jsonData: local.payload) else { return }
            say(
                await self.renderAlert(
                    received, payload: local.payload, handler: handler, categories: categories, origin: "local \(local.identifier)"))
            if tally.showOne(reaching: self.count) {
                addedContinuation.finish()
                return
            }
        }
    }

    /// Streams opened and notifications shown, across the streams' tasks.
    final class Tally: Sendable {
        let opened = Mutex(0)
        let shown = Mutex(0)
        /// The activity started on each broadcast channel (`input-push-channel`): its updates
        /// arrive as broadcasts, not on a token of its own.
        let channels = Mutex<[String: String]>([:])

        /// Counts one notification shown; true when that makes `count` (--count), if there is one.
        func showOne(reaching count: Int?) -> Bool {
            let shown = self.shown.withLock {
                $0 += 1
                return $0
            }
            return count.map { shown >= $0 } ?? false
        }
    }

    /// What a stream's pushes are to the device.
    enum Role: Sendable, Equatable {
        case app
        case voip
        case pushToStart
        case activity(String)
    }

    /// A fresh token of `kind` from the emulator.
    func token(_ control: URL, kind: String, _ push: (Data) -> PushToken) async throws -> (hex: String, push: PushToken) {
        let created = try await Self.json(
            "POST", control.appendingPathComponent("v1/devices"),
            body: [
                "bundleId": self.bundleId, "environment": self.environment == "production" ? "production" : "development", "kind": kind,
            ])
        guard let hex = created["token"] as? String, let data = PushToken.data(hex: hex) else {
            throw ValidationError("the emulator did not create a \(kind) device: \(created)")
        }
        return (hex, push(data))
    }

    static func register(_ client: HeraldClient, _ token: PushToken, _ details: DeviceDetails) async throws {
        do {
            try await client.register(token, details)
        } catch {
            throw ValidationError("Herald refused the registration: \(error)")
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

    /// One notification as the person holding the phone would see it (or why they would not);
    /// and, for Live Activities, the id of one it started that has a token of its own, or
    /// whether it ended one. `channel`: the broadcast channel it came on, if it did.
    func render(
        _ payload: Data, pushType: String, role: Role, channel: String?, tally: Tally, handler: NotificationServiceHandler,
        categories: [String: [String]]
    ) async -> (text: String, started: String?, ended: Bool) {
        guard let received = try? ReceivedNotification(jsonData: payload) else { return ("[unreadable payload]", nil, false) }
        if pushType == "voip" {
            // PushKit wakes the app, which must report the call to CallKit at once.
            let fields = received.custom.keys.sorted().map { key in
                "\(key)=\(received.custom[key]?.string ?? received.custom[key].map { "\($0)" } ?? "")"
            }
            return ("[VoIP] incoming call, reported to CallKit: \(fields.joined(separator: " "))", nil, false)
        }
        if pushType == "liveactivity" {
            let state = received.contentState.flatMap { try? String(decoding: JSONEncoder().encode($0), as: UTF8.self) } ?? "{}"
            let alert = received.alert.map { " — alert: \([$0.title, $0.body].compactMap { $0 }.joined(separator: " "))" } ?? ""
            switch role {
            case .pushToStart:
                // A broadcast on the channel of an activity started here (the push-to-start
                // token's device subscribed to it): that activity's update or end.
                if let channel, let id = tally.channels.withLock({ $0[channel] }) {
                    let event = received.event == "end" ? "ended" : received.event ?? "update"
                    return ("[Live Activity \(id)] \(event) (channel \(channel)): \(state)\(alert)", nil, false)
                }
                guard received.event == "start", received.attributesType == self.liveActivities else {
                    return ("[Live Activity] ignored: not a start of \(self.liveActivities ?? "?")", nil, false)
                }
                // The id the app registers the activity's update token with: Herald's, when the
                // start carries one in its attributes (`heraldActivityId`), as an app reads it.
                var id = "activity-" + UUID().uuidString.prefix(8).lowercased()
                if case .object(let attributes)? = received.attributes, let herald = attributes["heraldActivityId"]?.string { id = herald }
                if let channel = received.payload.object?["aps"]?.object?["input-push-channel"]?.string {
                    // Updated by broadcast: the activity has no update token.
                    tally.channels.withLock { $0[channel] = id }
                    return ("[Live Activity \(id)] started: \(state)\(alert) — updates on channel \(channel)", nil, false)
                }
                return ("[Live Activity \(id)] started: \(state)\(alert)", id, false)
            case .activity(let id):
                let ended = received.event == "end"
                return ("[Live Activity \(id)] \(ended ? "ended" : received.event ?? "update"): \(state)\(alert)", nil, ended)
            case .app, .voip:
                return ("[Live Activity] on a token that is not a Live Activity's: ignored", nil, false)
            }
        }
        return (await self.renderAlert(received, payload: payload, handler: handler, categories: categories), nil, false)
    }

    /// `origin`: a local notification's mark (nil for a remote one).
    func renderAlert(
        _ received: ReceivedNotification, payload: Data, handler: NotificationServiceHandler, categories: [String: [String]], origin: String? = nil
    ) async -> String {
        if received.alert == nil, received.badge == nil, received.sound == nil {
            // The app's own keys: the receipt id is Herald's.
            let custom = received.custom.keys.filter { $0 != ReceiptBatch.payloadKey }.sorted().joined(separator: ", ")
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
        let place =
            self.authorization == .provisional
            ? "delivered quietly to Notification Center" : self.foreground ? "banner over the running app" : "banner"
        var header = "┌ \(self.bundleId) — \(place)"
        if let origin { header += " • \(origin)" }
        if let level = received.interruptionLevel { header += " • \(level)" }
        lines.append(header + note)
        for text in [content.title, content.subtitle, content.body] where !text.isEmpty { lines.append("│ \(text)") }
        var footer: [String] = []
        // Provisional (quiet) delivery: no sound, no banner, no badge.
        if let badge = content.badge, self.authorization == .authorized { footer.append("badge \(badge)") }
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

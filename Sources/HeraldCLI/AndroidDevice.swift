// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import FCMEmulator
import Foundation
import HeraldKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `herald device`'s platform choice and the Android phone's own options.
struct AndroidOptions: ParsableArguments, Sendable {
    enum Platform: String, ExpressibleByArgument, CaseIterable, Sendable {
        case ios, android
    }

    @Option(help: "The phone: ios (APNs, through the APNs emulator) or android (FCM, through the FCM emulator).") var platform: Platform = .ios
    @Option(help: "Android: the FCM emulator (herald serve's built-in one prints its address).") var fcm = "http://127.0.0.1:2199"
    @Flag(help: "Android: register a Firebase Installation ID instead of a registration token.") var fid = false
    @Option(help: "Android: the app's package name.") var packageName = "com.example.app"
    @Option(help: "Android: the Firebase project (default: the app id, lowercased, '_' as '-', the project Herald sends to in the emulator).")
    var project: String?
    @Option(
        help:
            "Android: the app's default notification channel (its manifest's default_notification_channel_id); without one, FCM's fallback channel, Miscellaneous."
    )
    var defaultChannel: String?

    func validate() throws {
        guard self.platform == .ios else { return }
        let androidOnly: [(String, Bool)] = [
            ("--fid", self.fid), ("--project", self.project != nil), ("--default-channel", self.defaultChannel != nil),
        ]
        if let option = androidOnly.first(where: \.1)?.0 { throw ValidationError("\(option) is for --platform android") }
    }
}

/// `herald device --platform android`: an Android phone with the app on it. It gets a token (or
/// a FID) from the FCM emulator, registers it with Herald as the app does from `onNewToken`, and
/// prints each message as Android handles it, one line per event:
///
///     Registered fcm:<token> for user ann (background, POST_NOTIFICATIONS granted)
///     [notification] channel=Miscellaneous importance=default priority=high title="Hello" body="from Herald"
///     [onMessageReceived] notification channel=… priority=high title="…" body="…" — in the foreground: …
///     [not shown] notification channel=… priority=high title="…" body="…" — POST_NOTIFICATIONS not granted …
///     [data] priority=normal data={"sync":"inbox"} — onMessageReceived; normal priority: …
///     [opened] notification tapped — the launcher activity starts with data={…} as intent extras
///     [receipt] received, opened — reported
struct AndroidDevice: Sendable {
    let command: DeviceCommand

    var options: AndroidOptions { self.command.android }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// What the phone decides for a message: its line, whether a notification was shown, its
    /// receipt id (the data's `hr`), and the rest of its data (compact JSON).
    struct Handled: Equatable {
        var line: String
        var shown: Bool
        var receipt: String?
        var data: String
    }

    /// The phone's state that decides how messages are handled.
    struct Phone: Sendable {
        var foreground = false
        /// Android 13's POST_NOTIFICATIONS.
        var notificationsAllowed = true
        var defaultChannel: String?

        /// A message record as the FCM emulator streams it (a `data:` line); nil if it is not one.
        func handle(_ line: Data) -> Handled? {
            guard let message = try? FCMMessageRecord(json: String(decoding: line, as: UTF8.self)) else { return nil }
            let data = Self.json(message.data.filter { $0.key != ReceiptBatch.payloadKey })
            let (text, shown) = self.handle(message, data: data)
            return Handled(line: text, shown: shown, receipt: message.data[ReceiptBatch.payloadKey], data: data)
        }

        func handle(_ message: FCMMessageRecord, data: String) -> (line: String, shown: Bool) {
            let priority = "priority=\(message.priority)"
            guard message.kind == "notification" else {
                let note =
                    message.priority == "high"
                    ? "high priority: may start a foreground service" : "normal priority: may be deferred while the device dozes"
                return ("[data] \(priority) data=\(data) — onMessageReceived; \(note)", false)
            }
            let channel = "channel=\(message.channelID ?? self.defaultChannel ?? "Miscellaneous")"
            var content = "title=\(Self.quoted(message.title ?? "")) body=\(Self.quoted(message.body ?? ""))"
            if let image = message.image { content += " image=\(image)" }
            if let collapseKey = message.collapseKey { content += " collapse=\(collapseKey)" }
            if data != "{}" { content += " data=\(data)" }
            if self.foreground {
                return (
                    "[onMessageReceived] notification \(channel) \(priority) \(content) — in the foreground: nothing shown unless the app posts it",
                    false
                )
            }
            guard self.notificationsAllowed else {
                return ("[not shown] notification \(channel) \(priority) \(content) — POST_NOTIFICATIONS not granted (Android 13+)", false)
            }
            let doze = message.priority == "high" ? "" : " — normal priority: may wait for a Doze maintenance window"
            return ("[notification] \(channel) importance=\(Self.importance(message)) \(priority) \(content)\(doze)", true)
        }

        /// The notification's `notification_priority` as Android's importance; else the channel's
        /// (FCM's fallback channel, and a channel the app made without saying, are default).
        static func importance(_ message: FCMMessageRecord) -> String {
            let raw = (try? JSONSerialization.jsonObject(with: Data(message.raw.utf8))) as? [String: Any]
            let android = (raw?["android"] as? [String: Any])?["notification"] as? [String: Any]
            let given = (android?["notification_priority"] ?? android?["notificationPriority"]) as? String
            switch given?.uppercased() {
            case "PRIORITY_MIN": return "min"
            case "PRIORITY_LOW": return "low"
            case "PRIORITY_HIGH", "PRIORITY_MAX": return "high"
            default: return "default"
            }
        }

        /// Compact JSON, keys sorted: the same text for the same data.
        static func json(_ data: [String: String]) -> String {
            guard let bytes = try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// `text` in double quotes, on one line.
        static func quoted(_ text: String) -> String {
            var out = "\""
            for character in text {
                switch character {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                default: out.append(character)
                }
            }
            return out + "\""
        }
    }

    func run() async throws {
        try self.validate()
        guard let server = URL(string: self.command.server), server.scheme != nil, let fcm = URL(string: self.options.fcm), fcm.scheme != nil else {
            throw ValidationError("--server and --fcm are URLs")
        }
        let phone = Phone(
            foreground: self.command.foreground, notificationsAllowed: self.command.authorization == .authorized,
            defaultChannel: self.options.defaultChannel)
        // 1. A token (or FID) from FCM, as Firebase's SDK gets one at the app's first start.
        let identifier = try await self.createDevice(fcm)
        let client = HeraldClient(serverURL: server, appID: self.command.app, registerKey: self.command.key, persistence: .memoryOnly)
        // 2. The phone's connection to FCM opens before the app registers, so nothing sent once
        // Herald knows the token is missed.
        let (opened, openedContinuation) = AsyncStream<Bool>.makeStream()
        let stream = EventStream(url: fcm.appendingPathComponent("emulator/devices/\(identifier)/stream")) { openedContinuation.yield(true) }
        let lines = stream.events()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { openedContinuation.yield(false) }
                try await self.receive(lines, phone: phone, client: client)
            }
            var open = opened.makeAsyncIterator()
            guard await open.next() == true else {
                try await group.waitForAll()
                throw Failure(description: "the FCM emulator at \(self.options.fcm) did not open the device's stream")
            }
            // 3. What the app does in onNewToken: register with Herald.
            let name = try await self.register(identifier, server: server)
            let state = [
                self.command.foreground ? "foreground" : "background",
                phone.notificationsAllowed ? "POST_NOTIFICATIONS granted" : "POST_NOTIFICATIONS not granted",
            ]
            say("Registered \(name) \(self.command.user.map { "for user \($0)" } ?? "without a user") (\(state.joined(separator: ", ")))")
            try await group.waitForAll()
        }
    }

    /// What only an iPhone has is refused rather than ignored.
    func validate() throws {
        let command = self.command
        let iosOnly: [(String, Bool)] = [
            ("--encrypt", command.encrypt), ("--voip", command.voip), ("--live-activities", command.liveActivities != nil),
            ("--local", !command.local.isEmpty), ("--categories", command.categories != nil), ("--tap", command.tap != nil),
        ]
        if let option = iosOnly.first(where: \.1)?.0 { throw ValidationError("\(option) is for --platform ios") }
        if command.authorization == .provisional {
            throw ValidationError("--authorization provisional is iOS's; on Android POST_NOTIFICATIONS is granted (authorized) or not (denied)")
        }
        if let count = command.count, count < 1 { throw ValidationError("--count is at least 1") }
    }

    /// A new device of the app's Firebase project in the emulator: its registration token or FID.
    func createDevice(_ fcm: URL) async throws -> String {
        let project = self.options.project ?? String(self.command.app.lowercased().map { $0 == "_" ? "-" : $0 })
        let created: [String: Any]
        do {
            created = try await DeviceCommand.json(
                "POST", fcm.appendingPathComponent("emulator/devices"),
                body: ["projectId": project, "packageName": self.options.packageName, "kind": self.options.fid ? "fid" : "token"])
        } catch {
            throw Failure(description: "cannot reach the FCM emulator at \(self.options.fcm): \(error)")
        }
        guard let token = created["token"] as? String, !token.isEmpty else {
            throw Failure(description: "the FCM emulator did not create a device: \(created)")
        }
        return token
    }

    /// `POST /v1/apps/{app}/registrations` with the register key; Herald's name for the device.
    func register(_ identifier: String, server: URL) async throws -> String {
        var assertion: String?
        if let user = self.command.user, let source = try self.command.assertionSource() {
            assertion = try await source(user, identifier)
        }
        let body = RegistrationRequest(
            transport: "fcm", token: self.options.fid ? nil : identifier, fid: self.options.fid ? identifier : nil, userId: self.command.user,
            tags: self.command.tags.map { $0.split(separator: ",").map(String.init) }, locale: Locale.current.identifier,
            timeZone: TimeZone.current.identifier, platform: "android", userAssertion: assertion)
        var request = URLRequest(url: server.appendingPathComponent("v1/apps/\(self.command.app)/registrations"))
        request.httpMethod = "POST"
        request.httpBody = try JSONEncoder().encode(body)
        request.setValue("application/json", forHTTPHeaderField: "content-type")
        request.setValue("Bearer \(self.command.key)", forHTTPHeaderField: "authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        guard (response as? HTTPURLResponse)?.statusCode == 200, let name = answer["token"] as? String else {
            let error = answer["error"] as? [String: Any]
            let reason = error.map { "\($0["code"] as? String ?? "?"): \($0["message"] as? String ?? "")" } ?? String(decoding: data, as: UTF8.self)
            throw Failure(description: "Herald refused the registration: \(reason)")
        }
        return name
    }

    /// Each message from the stream, handled and reported, until --count.
    func receive(_ lines: AsyncThrowingStream<Data, any Error>, phone: Phone, client: HeraldClient) async throws {
        var handled = 0
        for try await line in lines {
            guard let result = phone.handle(line) else { continue }
            say(result.line)
            let opened = result.shown && self.command.open
            if opened { say("[opened] notification tapped — the launcher activity starts with data=\(result.data) as intent extras") }
            if let receipt = result.receipt { await self.report(receipt, opened: opened, client: client) }
            handled += 1
            if let count = self.command.count, handled >= count { return }
        }
        if Task.isCancelled { return }
        throw Failure(description: "the FCM emulator ended the device's stream")
    }

    /// Receipts with the data's `hr`, through Herald's receipts API with the register key (as
    /// HeraldKit batches them): received (on unless --no-receipts), opened (--open, when shown).
    func report(_ receipt: String, opened: Bool, client: HeraldClient) async {
        var events: [String] = []
        if self.command.receipts, client.reportReceived([ReceiptBatch.payloadKey: receipt]) { events.append("received") }
        if opened, client.reportOpened([ReceiptBatch.payloadKey: receipt]) { events.append("opened") }
        guard !events.isEmpty else { return }
        do {
            let flush = try await client.flushReceipts(patience: 30)
            say("[receipt] \(events.joined(separator: ", ")) — \(flush.queued == 0 ? "reported" : "\(flush.queued) still queued")")
        } catch {
            say("[receipt] \(events.joined(separator: ", ")) — not reported: \(error)")
        }
    }
}

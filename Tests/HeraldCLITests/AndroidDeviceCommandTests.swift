// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

@testable import HeraldCLI

/// `herald device --platform android` as a person's Android phone: a real `herald serve` with
/// its built-in FCM emulator, the phone registering as the app does from `onNewToken`, and the
/// backend sending through the API.
@Suite(.heavy) struct AndroidDeviceCommandTests {
    /// The port `herald serve` printed for its built-in FCM emulator.
    static func fcmPort(_ server: BackgroundProcess) async throws -> Int {
        // The whole line is there once its end is.
        try #require(try await server.waitFor("(token, send and control API)", timeout: 300), "\(server.printed)")
        let line = try #require(server.printed.split(separator: "\n").first { $0.contains("Built-in FCM emulator:") })
        let address = try #require(line.range(of: "127.0.0.1:"))
        return try #require(Int(line[address.upperBound...].prefix { $0.isNumber }))
    }

    /// Herald's name for the device, from the phone's `Registered …` line.
    static func registered(_ phone: BackgroundProcess) throws -> String {
        let line = try #require(phone.printed.split(separator: "\n").first { $0.hasPrefix("Registered ") }, "\(phone.printed)")
        return String(try #require(line.split(separator: " ").dropFirst().first))
    }

    /// The notification's deliveries, as the API shows them.
    func deliveries(_ api: String, _ id: String, key: String) async throws -> [[String: Any]] {
        try await DeviceCommandTests().curl("GET", api + "/v1/apps/demo/notifications/\(id)", key: key, "")["deliveries"] as? [[String: Any]] ?? []
    }

    @Test("an Android phone registers its FCM token, shows a notification message, takes a data message, and reports both receipts")
    func androidPhone() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-device-android")
        defer { directory.remove() }
        let herald = BackgroundProcess.heraldExecutable
        let (server, api, _, admin) = try await DeviceCommandTests.serve(directory)
        let fcm = "http://127.0.0.1:\(try await Self.fcmPort(server))"
        let ios = DeviceCommandTests()
        let key = try await ios.demoApp(api, admin: admin)
        let send = try #require(try await ios.curl("POST", api + "/v1/keys", key: admin, #"{"scope":"send","appId":"demo"}"#)["key"] as? String)
        let (backend, assertions) = try await ios.backend(api, admin: admin, directory)
        defer { backend.signal(SIGKILL) }

        let common = [
            "device", "--platform", "android", "--server", api, "--fcm", fcm, "--app", "demo", "--key", key, "--user-assertion-url", assertions,
            "--count", "2",
        ]
        // Ann's phone: a registration token, in the background, notifications allowed, opens
        // what it shows. Bob's: a Firebase Installation ID, POST_NOTIFICATIONS not granted.
        let ann = try BackgroundProcess(herald, common + ["--user", "ann", "--tags", "beta,pixel", "--open"])
        let bob = try BackgroundProcess(herald, common + ["--user", "bob", "--fid", "--authorization", "denied"])
        for phone in [ann, bob] {
            try #require(try await phone.waitFor("Registered ", timeout: 300), "\(phone.printed)")
        }
        let annName = try Self.registered(ann)
        let bobName = try Self.registered(bob)
        #expect(annName.hasPrefix("fcm:") && bobName.hasPrefix("fid:"), "\(annName) \(bobName)")
        #expect(ann.printed.contains("for user ann (background, POST_NOTIFICATIONS granted)"), "\(ann.printed)")
        #expect(bob.printed.contains("for user bob (background, POST_NOTIFICATIONS not granted)"), "\(bob.printed)")
        // Registered as the app does: its user (bound by the backend's assertion), tags, platform.
        let device = try await ios.curl("GET", api + "/v1/apps/demo/devices/\(annName)", key: send, "")
        #expect(device["userId"] as? String == "ann" && device["tags"] as? [String] == ["beta", "pixel"], "\(device)")
        #expect(device["transport"] as? String == "fcm" && device["platform"] as? String == "android", "\(device)")

        // A notification message on a channel of the app's.
        let notification = try await ios.curl(
            "POST", api + "/v1/apps/demo/notifications", key: send,
            #"{"audience":{"users":["ann","bob"]},"title":"Order shipped","body":"It left the warehouse","data":{"order":"42"},"fcm":{"android":{"notification":{"channel_id":"orders"}}}}"#
        )
        #expect(notification["deliveries"] as? Int == 2, "\(notification)")
        let notificationID = try #require(notification["id"] as? String)
        #expect(try await ann.waitFor("[notification] ", timeout: 300), "\(ann.printed)")
        #expect(try await bob.waitFor("[not shown] notification ", timeout: 300), "\(bob.printed)")

        // A data message, high priority.
        let data = try await ios.curl(
            "POST", api + "/v1/apps/demo/notifications", key: send,
            #"{"audience":{"users":["ann","bob"]},"pushType":"background","contentAvailable":true,"data":{"sync":"inbox"},"fcm":{"android":{"priority":"high"}}}"#
        )
        #expect(data["deliveries"] as? Int == 2, "\(data)")
        let dataID = try #require(data["id"] as? String)

        // Both phones exit by themselves after --count 2, each receipt reported by then.
        #expect(try await ann.exit(timeout: 300) == 0, "\(ann.printed)")
        #expect(try await bob.exit(timeout: 300) == 0, "\(bob.printed)")
        let shown = ann.printed
        #expect(
            shown.contains(
                #"[notification] channel=orders importance=default priority=high title="Order shipped" body="It left the warehouse" data={"order":"42"}"#
            ), "\(shown)")
        #expect(shown.contains(#"[opened] notification tapped — the launcher activity starts with data={"order":"42"} as intent extras"#), "\(shown)")
        #expect(shown.contains("[receipt] received, opened — reported"), "\(shown)")
        #expect(
            shown.contains(#"[data] priority=high data={"sync":"inbox"} — onMessageReceived; high priority: may start a foreground service"#),
            "\(shown)")
        #expect(shown.contains("[receipt] received — reported"), "\(shown)")
        #expect(!shown.contains("\"hr\""), "Herald's receipt id is not the app's data: \(shown)")
        let denied = bob.printed
        #expect(
            denied.contains(
                #"[not shown] notification channel=orders priority=high title="Order shipped" body="It left the warehouse" data={"order":"42"} — POST_NOTIFICATIONS not granted"#
            ), "\(denied)")
        #expect(!denied.contains("[notification]") && !denied.contains("[opened]"), "nothing shown, nothing opened: \(denied)")
        #expect(denied.contains(#"[data] priority=high data={"sync":"inbox"}"#), "data messages still arrive: \(denied)")

        // Herald recorded the receipts: received for every delivery, opened for the one shown and opened.
        let notified = try await self.deliveries(api, notificationID, key: send)
        let annNotified = try #require(notified.first { $0["token"] as? String == annName }, "\(notified)")
        #expect(annNotified["receivedAt"] is Int && annNotified["openedAt"] is Int, "\(annNotified)")
        let bobNotified = try #require(notified.first { $0["token"] as? String == bobName }, "\(notified)")
        #expect(bobNotified["receivedAt"] is Int && bobNotified["openedAt"] == nil, "\(bobNotified)")
        let synced = try await self.deliveries(api, dataID, key: send)
        #expect(synced.count == 2 && synced.allSatisfy { $0["receivedAt"] is Int && $0["openedAt"] == nil }, "\(synced)")
        _ = try await server.stop()
    }

    @Test("what only an iPhone has is refused on Android, and Android's options on an iPhone")
    func refusals() async throws {
        let herald = BackgroundProcess.heraldExecutable
        let base = ["device", "--app", "demo", "--key", "hk_x"]
        for (arguments, said) in [
            (["--platform", "android", "--voip"], "--voip is for --platform ios"),
            (["--platform", "android", "--authorization", "provisional"], "--authorization provisional is iOS's"),
            (["--fid"], "--fid is for --platform android"),
        ] {
            let result = try await ProcessRunner.run(herald, base + arguments)
            #expect(result.exitCode != 0 && (result.standardError + result.standardOutput).contains(said), "\(arguments): \(result)")
        }
    }
}

/// The phone's rules on single messages, as the FCM emulator streams them (no server).
@Suite struct AndroidPhoneRulesTests {
    func record(kind: String, priority: String, channel: String? = nil, data: [String: String] = [:], message: String = "{}") -> Data {
        let object: [String: Any] = [
            "messageId": "m1", "receivedAt": 1, "kind": kind, "title": kind == "notification" ? "Hi \"there\"" : NSNull(),
            "body": kind == "notification" ? "two\nlines" : NSNull(), "image": NSNull(), "data": data, "priority": priority,
            "ttlSeconds": NSNull(), "collapseKey": NSNull(), "channelId": channel ?? NSNull(), "directBootOk": false,
            "message": (try? JSONSerialization.jsonObject(with: Data(message.utf8))) ?? [:],
        ]
        return (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
    }

    @Test(
        "notification messages: the fallback channel or the app's default, importance from notification_priority, shown only in the background with permission"
    )
    func notifications() throws {
        let line = try #require(AndroidDevice.Phone().handle(self.record(kind: "notification", priority: "normal", data: ["hr": "r1"])))
        #expect(
            line.line
                == #"[notification] channel=Miscellaneous importance=default priority=normal title="Hi \"there\"" body="two\nlines" — normal priority: may wait for a Doze maintenance window"#
        )
        #expect(line.shown && line.receipt == "r1" && line.data == "{}")
        let urgent = self.record(
            kind: "notification", priority: "high", message: #"{"android":{"notification":{"notification_priority":"PRIORITY_MAX"}}}"#)
        let app = try #require(AndroidDevice.Phone(defaultChannel: "news").handle(urgent))
        #expect(app.line.hasPrefix("[notification] channel=news importance=high priority=high "), "\(app.line)")
        let foreground = try #require(AndroidDevice.Phone(foreground: true).handle(urgent))
        #expect(foreground.line.hasPrefix("[onMessageReceived] notification channel=Miscellaneous priority=high ") && !foreground.shown)
        let denied = try #require(AndroidDevice.Phone(notificationsAllowed: false).handle(urgent))
        #expect(denied.line.hasPrefix("[not shown] notification ") && denied.line.hasSuffix("POST_NOTIFICATIONS not granted (Android 13+)"))
        #expect(!denied.shown)
    }

    @Test("data messages go to onMessageReceived whatever the permission; high may start a foreground service, normal may wait in Doze")
    func data() throws {
        let phone = AndroidDevice.Phone(foreground: false, notificationsAllowed: false)
        let normal = try #require(phone.handle(self.record(kind: "data", priority: "normal", data: ["b": "2", "a": "1/x", "hr": "r2"])))
        #expect(
            normal.line
                == #"[data] priority=normal data={"a":"1/x","b":"2"} — onMessageReceived; normal priority: may be deferred while the device dozes"#)
        #expect(!normal.shown && normal.receipt == "r2")
        let high = try #require(phone.handle(self.record(kind: "data", priority: "high")))
        #expect(high.line == "[data] priority=high data={} — onMessageReceived; high priority: may start a foreground service")
        #expect(phone.handle(Data("not a record".utf8)) == nil)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// `herald device` as a person's phone: a real `herald serve` with its built-in emulator, the
/// virtual device registering through HeraldKit, and the backend sending through the API.
@Suite(.heavy) struct DeviceCommandTests {
    /// `herald serve` with its built-in emulator on free ports: the process, the API's base URL,
    /// the emulator's control port and the admin key it printed.
    static func serve(_ directory: TemporaryDirectory) async throws -> (BackgroundProcess, String, Int, String) {
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path + "/data", "--emulator-port", "0",
                "--emulator-production-port", "0", "--emulator-control-port", "0", "--fcm-emulator-port", "0", "--webpush-emulator-port", "0",
            ])
        try #require(try await server.waitFor("control API listening", timeout: 300), "\(server.printed)")
        try #require(try await server.waitFor("Herald listening on", timeout: 300), "\(server.printed)")
        let crash = HeavyProcessTests.ServeCrashTests()
        let port = try crash.port(of: server, "Herald listening on")
        let control = try crash.port(of: server, "control API listening")
        let admin = try #require(crash.line(after: "Admin API key", in: server.printed)?.trimmingCharacters(in: .whitespaces))
        return (server, "http://127.0.0.1:\(port)", control, admin)
    }

    /// Creates app `demo` and returns a register key for it, as the app would ship.
    func demoApp(_ api: String, admin: String) async throws -> String {
        _ = try await self.curl("POST", api + "/v1/apps", key: admin, #"{"id":"demo","bundleId":"com.example.app"}"#)
        return try #require(try await self.curl("POST", api + "/v1/keys", key: admin, #"{"scope":"register","appId":"demo"}"#)["key"] as? String)
    }

    /// The app's backend, as a real app reaches it after sign-in: it holds the app's user secret
    /// (made once by the team) and signs an assertion for the signed-in user's device at `GET /assert?user=&token=`.
    /// Written in Python from the JWT specification, so Herald's own signing is not what is tested.
    func backend(_ api: String, admin: String, _ directory: TemporaryDirectory) async throws -> (BackgroundProcess, String) {
        let secret = try #require(try await self.curl("POST", api + "/v1/apps/demo/user-secret", key: admin, "")["secret"] as? String)
        let script = try directory.write(
            "backend.py",
            #"""
            import base64, hashlib, hmac, http.server, json, sys, time, urllib.parse
            secret, app = sys.argv[1].encode(), sys.argv[2]
            def b64(data): return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                    user, token = query["user"][0], query["token"][0]
                    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
                    # Bound to the device: tkh is the token's SHA-256, as the app registers it.
                    tkh = b64(hashlib.sha256(token.encode()).digest())
                    claims = b64(json.dumps({"app": app, "sub": user, "exp": int(time.time()) + 300, "tkh": tkh}).encode())
                    signature = b64(hmac.new(secret, f"{head}.{claims}".encode(), hashlib.sha256).digest())
                    body = f"{head}.{claims}.{signature}".encode()
                    self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
                def log_message(self, *args): pass
            server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
            print("backend listening", server.server_address[1], flush=True)
            server.serve_forever()
            """#)
        let backend = try BackgroundProcess("/usr/bin/env", ["python3", script, secret, "demo"])
        try #require(try await backend.waitFor("backend listening", timeout: 300), "\(backend.printed)")
        // The port is known once its whole line is there.
        var port: Int?
        let deadline = ContinuousClock.now + .seconds(300)  // a hang guard: the loop ends at the line
        while port == nil, ContinuousClock.now < deadline {
            port = backend.printed.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                .first { $0.hasPrefix("backend listening ") }.flatMap { Int($0.dropFirst("backend listening ".count)) }
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        return (backend, "http://127.0.0.1:\(try #require(port))/assert")
    }

    func curl(_ method: String, _ url: String, key: String, _ body: String) async throws -> [String: Any] {
        let result = try await ProcessRunner.run("curl", ["-s", "-X", method, url, "-H", "authorization: Bearer \(key)", "-d", body])
        return (try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))) as? [String: Any] ?? [:]
    }

    @Test("the device shows alerts with actions, decrypts end-to-end messages, wakes for background and VoIP pushes, and shows nothing when denied")
    func phone() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-device")
        defer { directory.remove() }
        let herald = BackgroundProcess.heraldExecutable
        let (server, api, control, admin) = try await Self.serve(directory)
        let key = try await self.demoApp(api, admin: admin)
        let (backend, assertions) = try await self.backend(api, admin: admin, directory)
        defer { backend.signal(SIGKILL) }

        let common = [
            "device", "--server", api, "--control", "http://127.0.0.1:\(control)", "--app", "demo", "--key", key, "--user-assertion-url", assertions,
        ]
        let phone = try BackgroundProcess(
            herald,
            common + [
                "--user", "ann", "--encrypt", "--voip", "--categories", "MESSAGE=REPLY+ARCHIVE", "--tap", "REPLY", "--count", "4",
            ])
        let denied = try BackgroundProcess(herald, common + ["--user", "bob", "--authorization", "denied", "--count", "1"])
        for device in [phone, denied] {
            try #require(try await device.waitFor("listening for notifications", timeout: 300), "\(device.printed)")
        }
        for body in [
            #"{"audience":{"users":["ann"]},"title":"Hello","body":"from Herald","badge":3,"category":"MESSAGE"}"#,
            #"{"audience":{"users":["ann"]},"encrypt":true,"title":"Secret","body":"the code is 4711","placeholder":{"title":"New message"}}"#,
            #"{"audience":{"users":["ann"]},"pushType":"background","contentAvailable":true,"data":{"sync":"inbox"}}"#,
            #"{"audience":{"users":["ann"]},"kinds":["voip"],"pushType":"voip","data":{"caller":"Bob"}}"#,
            #"{"audience":{"users":["bob"]},"title":"For bob"}"#,
        ] {
            let sent = try await self.curl("POST", api + "/v1/apps/demo/notifications", key: admin, body)
            #expect(sent["deliveries"] as? Int == 1, "\(sent)")
            // One at a time, so the phone shows them in this order.
            try await Task.sleep(for: .milliseconds(300))
        }
        #expect(try await phone.waitFor("[VoIP]", timeout: 300), "\(phone.printed)")
        let shown = phone.printed
        #expect(shown.contains("│ Hello") && shown.contains("│ from Herald") && shown.contains("badge 3"), "\(shown)")
        #expect(shown.contains("actions: [REPLY] [ARCHIVE]") && shown.contains("tapped REPLY"))
        #expect(shown.contains("│ Secret") && shown.contains("│ the code is 4711") && shown.contains("service extension: rewritten"))
        #expect(!shown.contains("New message"), "decrypted, not the placeholder")
        #expect(shown.contains("[background] the app was woken with sync"))
        #expect(shown.contains("[VoIP] incoming call, reported to CallKit: caller=Bob"))
        #expect(try await denied.waitFor("[not shown: notifications are turned off", timeout: 300), "\(denied.printed)")
        #expect(!denied.printed.contains("For bob"))
        #expect(try await phone.stop(timeout: 120) == 0, "exited by itself after --count")
        _ = try await server.stop()
    }

    @Test("without the backend's assertion, the virtual device cannot sign in as a user")
    func noAssertion() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-device-noassert")
        defer { directory.remove() }
        let (server, api, control, admin) = try await Self.serve(directory)
        let key = try await self.demoApp(api, admin: admin)
        let phone = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "device", "--server", api, "--control", "http://127.0.0.1:\(control)", "--app", "demo", "--key", key, "--user", "ann",
            ])
        #expect(try await phone.waitFor("user_assertion_required", timeout: 300), "\(phone.printed)")
        #expect(try await phone.stop(timeout: 120) != 0)
        let listed = try await ProcessRunner.run("curl", ["-s", api + "/v1/apps/demo/devices?userId=ann", "-H", "authorization: Bearer \(admin)"])
        #expect(listed.standardOutput.contains(#""devices":[]"#), "\(listed.standardOutput)")
        _ = try await server.stop()
    }

    @Test("a Live Activity is started by a push-to-start push, updated and ended by pushes to its own token")
    func liveActivity() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-device-la")
        defer { directory.remove() }
        let herald = BackgroundProcess.heraldExecutable
        let (server, api, control, admin) = try await Self.serve(directory)
        let key = try await self.demoApp(api, admin: admin)
        let (backend, assertions) = try await self.backend(api, admin: admin, directory)
        defer { backend.signal(SIGKILL) }
        let phone = try BackgroundProcess(
            herald,
            [
                "device", "--server", api, "--control", "http://127.0.0.1:\(control)", "--app", "demo", "--key", key, "--user", "ann",
                "--user-assertion-url", assertions, "--live-activities", "MatchAttributes",
            ])
        try #require(try await phone.waitFor("listening for notifications", timeout: 300), "\(phone.printed)")
        let now = Int(Date().timeIntervalSince1970)
        let start = try await self.curl(
            "POST", api + "/v1/apps/demo/notifications", key: admin,
            #"""
            {"audience":{"users":["ann"]},"kinds":["push-to-start"],"pushType":"liveactivity","aps":{"event":"start","timestamp":\#(now),
            "content-state":{"home":0,"away":0},"attributes-type":"MatchAttributes","attributes":{"match":"Ajax-PSV"},"alert":{"title":"Kick-off"}}}
            """#)
        #expect(start["deliveries"] as? Int == 1, "\(start)")
        try #require(try await phone.waitFor("] listening", timeout: 300), "\(phone.printed)")
        let line = try #require(phone.printed.split(separator: "\n").first { $0.contains("] listening") && $0.contains("Live Activity") })
        let id = try #require(line.split(separator: " ").dropFirst(2).first.map { String($0.dropLast()) })
        #expect(phone.printed.contains("[Live Activity \(id)] started: ") && phone.printed.contains("Kick-off"), "\(phone.printed)")
        for (event, home) in [("update", 1), ("end", 2)] {
            let sent = try await self.curl(
                "POST", api + "/v1/apps/demo/notifications", key: admin,
                #"""
                {"audience":{"activityId":"\#(id)"},"pushType":"liveactivity","aps":{"event":"\#(event)","timestamp":\#(now + home),"content-state":{"home":\#(home),"away":0}}}
                """#)
            #expect(sent["deliveries"] as? Int == 1, "\(sent)")
            let shown = event == "end" ? "ended" : "update"
            #expect(try await phone.waitFor("[Live Activity \(id)] \(shown)", timeout: 300), "\(phone.printed)")
        }
        #expect(phone.printed.contains("\"home\":2"))
        _ = try await phone.stop()
        _ = try await server.stop()
    }

    @Test(
        "activities of the live-activities resource: one joined to a channel is updated by broadcast, one with its own token under Herald's id"
    )
    func liveActivityResource() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-device-lar")
        defer { directory.remove() }
        let (server, api, control, admin) = try await Self.serve(directory)
        let key = try await self.demoApp(api, admin: admin)
        let (backend, assertions) = try await self.backend(api, admin: admin, directory)
        defer { backend.signal(SIGKILL) }
        let phone = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "device", "--server", api, "--control", "http://127.0.0.1:\(control)", "--app", "demo", "--key", key, "--user", "ann",
                "--user-assertion-url", assertions, "--live-activities", "MatchAttributes",
            ])
        try #require(try await phone.waitFor("listening for notifications", timeout: 300), "\(phone.printed)")
        let channel = try #require(
            try await self.curl("POST", api + "/v1/apps/demo/channels", key: admin, #"{"environment":"sandbox"}"#)["id"] as? String)
        let start = #"{"audience":{"users":["ann"]},"attributesType":"MatchAttributes","attributes":{},"contentState":{"home":0},"alert":"Kick-off","#

        // On a channel: started with no token of its own; its update comes as a broadcast.
        let onChannel = try #require(
            try await self.curl("POST", api + "/v1/apps/demo/live-activities", key: admin, start + #""inputPushChannel":"\#(channel)"}"#)["id"]
                as? String)
        #expect(try await phone.waitFor("updates on channel \(channel)", timeout: 300), "\(phone.printed)")
        #expect(phone.printed.contains("[Live Activity \(onChannel)] started: {\"home\":0}"), "\(phone.printed)")
        _ = try await self.curl("PATCH", api + "/v1/apps/demo/live-activities/\(onChannel)", key: admin, #"{"contentState":{"home":1}}"#)
        #expect(try await phone.waitFor("[Live Activity \(onChannel)] update (channel \(channel)): {\"home\":1}", timeout: 300), "\(phone.printed)")

        // With its own token: the device registers the update token under Herald's id, which the
        // update then reaches.
        let ownToken = try #require(
            try await self.curl("POST", api + "/v1/apps/demo/live-activities", key: admin, start + #""inputPushToken":true}"#)["id"] as? String)
        #expect(try await phone.waitFor("[Live Activity \(ownToken)] listening", timeout: 300), "\(phone.printed)")
        let updated = try await self.curl(
            "PATCH", api + "/v1/apps/demo/live-activities/\(ownToken)", key: admin, #"{"contentState":{"home":7}}"#)
        #expect(updated["tokens"] as? Int == 1, "\(updated)")
        #expect(try await phone.waitFor("[Live Activity \(ownToken)] update: {\"home\":7}", timeout: 300), "\(phone.printed)")
        _ = try await self.curl("DELETE", api + "/v1/apps/demo/live-activities/\(ownToken)", key: admin, "")
        #expect(try await phone.waitFor("[Live Activity \(ownToken)] ended", timeout: 300), "\(phone.printed)")
        _ = try await phone.stop()
        _ = try await server.stop()
    }
}

extension DeviceCommandTests {
    @Test(
        "provisional: delivered quietly (no sound, no banner, no badge); a local notification shows beside the remote one; --count ends it without an error"
    )
    func provisionalAndLocal() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-device-quiet")
        defer { directory.remove() }
        let (server, api, control, admin) = try await Self.serve(directory)
        let key = try await self.demoApp(api, admin: admin)
        let phone = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "device", "--server", api, "--control", "http://127.0.0.1:\(control)", "--app", "demo", "--key", key,
                "--authorization", "provisional", "--local", "after=1;id=stretch;title=Stand up;body=Time to stretch;badge=1;sound=default",
                "--voip", "--count", "2",  // two streams: the one left open is closed at --count, quietly
            ])
        try #require(try await phone.waitFor("listening for notifications", timeout: 300), "\(phone.printed)")
        let sent = try await self.curl(
            "POST", api + "/v1/apps/demo/notifications", key: admin, #"{"audience":"all","title":"Hello","badge":3,"sound":"default"}"#)
        #expect(sent["deliveries"] as? Int == 1, "\(sent)")
        #expect(try await phone.exit(timeout: 300) == 0, "exited by itself after --count: \(phone.printed)")
        let shown = phone.printed
        #expect(shown.contains("│ Hello") && shown.contains("│ Stand up") && shown.contains("• local stretch"), "\(shown)")
        #expect(shown.components(separatedBy: "delivered quietly to Notification Center").count == 3, "both quiet: \(shown)")
        #expect(!shown.contains("badge") && !shown.contains("sound") && !shown.contains("banner"), "\(shown)")
        #expect(!shown.contains("ended:") && !shown.contains("Error"), "a normal exit prints no error: \(shown)")
        _ = try await server.stop()
    }
}

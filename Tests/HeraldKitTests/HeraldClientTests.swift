// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import HeraldKit
import HeraldServer
import HeraldTesting
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// HeraldKit's client against a real `herald serve` (real socket, real SQLite file), and its
/// retries against a server that fails on purpose.
@Suite(.heavy) struct HeraldClientTests {
    /// An admin call straight through URLSession.
    static func admin(_ base: URL, _ key: String, _ method: String, _ path: String, _ body: String? = nil) async throws -> [String: Any] {
        var request = URLRequest(url: try #require(URL(string: base.absoluteString + path)))
        request.httpMethod = method
        request.setValue("Bearer \(key)", forHTTPHeaderField: "authorization")
        request.httpBody = body.map { Data($0.utf8) }
        let (data, _) = try await URLSession.shared.data(for: request)
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// The app's backend, as HeraldKit meets it: it makes the app's user secret, and hands out
    /// an assertion for a signed-in user (here Herald signs it, asked with a backend key).
    static func backend(_ base: URL, _ key: String) async throws -> @Sendable (String, String) async throws -> String {
        _ = try await Self.admin(base, key, "POST", "/v1/apps/demo/user-secret", nil)
        return { user, token in
            let made = try await Self.admin(base, key, "POST", "/v1/apps/demo/user-assertions", #"{"userId":"\#(user)","token":"\#(token)"}"#)
            return try #require(made["assertion"] as? String)
        }
    }

    /// A `herald serve` on free ports in `directory` with its built-in emulator and a fresh master key.
    static func configuration(_ directory: TemporaryDirectory) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory.path
        configuration.emulatorPorts = (0, 0, 0)
        configuration.fcmEmulatorPort = 0
        configuration.webPushEmulatorPort = 0
        configuration.masterKey = SecretBox.generateMasterKey()
        configuration.engine.pollInterval = .milliseconds(20)
        // An APNs timeout (and the lease bounding it) a loaded machine cannot hit.
        configuration.engine.lease = .seconds(600)
        configuration.engine.apnsTimeout = .seconds(300)
        return configuration
    }

    /// A `herald serve` (``configuration(_:)``) on a fresh database.
    static func withServer(_ body: @escaping @Sendable (RunningServer, TemporaryDirectory) async throws -> Void) async throws {
        let directory = try TemporaryDirectory(prefix: "heraldkit")
        defer { directory.remove() }
        try await withHeraldServer(configuration: Self.configuration(directory)) { server in try await body(server, directory) }
    }

    /// The server's base URL and admin key, with app `demo` made and a register key of it.
    static func demoApp(_ server: RunningServer) async throws -> (base: URL, admin: String, registerKey: String) {
        let base = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
        let admin = try #require(server.initialAdminKey)
        _ = try await Self.admin(base, admin, "POST", "/v1/apps", #"{"id":"demo","bundleId":"com.example.app"}"#)
        let registerKey = try #require(
            try await Self.admin(base, admin, "POST", "/v1/keys", #"{"scope":"register","appId":"demo"}"#)["key"] as? String)
        return (base, admin, registerKey)
    }

    @Test("registers every token kind, moves tokens on login and logout, unregisters; Herald's refusals come back with their code")
    func roundTrip() async throws {
        try await Self.withServer { server, _ in
            let (base, admin, registerKey) = try await Self.demoApp(server)
            let client = HeraldClient(
                serverURL: base, appID: "demo", registerKey: registerKey, persistence: .memoryOnly,
                userAssertions: try await Self.backend(base, admin))

            let phone = PushToken.device(Data((0..<32).map { UInt8($0) }))
            let voip = PushToken.voip(Data(repeating: 0xAB, count: 32))
            let activity = PushToken.liveActivity(Data(repeating: 0xCD, count: 40), activityID: "match-7")
            let starter = PushToken.pushToStart(Data(repeating: 0xEF, count: 40), attributesType: "MatchAttributes")
            let details = DeviceDetails(environment: .sandbox, tags: ["news"], locale: "nl_NL", timeZone: "Europe/Amsterdam", appVersion: "2.1")
            for token in [phone, voip, activity, starter] {
                let device = try await client.register(token, details)
                #expect(device.token == token.hex && device.kind == token.kind && device.active)
            }
            #expect(phone.hex.hasPrefix("000102") && PushToken.data(hex: phone.hex) == phone.data)

            try await client.setUser("ann")
            let anns = try await Self.admin(base, admin, "GET", "/v1/apps/demo/devices?userId=ann")
            #expect((anns["devices"] as? [[String: Any]])?.count == 4, "login moved every token to ann")
            let stored = (anns["devices"] as? [[String: Any]])?.first { $0["token"] as? String == activity.hex }
            #expect(stored?["activityId"] as? String == "match-7" && stored?["timeZone"] as? String == "Europe/Amsterdam")
            try await client.setUser(nil)
            #expect((try await Self.admin(base, admin, "GET", "/v1/apps/demo/devices?userId=ann")["devices"] as? [Any])?.isEmpty == true)

            try await client.unregister(voip)
            try await client.unregister(voip)  // already gone: not an error
            #expect((try await Self.admin(base, admin, "GET", "/v1/apps/demo/devices")["devices"] as? [Any])?.count == 3)

            await #expect(
                throws: HeraldKitError(
                    code: "bad_kind", status: 400,
                    message:
                        "kind must be one of device, voip, liveactivity, push-to-start, complication, fileprovider, location, pushtotalk, widgets, controls"
                )
            ) {
                try await client.register(.other(Data([1, 2, 3, 4]), kind: "pager"), details)
            }
            let other = HeraldClient(serverURL: base, appID: "elsewhere", registerKey: registerKey, persistence: .memoryOnly)
            do {
                try await other.register(phone, details)
                Issue.record("a register key works for its own app only")
            } catch let error as HeraldKitError {
                #expect(error.code == "forbidden" && error.status == 403)
            }
        }
    }

    /// A server that answers 503 to the first `failures` requests, then 200 with a device.
    static let flakyServer = #"""
        import http.server, json, sys
        failures = int(sys.argv[1]); seen = []
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                seen.append(self.path)
                if len(seen) <= failures:
                    body = json.dumps({"error": {"code": "unavailable", "message": "try later"}}).encode(); self.send_response(503)
                else:
                    body = json.dumps({"token": self.path.rsplit("/", 1)[1], "kind": "device", "environment": "production", "tags": [], "active": True,
                                       "createdAt": 1, "lastRegisteredAt": len(seen)}).encode()
                    self.send_response(200)
                self.send_header("content-type", "application/json"); self.send_header("content-length", str(len(body))); self.end_headers()
                self.wfile.write(body)
            def log_message(self, *args): pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        print("listening", server.server_address[1], flush=True)
        server.serve_forever()
        """#

    @Test("a failing server is retried with back-off; giving up says so")
    func retries() async throws {
        let directory = try TemporaryDirectory(prefix: "heraldkit-retry")
        defer { directory.remove() }
        let script = try directory.write("flaky.py", Self.flakyServer)
        for (failures, attempts, succeeds) in [(2, 4, true), (5, 3, false)] {
            let server = try BackgroundProcess("/usr/bin/env", ["python3", script, "\(failures)"])
            // The port is known once its whole line is there ("listening" can be read before it).
            var port: Int?
            let deadline = ContinuousClock.now + .seconds(300)  // a hang guard: the loop ends at the line
            while port == nil, ContinuousClock.now < deadline {
                port = server.printed.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                    .first { $0.hasPrefix("listening ") }.flatMap { Int($0.dropFirst("listening ".count)) }
                if port == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            let serverPort = try #require(port, "\(server.printed)")
            let client = HeraldClient(
                serverURL: try #require(URL(string: "http://127.0.0.1:\(serverPort)")), appID: "demo", registerKey: "hk_x",
                retry: RetryPolicy(maximumAttempts: attempts, initialDelay: .milliseconds(20), maximumDelay: .milliseconds(100)),
                persistence: .memoryOnly
            )
            do {
                let device = try await client.register(.device(Data([0xAA, 0xBB])), DeviceDetails(environment: .production))
                #expect(succeeds, "should have given up")
                #expect(device.lastRegisteredAt == 3, "answered on the third request")
            } catch let error as HeraldKitError {
                #expect(!succeeds, "\(error)")
                #expect(error.code == "server_unavailable" && error.status == 503)
                #expect(error.message.contains("after 3 attempts"))
            }
            _ = try await server.stop(signal: SIGKILL)
        }
        // Nobody listening: a network error after the retries.
        let nobody = HeraldClient(
            serverURL: try #require(URL(string: "http://127.0.0.1:9")), appID: "demo", registerKey: "hk_x",
            retry: RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(10)), persistence: .memoryOnly
        )
        await #expect(throws: HeraldKitError.self) { try await nobody.register(.device(Data([1])), DeviceDetails(environment: .sandbox)) }
    }

    @Test("an assertion provider that fails once leaves the registration pending (not forgotten); the next try binds the user")
    func providerFailsOnce() async throws {
        try await Self.withServer { server, _ in
            let (base, admin, registerKey) = try await Self.demoApp(server)
            let backend = try await Self.backend(base, admin)
            // The app's backend is down for the first ask only.
            let asked = Mutex(0)
            let flaky: @Sendable (String, String) async throws -> String = { user, token in
                let attempt = asked.withLock { count -> Int in
                    count += 1
                    return count
                }
                guard attempt > 1 else { throw URLError(.cannotConnectToHost) }
                return try await backend(user, token)
            }
            let client = HeraldClient(
                serverURL: base, appID: "demo", registerKey: registerKey,
                retry: RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50)), persistence: .memoryOnly,
                userAssertions: flaky)
            let phone = PushToken.device(Data(repeating: 0x5A, count: 32))
            _ = try await client.register(phone, DeviceDetails(environment: .sandbox))
            do {
                try await client.setUser("ann")
                Issue.record("the backend gave no assertion")
            } catch let error as HeraldKitError {
                #expect(error.code == "user_assertion_unavailable")
            }
            #expect(client.registrations.first { $0.token == phone }?.status == .pendingRegistration, "kept, pending: \(client.registrations)")
            // Tried again (a hang guard bounds the loop; it ends when nothing is pending).
            let deadline = ContinuousClock.now + .seconds(300)
            var pending = try await client.retryPending()
            while pending > 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                pending = try await client.retryPending()
            }
            #expect(pending == 0)
            let anns = try await Self.admin(base, admin, "GET", "/v1/apps/demo/devices?userId=ann")
            #expect(((anns["devices"] as? [[String: Any]]) ?? []).compactMap { $0["token"] as? String } == [phone.hex])
        }
    }
}

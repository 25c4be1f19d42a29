// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import CoreMetrics
import Foundation
import HeraldCore
import HeraldSQLite
import HeraldServer
import HeraldTesting
import Prometheus
import Testing

/// `herald serve` through its real HTTP API on a real socket, a real SQLite file, and the
/// built-in emulator's virtual devices.
@Suite(.heavy) struct ServerTests {
    struct HTTP: Sendable {
        let base: String

        func call(_ method: String, _ path: String, key: String? = nil, json: String? = nil) async throws -> (status: Int, body: [String: Any]) {
            var arguments = ["-s", "-S", "--max-time", "20", "-X", method, "-o", "-", "-w", "\n%{http_code}"]
            if let key { arguments += ["-H", "authorization: Bearer \(key)"] }
            if let json { arguments += ["--data-binary", json, "-H", "content-type: application/json"] }
            arguments.append(self.base + path)
            let result = try await ProcessRunner.run("curl", arguments)
            let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
            let status = Int(lines.last ?? "") ?? 0
            let text = lines.dropLast().joined(separator: "\n")
            let body = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
            return (status, body)
        }
    }

    struct Context: Sendable {
        let api: HTTP
        let control: HTTP
        let admin: String
        let server: RunningServer

        /// The metrics listener, apart from the API (``ServerConfiguration/metricsPort``).
        var metrics: String { "http://127.0.0.1:\(self.server.metricsPort ?? 0)/metrics" }
    }

    /// A server on free ports in `directory`, with a fresh master key and a built-in emulator.
    static func configuration(_ directory: TemporaryDirectory) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory.path
        configuration.emulatorPorts = (0, 0, 0)
        configuration.fcmEmulatorPort = 0
        configuration.webPushEmulatorPort = 0
        // Served only where a test sets a registry (`metrics`), on a free port of its own.
        configuration.metricsPort = 0
        configuration.masterKey = SecretBox.generateMasterKey()
        configuration.engine.pollInterval = .milliseconds(20)
        // An APNs answer on a loaded machine can take seconds: a timeout (and the lease that
        // bounds it) no test can hit, so a slow answer is never a timeout and a second send.
        configuration.engine.lease = .seconds(600)
        configuration.engine.apnsTimeout = .seconds(300)
        configuration.refuseUndeclaredStatuses = true
        return configuration
    }

    /// A running server on `driver`'s store (a new SQLite file, or a new PostgreSQL database).
    func withServer<Result: Sendable>(
        driver: StoreDriver = .sqlite,
        clock: any EpochClock = SystemEpochClock(),
        configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: @escaping @Sendable (Context) async throws -> Result
    ) async throws -> Result {
        guard driver == .sqlite else {
            return try await PostgresTestDatabase.with { database in
                try await self.withServer(
                    clock: clock,
                    configure: { configuration in
                        configuration.database = database.url
                        configure(&configuration)
                    }, body)
            }
        }
        let directory = try TemporaryDirectory(prefix: "herald-serve")
        defer { directory.remove() }
        var configuration = Self.configuration(directory)
        configure(&configuration)
        return try await withHeraldServer(configuration: configuration, clock: clock) { server in
            let admin = try #require(server.initialAdminKey)
            let context = Context(
                api: HTTP(base: "http://127.0.0.1:\(server.port)"),
                control: HTTP(base: "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"),
                admin: admin, server: server
            )
            return try await body(context)
        }
    }

    /// An engine that polls once a day, with `workers` workers (and batches of `batchSize`): only
    /// the doorbell, or a claim that goes on by itself, can make a delivery or a shutdown end
    /// within the hour-long time limit of the tests that use it.
    static func pollingOnceADay(workers: Int, batchSize: Int? = nil) -> (inout ServerConfiguration) -> Void {
        { configuration in
            configuration.engine.pollInterval = .seconds(86_400)
            configuration.engine.workers = workers
            if let batchSize { configuration.engine.batchSize = batchSize }
        }
    }

    /// Creates app `demo` and returns a register key and a send key for it.
    func setUp(_ context: Context) async throws -> (register: String, send: String) {
        #expect(
            try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"demo","bundleId":"com.example.app"}"#).status == 201)
        let register = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"register","appId":"demo"}"#)
        let send = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"demo"}"#)
        #expect(try await context.api.call("POST", "/v1/apps/demo/user-secret", key: context.admin).status == 201)
        return (try #require(register.body["key"] as? String), try #require(send.body["key"] as? String))
    }

    /// What the app's backend hands the app after `user` signs in: an assertion that binds the device `token` to them.
    func assertion(_ context: Context, send: String, user: String, token: String) async throws -> String {
        let made = try await context.api.call(
            "POST", "/v1/apps/demo/user-assertions", key: send, json: #"{"userId":"\#(user)","token":"\#(token)"}"#)
        return try #require(made.body["assertion"] as? String, "\(made)")
    }

    func virtualDevice(_ context: Context, kind: String = "device") async throws -> String {
        let created = try await context.control.call(
            "POST", "/v1/devices", json: #"{"bundleId":"com.example.app","environment":"development","kind":"\#(kind)"}"#
        )
        return try #require(created.body["token"] as? String)
    }

    /// How long a wait for an event may take before the test calls it a hang: far beyond what
    /// any event takes, however loaded the machine. Waits end at the event, not at this.
    static let hangGuard: Duration = .seconds(300)

    /// Reads with `read` until what it read shows the event (`done`), and returns that. The wait
    /// ends at the event; the hang guard only bounds one that never comes (an issue is recorded
    /// and the last value read is returned, for the test's own expectations to fail on).
    func eventually<Value>(_ event: String, _ read: () async throws -> Value, until done: (Value) -> Bool) async throws -> Value {
        let deadline = ContinuousClock.now + Self.hangGuard
        var value = try await read()
        while !done(value) {
            guard ContinuousClock.now < deadline else {
                Issue.record("\(event): not after \(Self.hangGuard)")
                return value
            }
            try await Task.sleep(for: .milliseconds(50))
            value = try await read()
        }
        return value
    }

    /// The notification once nothing of it is pending.
    func settled(_ context: Context, key: String, id: String, app: String = "demo") async throws -> [String: Any] {
        try await self.eventually(
            "notification \(id) settled", { try await context.api.call("GET", "/v1/apps/\(app)/notifications/\(id)", key: key).body },
            until: { ($0["counts"] as? [String: Int])?["pending"] == 0 })
    }

    @Test("register, send to a user, and the virtual device receives it; the delivery is recorded", arguments: StoreDriver.enabled)
    func endToEnd(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let token = try await self.virtualDevice(context)
            let registered = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
                json:
                    #"{"environment":"sandbox","userId":"ann","tags":["news"],"locale":"en_GB","userAssertion":"\#(try await self.assertion(context, send: keys.send, user: "ann", token: token))"}"#
            )
            #expect(registered.status == 200)
            #expect(registered.body["userId"] as? String == "ann")
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"users":["ann"]},"title":"Hello","body":"from Herald","badge":1}"#
            )
            #expect(sent.status == 202)
            #expect(sent.body["deliveries"] as? Int == 1)
            let id = try #require(sent.body["id"] as? String)
            let status = try await self.settled(context, key: keys.send, id: id)
            #expect((status["counts"] as? [String: Int])?["sent"] == 1)
            let delivery = (status["deliveries"] as? [[String: Any]])?.first
            #expect(delivery?["apnsId"] as? String != nil)
            #expect(delivery?["pushType"] as? String == "alert")
            let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
            let notifications = inbox.body["notifications"] as? [[String: Any]] ?? []
            #expect(notifications.count == 1)
            let aps = (notifications.first?["payload"] as? [String: Any])?["aps"] as? [String: Any]
            #expect((aps?["alert"] as? [String: Any])?["title"] as? String == "Hello")
        }
    }

    @Test(
        "a send wakes an idle engine at once, and shutdown stops its idle workers at once, however long their poll",
        .timeLimit(.minutes(60)), arguments: StoreDriver.enabled
    )
    func doorbell(driver: StoreDriver) async throws {
        // Only the doorbell can make this delivery, or this shutdown, end within the time limit
        // (an hour: a hang guard far beyond the whole suite on a slow machine).
        try await self.withServer(driver: driver, configure: Self.pollingOnceADay(workers: 8)) { context in
            let keys = try await self.setUp(context)
            let token = try await self.virtualDevice(context)
            #expect(
                try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#).status
                    == 200)
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["\#(token)"]},"title":"Now"}"#
            )
            let id = try #require(sent.body["id"] as? String)
            let status = try await self.settled(context, key: keys.send, id: id)
            #expect((status["counts"] as? [String: Int])?["sent"] == 1)
        }
    }

    @Test("a port already in use is an error at start, not a wait for ever", .timeLimit(.minutes(60)))
    func portInUse() async throws {
        try await self.withServer { context in
            let directory = try TemporaryDirectory(prefix: "herald-serve")
            defer { directory.remove() }
            var second = Self.configuration(directory)
            second.port = context.server.port
            second.builtInEmulator = false
            let error = await #expect(throws: HeraldError.self) {
                try await withHeraldServer(configuration: second) { _ in Issue.record("a second server listened on a port in use") }
            }
            #expect(error?.code == "listen_failed")
            #expect(error?.message.contains("127.0.0.1:\(context.server.port)") == true)
        }
    }

    @Test("every token kind gets its push type and topic", arguments: StoreDriver.enabled)
    func kinds(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let kinds: [(emulator: String, herald: String, extra: String, pushType: String)] = [
                ("device", "device", "", "alert"), ("voip", "voip", "", "voip"), ("complication", "complication", "", "complication"),
                ("fileprovider", "fileprovider", "", "fileprovider"), ("location", "location", "", "location"),
                ("pushtotalk", "pushtotalk", "", "pushtotalk"), ("widgets", "widgets", "", "widgets"), ("controls", "controls", "", "controls"),
                ("liveactivity", "liveactivity", #","activityId":"game-1""#, "liveactivity"),
            ]
            var tokens: [String: String] = [:]
            for kind in kinds {
                let token = try await self.virtualDevice(context, kind: kind.emulator)
                tokens[kind.herald] = token
                let assertion = try await self.assertion(context, send: keys.send, user: "u", token: token)
                let registered = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
                    json: #"{"environment":"sandbox","kind":"\#(kind.herald)"\#(kind.extra),"userId":"u","userAssertion":"\#(assertion)"}"#
                )
                #expect(registered.status == 200, "\(kind.herald): \(registered.body)")
            }
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json:
                    #"{"audience":"all","kinds":[\#(kinds.map { "\"\($0.herald)\"" }.joined(separator: ","))],"aps":{"content-available":1,"content-changed":true,"timestamp":1,"event":"update","content-state":{}}}"#
            )
            #expect(sent.body["deliveries"] as? Int == kinds.count)
            let status = try await self.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            let deliveries = status["deliveries"] as? [[String: Any]] ?? []
            for kind in kinds {
                let delivery = deliveries.first { $0["token"] as? String == tokens[kind.herald] }
                #expect(delivery?["pushType"] as? String == kind.pushType, "\(kind.herald)")
                #expect(delivery?["state"] as? String == "sent", "\(kind.herald): \(String(describing: delivery))")
            }
        }
    }

    @Test("410 after uninstall invalidates the device, with an audit record; re-registering reactivates it", arguments: StoreDriver.enabled)
    func invalidation(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let token = try await self.virtualDevice(context)
            _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            _ = try await context.control.call("POST", "/v1/devices/\(token)/uninstall")
            let sent = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"x"}"#)
            let status = try await self.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            let delivery = (status["deliveries"] as? [[String: Any]])?.first
            #expect(delivery?["status"] as? Int == 410)
            #expect(delivery?["reason"] as? String == "Unregistered")
            let device = try await context.api.call("GET", "/v1/apps/demo/devices/\(token)", key: keys.send)
            #expect(device.body["active"] as? Bool == false)
            #expect((device.body["invalidations"] as? [[String: Any]])?.first?["applied"] as? Bool == true)
            let again = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            #expect(again.body["active"] as? Bool == true)
        }
    }

    @Test("each key scope against each endpoint", arguments: StoreDriver.enabled)
    func scopes(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let token = String(repeating: "ab", count: 32)
            let device = #"{"environment":"sandbox"}"#
            let note = #"{"audience":"all","body":"x"}"#
            let cases: [(String, String, String?, [String?: Int])] = [
                // method, path, body, expected status per key (nil = no key)
                ("POST", "/v1/apps", #"{"id":"other","bundleId":"com.example.other"}"#, [nil: 401, keys.register: 403, keys.send: 403]),
                ("GET", "/v1/apps", nil, [nil: 401, keys.register: 403, keys.send: 403, context.admin: 200]),
                (
                    "PUT", "/v1/apps/demo/devices/\(token)", device,
                    [nil: 401, "hk_0000000000000000_" + String(repeating: "0", count: 64): 401, keys.register: 200, keys.send: 200]
                ),
                ("GET", "/v1/apps/demo/devices", nil, [nil: 401, keys.register: 403, keys.send: 200, context.admin: 200]),
                ("POST", "/v1/apps/demo/notifications", note, [nil: 401, keys.register: 403, keys.send: 202]),
                ("POST", "/v1/keys", #"{"scope":"admin"}"#, [keys.register: 403, keys.send: 403]),
                ("GET", "/v1/apps/demo/devices/\(token)/deliveries", nil, [nil: 401, keys.register: 403, keys.send: 200]),
                ("GET", "/v1/apps/demo/notifications", nil, [nil: 401, keys.register: 403, keys.send: 200]),
                ("GET", "/v1/keys", nil, [nil: 401, keys.register: 403, keys.send: 403, context.admin: 200]),
                ("DELETE", "/v1/keys/0000000000000000", nil, [nil: 401, keys.register: 403, keys.send: 403, context.admin: 404]),
                ("DELETE", "/v1/apps/demo/devices/\(token)", nil, [nil: 401, keys.register: 204]),
            ]
            for (method, path, body, expectations) in cases {
                for (key, status) in expectations {
                    let response = try await context.api.call(method, path, key: key, json: body)
                    #expect(response.status == status, "\(method) \(path) with \(key == nil ? "no key" : String(key!.prefix(20))): \(response.body)")
                    if status >= 400 { #expect((response.body["error"] as? [String: Any])?["code"] is String) }
                }
            }
            // A key for one app cannot touch another.
            #expect(
                try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"other","bundleId":"com.example.other"}"#).status
                    == 201)
            #expect(try await context.api.call("PUT", "/v1/apps/other/devices/\(token)", key: keys.register, json: device).status == 403)
        }
    }

    @Test("bad input gets the documented error and writes nothing", arguments: StoreDriver.enabled)
    func badInput(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let cases: [(String, String, String, Int, String)] = [
                ("PUT", "/v1/apps/demo/devices/xyz", #"{}"#, 400, "bad_device_token"),
                ("PUT", "/v1/apps/demo/devices/abcd", #"{"kind":"pager"}"#, 400, "bad_kind"),
                ("PUT", "/v1/apps/demo/devices/abcd", #"{"kind":"liveactivity"}"#, 400, "missing_activityId"),
                ("PUT", "/v1/apps/demo/devices/abcd", #"{"tags":"news"}"#, 400, "bad_tags"),
                ("PUT", "/v1/apps/demo/devices/abcd", #"not json"#, 400, "invalid_json"),
                ("PUT", "/v1/apps/nope/devices/abcd", #"{}"#, 403, "forbidden"),
                ("POST", "/v1/apps/demo/notifications", #"{"body":"x"}"#, 400, "missing_audience"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":{"users":[]},"body":"x"}"#, 400, "bad_audience"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","pushType":"background","priority":10}"#, 422, "bad_priority"),
                (
                    "POST", "/v1/apps/demo/notifications", #"{"audience":"all","collapseId":"\#(String(repeating: "c", count: 65))"}"#, 400,
                    "bad_collapse_id"
                ),
                (
                    "POST", "/v1/apps/demo/notifications", #"{"audience":"all","data":{"x":"\#(String(repeating: "y", count: 5000))"}}"#, 422,
                    "payload_too_large"
                ),
                ("PUT", "/v1/apps/demo/devices/abcd", #"{"publicKey":"AAAA","publicKeyType":"x25519"}"#, 400, "bad_public_key"),
                ("PUT", "/v1/apps/demo/devices/abcd", #"{"publicKey":"not base64","publicKeyType":"p256"}"#, 400, "bad_public_key"),
                ("PUT", "/v1/apps/demo/devices/abcd", #"{"publicKeyType":"x25519"}"#, 400, "bad_public_key"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","body":"x","encrypt":"yes"}"#, 400, "bad_encrypt"),
                (
                    "POST", "/v1/apps/demo/notifications", #"{"audience":"all","pushType":"background","contentAvailable":true,"encrypt":true}"#, 422,
                    "encrypt_not_allowed"
                ),
                (
                    "POST", "/v1/apps/demo/notifications", #"{"audience":"all","body":"x","encrypt":true,"placeholder":{"title":1}}"#, 400,
                    "bad_placeholder"
                ),
                (
                    "POST", "/v1/apps/demo/notifications",
                    #"{"audience":"all","encrypt":true,"data":{"x":"\#(String(repeating: "y", count: 3000))"}}"#, 422, "payload_too_large"
                ),
                // A field Herald does not know is refused, at any depth, and so is one given twice.
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","titel":"x","body":"y"}"#, 400, "unknown_field"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":{"tokenz":["abcd"]},"body":"y"}"#, 400, "unknown_field"),
                (
                    "POST", "/v1/apps/demo/notifications", #"{"audience":"all","body":"x","placeholder":{"subtitle":"s"},"encrypt":true}"#, 400,
                    "unknown_field"
                ),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","body":"x","body":"y"}"#, 400, "duplicate_field"),
                ("PUT", "/v1/apps/demo/devices/abcd", #"{"userID":"ann"}"#, 400, "unknown_field"),
                // Nothing to show and no background update.
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all"}"#, 400, "empty_notification"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","data":{"k":1},"aps":{"thread-id":"t"}}"#, 400, "empty_notification"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":{"tokens":["abcd"],"users":["ann"]},"body":"x"}"#, 400, "bad_audience"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"some","body":"x"}"#, 400, "bad_audience"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","body":"x","badge":"1"}"#, 400, "bad_badge"),
            ]
            for (method, path, body, status, code) in cases {
                let key = path.contains("notifications") ? keys.send : keys.register
                let response = try await context.api.call(method, path, key: key, json: body)
                #expect(response.status == status, "\(method) \(path) \(body.prefix(60))")
                #expect((response.body["error"] as? [String: Any])?["code"] as? String == code, "\(response.body)")
            }
            // The message names the field, with its path.
            let misspelt = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokenz":["abcd"]},"body":"y"}"#
            )
            #expect((misspelt.body["error"] as? [String: Any])?["message"] as? String == "unknown field 'audience.tokenz'")
            // A background update has nothing to show and is accepted.
            let background = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"tokens":["abcd"]},"pushType":"background","contentAvailable":true}"#
            )
            #expect(background.status == 202, "\(background.body)")
            let devices = try await context.api.call("GET", "/v1/apps/demo/devices", key: keys.send)
            #expect((devices.body["devices"] as? [Any])?.isEmpty == true, "nothing was written")
            #expect(try await context.server.store.deliveryCounts().isEmpty)
        }
    }

    /// Sends `body` to `token` now and returns once it is sent. With one engine worker, the
    /// claim that sent it came after every send made before it, at the clock's time: whatever of
    /// theirs was due then has been claimed and recorded, so what is still pending was not due.
    func sendNowAndSettle(_ context: Context, key: String, token: String, body: String) async throws {
        let sent = try await context.api.call(
            "POST", "/v1/apps/demo/notifications", key: key, json: #"{"audience":{"tokens":["\#(token)"]},"body":"\#(body)"}"#)
        let status = try await self.settled(context, key: key, id: try #require(sent.body["id"] as? String, "\(sent)"))
        #expect((status["counts"] as? [String: Int])?["sent"] == 1, "\(status)")
    }

    @Test("a scheduled notification waits for its time (moved clock), then goes out", arguments: StoreDriver.enabled)
    func scheduled(driver: StoreDriver) async throws {
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.withServer(driver: driver, clock: clock, configure: { $0.engine.workers = 1 }) { context in
            let keys = try await self.setUp(context)
            let token = try await self.virtualDevice(context)
            _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            let at = clock.nowMilliseconds + 3_600_000
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"later","scheduledAt":\#(at)}"#
            )
            let id = try #require(sent.body["id"] as? String)
            // A send due now, made after it, goes out in a claim that found the scheduled one
            // stored and the clock an hour before its time: once it is sent, that one is decided.
            try await self.sendNowAndSettle(context, key: keys.send, token: token, body: "now")
            let waiting = try await context.api.call("GET", "/v1/apps/demo/notifications/\(id)", key: keys.send)
            #expect((waiting.body["counts"] as? [String: Int])?["pending"] == 1, "not before its time: \(waiting.body)")
            #expect(try await self.inbox(context, token).count == 1, "only the send due now reached the device")
            clock.advance(seconds: 3600)
            let status = try await self.settled(context, key: keys.send, id: id)
            #expect((status["counts"] as? [String: Int])?["sent"] == 1)
            #expect(try await self.inbox(context, token).count == 2)
        }
    }

    @Test("a Live Activity update goes to every update token of that activity, and only those", arguments: StoreDriver.enabled)
    func liveActivity(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            var game1: [String] = []
            for activity in ["game-1", "game-1", "game-2"] {
                let token = try await self.virtualDevice(context, kind: "liveactivity")
                if activity == "game-1" { game1.append(token) }
                _ = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
                    json: #"{"environment":"sandbox","kind":"liveactivity","activityId":"\#(activity)"}"#
                )
            }
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"activityId":"game-1"},"aps":{"timestamp":1,"event":"update","content-state":{"score":2}}}"#
            )
            #expect(sent.body["deliveries"] as? Int == 2)
            let status = try await self.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            let deliveries = status["deliveries"] as? [[String: Any]] ?? []
            #expect(Set(deliveries.compactMap { $0["token"] as? String }) == Set(game1))
            #expect(deliveries.allSatisfy { $0["state"] as? String == "sent" && $0["pushType"] as? String == "liveactivity" })
        }
    }

    @Test("local-time delivery: each device gets it at that wall-clock time in its own time zone", arguments: StoreDriver.enabled)
    func localTime(driver: StoreDriver) async throws {
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.withServer(driver: driver, clock: clock, configure: { $0.engine.workers = 1 }) { context in
            let keys = try await self.setUp(context)
            var tokens: [String: String] = [:]
            for zone in ["Asia/Tokyo", "America/New_York"] {
                let token = try await self.virtualDevice(context)
                tokens[zone] = token
                _ = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox","timeZone":"\#(zone)"}"#
                )
            }
            // Two hours from now, as a wall-clock time in Tokyo; New York reaches it 14 hours later.
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "Asia/Tokyo")
            formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
            let wall = formatter.string(from: Date(timeIntervalSince1970: Double(clock.nowSeconds + 7200)))
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"good morning","localTime":"\#(wall)"}"#
            )
            let id = try #require(sent.body["id"] as? String)
            func states() async throws -> [String: String] {
                let status = try await context.api.call("GET", "/v1/apps/demo/notifications/\(id)", key: keys.send)
                var result: [String: String] = [:]
                for delivery in status.body["deliveries"] as? [[String: Any]] ?? [] {
                    if let zone = tokens.first(where: { $0.value == delivery["token"] as? String })?.key {
                        result[zone] = delivery["state"] as? String
                    }
                }
                return result
            }
            func wait(for zone: String) async throws {
                _ = try await self.eventually("\(zone)'s delivery sent", states, until: { $0[zone] == "sent" })
            }
            // A send due now, made after it, goes out in a claim that found it stored and the
            // clock two hours before Tokyo's time: once it is sent, neither device's is due.
            let tokyo = try #require(tokens["Asia/Tokyo"])
            try await self.sendNowAndSettle(context, key: keys.send, token: tokyo, body: "now")
            #expect(try await states() == ["Asia/Tokyo": "pending", "America/New_York": "pending"])
            clock.advance(seconds: 7200)
            try await wait(for: "Asia/Tokyo")
            // Again after Tokyo's went: New York's is 14 hours off.
            try await self.sendNowAndSettle(context, key: keys.send, token: tokyo, body: "now")
            #expect(try await states() == ["Asia/Tokyo": "sent", "America/New_York": "pending"])
            clock.advance(seconds: 14 * 3600)
            try await wait(for: "America/New_York")
            #expect(try await states() == ["Asia/Tokyo": "sent", "America/New_York": "sent"])
            #expect(try await self.inbox(context, tokyo).count == 3)
        }
    }
}

/// `/metrics` and the OpenAPI document.
@Suite(.heavy) struct ServerDocumentTests {
    /// swift-metrics can be bootstrapped once per process: one registry for this test binary.
    static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()

    @Test("the OpenAPI document is served and names every route; /metrics counts deliveries on its own listener, not the API's port")
    func documentAndMetrics() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-doc")
        defer { directory.remove() }
        var configuration = ServerTests.configuration(directory)
        configuration.metrics = Self.registry
        try await withHeraldServer(configuration: configuration) { server in
            let base = "http://127.0.0.1:\(server.port)"
            let document = try await ProcessRunner.run("curl", ["-s", base + "/v1/openapi.yaml"]).standardOutput
            #expect(document.hasPrefix("openapi: 3.1.0"))
            for path in [
                "/v1/apps:", "/v1/apps/{app}/credentials/{environment}:", "/v1/keys:", "/v1/apps/{app}/devices:",
                "/v1/apps/{app}/devices/{token}:", "/v1/apps/{app}/notifications:", "/v1/apps/{app}/notifications/{id}:",
                "/v1/keys/{id}:", "/v1/apps/{app}/devices/{token}/deliveries:",
            ] {
                #expect(document.contains("\n  \(path)\n"), "\(path) documented")
            }
            let tests = ServerTests()
            let context = ServerTests.Context(
                api: .init(base: base), control: .init(base: "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"),
                admin: try #require(server.initialAdminKey), server: server
            )
            let keys = try await tests.setUp(context)
            let token = try await tests.virtualDevice(context)
            _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            let sent = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"m"}"#)
            _ = try await tests.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            #expect(!document.contains("\n  /metrics:\n"), "the API does not serve metrics")
            let metrics = try await ProcessRunner.run("curl", ["-s", context.metrics]).standardOutput
            #expect(metrics.contains(#"herald_deliveries_total{app="demo",push_type="alert",result="sent"}"#), "\(metrics.prefix(2000))")
            #expect(metrics.contains("apns_client_connections_opened_total"))
            // The API's port answers anyone who can reach it (apps register through it): it
            // serves no metrics, with a key or without.
            let onAPI = try await ProcessRunner.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "/metrics"]).standardOutput
            #expect(onAPI == "404")
            let withKey = try await ProcessRunner.run(
                "curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "authorization: Bearer \(context.admin)", base + "/metrics"]
            ).standardOutput
            #expect(withKey == "404")
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldCore
import HeraldServer
import HeraldSQLite
import HeraldTesting
import Testing

/// `herald serve` through its real HTTP API on a real socket, a real SQLite file, and the
/// built-in emulator's virtual devices.
@Suite struct ServerTests {
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
    }

    func withServer<Result: Sendable>(_ body: @escaping @Sendable (Context) async throws -> Result) async throws -> Result {
        let directory = try TemporaryDirectory(prefix: "herald-serve")
        defer { directory.remove() }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory.path
        configuration.emulatorPorts = (0, 0, 0)
        configuration.masterKey = SecretBox.generateMasterKey()
        configuration.engine.pollInterval = .milliseconds(20)
        return try await withHeraldServer(configuration: configuration) { server in
            let admin = try #require(server.initialAdminKey)
            let context = Context(
                api: HTTP(base: "http://127.0.0.1:\(server.port)"),
                control: HTTP(base: "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"),
                admin: admin, server: server
            )
            return try await body(context)
        }
    }

    /// Creates app `demo` and returns a register key and a send key for it.
    func setUp(_ context: Context) async throws -> (register: String, send: String) {
        #expect(try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"demo","bundleId":"com.example.app"}"#).status == 201)
        let register = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"register","appId":"demo"}"#)
        let send = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"demo"}"#)
        return (try #require(register.body["key"] as? String), try #require(send.body["key"] as? String))
    }

    func virtualDevice(_ context: Context, kind: String = "device") async throws -> String {
        let created = try await context.control.call(
            "POST", "/v1/devices", json: #"{"bundleId":"com.example.app","environment":"development","kind":"\#(kind)"}"#
        )
        return try #require(created.body["token"] as? String)
    }

    /// Polls the notification until nothing is pending (bounded).
    func settled(_ context: Context, key: String, id: String) async throws -> [String: Any] {
        for _ in 0..<200 {
            let status = try await context.api.call("GET", "/v1/apps/demo/notifications/\(id)", key: key)
            if let counts = status.body["counts"] as? [String: Int], counts["pending"] == 0 { return status.body }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("notification \(id) still pending")
        return [:]
    }

    @Test("register, send to a user, and the virtual device receives it; the delivery is recorded")
    func endToEnd() async throws {
        try await self.withServer { context in
            let keys = try await self.setUp(context)
            let token = try await self.virtualDevice(context)
            let registered = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
                json: #"{"environment":"sandbox","userId":"ann","tags":["news"],"locale":"en_GB"}"#
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

    @Test("every token kind gets its push type and topic")
    func kinds() async throws {
        try await self.withServer { context in
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
                let registered = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
                    json: #"{"environment":"sandbox","kind":"\#(kind.herald)"\#(kind.extra),"userId":"u"}"#
                )
                #expect(registered.status == 200, "\(kind.herald): \(registered.body)")
            }
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":"all","aps":{"content-available":1,"timestamp":1,"event":"update","content-state":{}}}"#
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

    @Test("410 after uninstall invalidates the device, with an audit record; re-registering reactivates it")
    func invalidation() async throws {
        try await self.withServer { context in
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

    @Test("each key scope against each endpoint")
    func scopes() async throws {
        try await self.withServer { context in
            let keys = try await self.setUp(context)
            let token = String(repeating: "ab", count: 32)
            let device = #"{"environment":"sandbox"}"#
            let note = #"{"audience":"all","body":"x"}"#
            let cases: [(String, String, String?, [String?: Int])] = [
                // method, path, body, expected status per key (nil = no key)
                ("POST", "/v1/apps", #"{"id":"other","bundleId":"com.example.other"}"#, [nil: 401, keys.register: 403, keys.send: 403]),
                ("GET", "/v1/apps", nil, [nil: 401, keys.register: 403, keys.send: 403, context.admin: 200]),
                ("PUT", "/v1/apps/demo/devices/\(token)", device, [nil: 401, "hk_0000000000000000_" + String(repeating: "0", count: 64): 401, keys.register: 200, keys.send: 200]),
                ("GET", "/v1/apps/demo/devices", nil, [nil: 401, keys.register: 403, keys.send: 200, context.admin: 200]),
                ("POST", "/v1/apps/demo/notifications", note, [nil: 401, keys.register: 403, keys.send: 202]),
                ("POST", "/v1/keys", #"{"scope":"admin"}"#, [keys.register: 403, keys.send: 403]),
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
            #expect(try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"other","bundleId":"com.example.other"}"#).status == 201)
            #expect(try await context.api.call("PUT", "/v1/apps/other/devices/\(token)", key: keys.register, json: device).status == 403)
        }
    }

    @Test("bad input gets the documented error and writes nothing")
    func badInput() async throws {
        try await self.withServer { context in
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
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","collapseId":"\#(String(repeating: "c", count: 65))"}"#, 400, "bad_collapse_id"),
                ("POST", "/v1/apps/demo/notifications", #"{"audience":"all","data":{"x":"\#(String(repeating: "y", count: 5000))"}}"#, 422, "payload_too_large"),
            ]
            for (method, path, body, status, code) in cases {
                let key = path.contains("notifications") ? keys.send : keys.register
                let response = try await context.api.call(method, path, key: key, json: body)
                #expect(response.status == status, "\(method) \(path) \(body.prefix(60))")
                #expect((response.body["error"] as? [String: Any])?["code"] as? String == code, "\(response.body)")
            }
            let devices = try await context.api.call("GET", "/v1/apps/demo/devices", key: keys.send)
            #expect((devices.body["devices"] as? [Any])?.isEmpty == true, "nothing was written")
            #expect(try await context.server.store.deliveryCounts().isEmpty)
        }
    }
}

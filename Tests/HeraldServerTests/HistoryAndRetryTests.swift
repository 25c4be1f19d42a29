// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// Retries through the server, the history endpoints and key revocation, over the real API.
extension ServerTests {
    /// Registers one virtual device of app `demo` for user `ann`; returns its token.
    func registeredDevice(_ context: Context, _ keys: (register: String, send: String)) async throws -> String {
        let token = try await self.virtualDevice(context)
        let registered = try await context.api.call(
            "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
            json:
                #"{"environment":"sandbox","userId":"ann","userAssertion":"\#(try await self.assertion(context, send: keys.send, user: "ann", token: token))"}"#
        )
        #expect(registered.status == 200)
        return token
    }

    func inboxCount(_ context: Context, _ token: String) async throws -> Int {
        let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
        return (inbox.body["notifications"] as? [Any])?.count ?? -1
    }

    @Test("503 and 429 are retried with back-off until APNs accepts; a 400 is never retried", arguments: StoreDriver.enabled)
    func retries(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver, configure: { $0.engine.retryBase = .milliseconds(50) }) { context in
            let keys = try await self.setUp(context)
            let token = try await self.registeredDevice(context, keys)
            let armed = try await context.control.call("POST", "/v1/faults", json: #"{"type":"status","status":503,"count":1}"#)
            #expect(armed.status == 201 || armed.status == 200, "\(armed.body)")
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"status","status":429,"count":1}"#)
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"users":["ann"]},"body":"again"}"#)
            let status = try await self.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            let delivery = try #require((status["deliveries"] as? [[String: Any]])?.first)
            #expect(delivery["state"] as? String == "sent")
            #expect(delivery["attempts"] as? Int == 3, "503, then 429, then accepted: \(delivery)")
            #expect(try await self.inboxCount(context, token) == 1, "delivered once")

            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"status","status":400,"reason":"BadCollapseId","count":1}"#)
            let refused = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"users":["ann"]},"body":"no"}"#)
            let final = try await self.settled(context, key: keys.send, id: try #require(refused.body["id"] as? String))
            let failed = try #require((final["deliveries"] as? [[String: Any]])?.first)
            #expect(failed["state"] as? String == "failed")
            #expect(failed["reason"] as? String == "BadCollapseId")
            #expect(failed["attempts"] as? Int == 1, "never retried")
            #expect(try await self.inboxCount(context, token) == 1)
        }
    }

    @Test("recent notifications newest first, paged; a device's deliveries; bad limits refused", arguments: StoreDriver.enabled)
    func history(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let token = try await self.registeredDevice(context, keys)
            var ids: [String] = []
            for body in ["one", "two"] {
                let sent = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"\#(body)"}"#)
                ids.append(try #require(sent.body["id"] as? String))
                _ = try await self.settled(context, key: keys.send, id: ids.last!)
                try await Task.sleep(for: .milliseconds(5))
            }
            let list = try await context.api.call("GET", "/v1/apps/demo/notifications", key: keys.send)
            let items = try #require(list.body["notifications"] as? [[String: Any]])
            #expect(items.compactMap { $0["id"] as? String } == ids.reversed())
            #expect(items.first?["audience"] as? Int == 1)
            #expect(items.first?["expanding"] as? Bool == false)
            let newest = try #require(items.first?["createdAt"] as? Int)
            let page = try await context.api.call("GET", "/v1/apps/demo/notifications?limit=1&before=\(newest)", key: keys.send)
            #expect((page.body["notifications"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[0]])

            let deliveries = try await context.api.call("GET", "/v1/apps/demo/devices/\(token)/deliveries", key: keys.send)
            let records = try #require(deliveries.body["deliveries"] as? [[String: Any]])
            #expect(records.compactMap { $0["notificationId"] as? String } == ids.reversed())
            #expect(records.allSatisfy { $0["state"] as? String == "sent" && $0["token"] as? String == token })

            for (path, status, code) in [
                ("/v1/apps/demo/notifications?limit=0", 400, "bad_limit"),
                ("/v1/apps/demo/notifications?limit=x", 400, "bad_limit"),
                ("/v1/apps/demo/notifications?before=-3", 400, "bad_before"),
                ("/v1/apps/demo/devices/\(token)/deliveries?limit=5000", 400, "bad_limit"),
                ("/v1/apps/demo/devices/\(String(repeating: "cd", count: 32))/deliveries", 404, "not_found"),
            ] {
                let response = try await context.api.call("GET", path, key: keys.send)
                #expect(response.status == status, "\(path)")
                #expect((response.body["error"] as? [String: Any])?["code"] as? String == code, "\(path): \(response.body)")
            }
        }
    }

    @Test("keys are listed without secrets; a revoked key authorizes nothing; the last admin key cannot be revoked", arguments: StoreDriver.enabled)
    func revocation(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let listed = try await context.api.call("GET", "/v1/keys", key: context.admin)
            let all = try #require(listed.body["keys"] as? [[String: Any]])
            #expect(all.count == 3)
            #expect(all.allSatisfy { $0["key"] == nil && $0["hash"] == nil && $0["id"] is String })
            let sendID = try #require(keys.send.split(separator: "_").dropFirst().first.map(String.init))
            #expect(try await context.api.call("GET", "/v1/apps/demo/notifications", key: keys.send).status == 200)
            #expect(try await context.api.call("DELETE", "/v1/keys/\(sendID)", key: context.admin).status == 204)
            let refused = try await context.api.call("GET", "/v1/apps/demo/notifications", key: keys.send)
            #expect(refused.status == 401)
            #expect(try await context.api.call("DELETE", "/v1/keys/\(sendID)", key: context.admin).status == 404, "already revoked")
            let revoked = try await context.api.call("GET", "/v1/keys", key: context.admin)
            #expect((revoked.body["keys"] as? [[String: Any]])?.first { $0["id"] as? String == sendID }?["revokedAt"] is Int)

            let adminID = try #require(context.admin.split(separator: "_").dropFirst().first.map(String.init))
            let last = try await context.api.call("DELETE", "/v1/keys/\(adminID)", key: context.admin)
            #expect(last.status == 409)
            #expect((last.body["error"] as? [String: Any])?["code"] as? String == "last_admin_key")
            let second = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"admin","name":"ops"}"#)
            let secondKey = try #require(second.body["key"] as? String)
            #expect(try await context.api.call("DELETE", "/v1/keys/\(adminID)", key: secondKey).status == 204)
            #expect(try await context.api.call("GET", "/v1/apps", key: context.admin).status == 401)
            #expect(try await context.api.call("GET", "/v1/apps", key: secondKey).status == 200)
        }
    }
}

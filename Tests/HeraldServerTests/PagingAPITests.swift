// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

/// Cursors and the send checks through the real server: list pages that never skip, and sends
/// refused (400, nothing written) when they could never be sent.
@Suite(.heavy) struct PagingAPITests {
    let server = ServerTests()

    /// Every item of `path`'s list under `key`, following `next`; the pages' sizes too.
    func walk(_ context: ServerTests.Context, _ path: String, key: String, items: String) async throws -> (items: [[String: Any]], pages: [Int]) {
        var all: [[String: Any]] = []
        var pages: [Int] = []
        var next: String?
        for _ in 0..<100 {
            let separator = path.contains("?") ? "&" : "?"
            let page = try await context.api.call("GET", path + (next.map { "\(separator)cursor=\($0)" } ?? ""), key: key)
            #expect(page.status == 200, "\(page.body)")
            let found = page.body[items] as? [[String: Any]] ?? []
            all += found
            pages.append(found.count)
            guard let cursor = page.body["next"] as? String else {
                #expect(page.body["next"] is NSNull, "next is null at the end, not absent")
                return (all, pages)
            }
            next = cursor
        }
        Issue.record("the walk did not end")
        return (all, pages)
    }

    @Test("notifications sent in one millisecond are listed page by page through next; a bad cursor is 400", arguments: StoreDriver.enabled)
    func notifications(driver: StoreDriver) async throws {
        // A clock that does not move: every notification is created in the same millisecond.
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.server.withServer(driver: driver, clock: clock) { context in
            let keys = try await self.server.setUp(context)
            var ids: Set<String> = []
            for n in 0..<12 {
                let sent = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"\#(n)"}"#)
                #expect(sent.status == 202)
                ids.insert(try #require(sent.body["id"] as? String))
            }
            let walked = try await self.walk(context, "/v1/apps/demo/notifications?limit=5", key: keys.send, items: "notifications")
            #expect(walked.pages == [5, 5, 2])
            #expect(walked.items.compactMap { $0["id"] as? String }.count == 12)
            #expect(Set(walked.items.compactMap { $0["id"] as? String }) == ids)
            // `before` still works: nothing was created before this millisecond.
            let before = try await context.api.call("GET", "/v1/apps/demo/notifications?before=\(clock.nowMilliseconds)", key: keys.send)
            #expect((before.body["notifications"] as? [Any])?.isEmpty == true)
            // A cursor is the list's own: made up, damaged, or another list's, it is refused.
            let devicesCursor = Base64URL.encode(Array("d,1".utf8))
            for cursor in ["xyz!", "AAAA", Base64URL.encode(Array("n,12".utf8)), devicesCursor, Base64URL.encode(Array("n,abc,def".utf8))] {
                let refused = try await context.api.call("GET", "/v1/apps/demo/notifications?cursor=\(cursor)", key: keys.send)
                #expect(refused.status == 400, "\(cursor)")
                #expect((refused.body["error"] as? [String: Any])?["code"] as? String == "bad_cursor", "\(cursor)")
            }
        }
    }

    @Test("every device can be walked, past a page of 1,000; a device's deliveries page too", arguments: StoreDriver.enabled)
    func devices(driver: StoreDriver) async throws {
        try await self.server.withServer(driver: driver) { context in
            let keys = try await self.server.setUp(context)
            for n in 1...1_005 {
                let hex = String(n, radix: 16)
                let token = try DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
                _ = try await context.server.store.register(appID: "demo", DeviceRegistration(token: token, tags: n % 2 == 0 ? ["even"] : []), now: 1)
            }
            let all = try await self.walk(context, "/v1/apps/demo/devices?limit=1000", key: keys.send, items: "devices")
            #expect(all.pages == [1_000, 5])
            #expect(Set(all.items.compactMap { $0["token"] as? String }).count == 1_005)
            let even = try await self.walk(context, "/v1/apps/demo/devices?tag=even&limit=300", key: keys.send, items: "devices")
            #expect(even.pages == [300, 202])
            let refused = try await context.api.call("GET", "/v1/apps/demo/devices?cursor=\(Base64URL.encode(Array("x,5".utf8)))", key: keys.send)
            #expect((refused.body["error"] as? [String: Any])?["code"] as? String == "bad_cursor")

            // A virtual device's three deliveries, two a page.
            let token = try await self.server.virtualDevice(context)
            #expect(
                try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#).status
                    == 200)
            for n in 0..<3 {
                let sent = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["\#(token)"]},"body":"\#(n)"}"#
                )
                _ = try await self.server.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            }
            let deliveries = try await self.walk(context, "/v1/apps/demo/devices/\(token)/deliveries?limit=2", key: keys.send, items: "deliveries")
            #expect(deliveries.pages == [2, 1])
            #expect(Set(deliveries.items.compactMap { $0["notificationId"] as? String }).count == 3)
        }
    }

    @Test(
        "a send that could never be sent is refused with 400 and writes nothing; a token send counts unknown tokens", arguments: StoreDriver.enabled)
    func sendChecks(driver: StoreDriver) async throws {
        let clock = EmulatorClock(fixedAt: 1_800_000_000)
        let now: Int64 = 1_800_000_000
        try await self.server.withServer(driver: driver, clock: clock) { context in
            let keys = try await self.server.setUp(context)
            let day: Int64 = 86_400
            let cases: [(String, String, String?)] = [
                (#"{"audience":{"tokens":["xyz!"]},"body":"x"}"#, "bad_device_token", "audience.tokens[0]"),
                (#"{"audience":{"tokens":["abcd","ABCD","abc"]},"body":"x"}"#, "bad_device_token", "audience.tokens[2]"),
                (#"{"audience":{"tokens":["abcd"]},"pushType":"mdm","body":"x"}"#, "bad_push_type", nil),
                (#"{"audience":"all","kinds":["device"],"pushType":"voip","body":"x"}"#, "bad_push_type", nil),
                (#"{"audience":{"activityId":"game"},"pushType":"alert","body":"x"}"#, "bad_push_type", nil),
                (#"{"audience":"all","body":"x","expiration":1}"#, "bad_expiration", nil),
                (#"{"audience":"all","body":"x","expiration":\#(now + 31 * day)}"#, "bad_expiration", nil),
                (#"{"audience":"all","body":"x","scheduledAt":\#((now + 10 * day) * 1000),"expiration":\#(now + 5 * day)}"#, "bad_expiration", nil),
                (#"{"audience":"all","body":"x","scheduledAt":\#((now + 3600) * 1000),"ttl":60}"#, "bad_expiration", nil),
                (#"{"audience":"all","body":"x","scheduledAt":\#((now + 31 * day) * 1000)}"#, "bad_scheduled_at", nil),
                (#"{"audience":"all","body":"x","scheduledAt":\#(now)}"#, "bad_scheduled_at", "24 hours ago"),
            ]
            for (body, code, message) in cases {
                let refused = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: body)
                let error = refused.body["error"] as? [String: Any]
                #expect(refused.status == 400, "\(body)")
                #expect(error?["code"] as? String == code, "\(body): \(refused.body)")
                if let message { #expect((error?["message"] as? String)?.contains(message) == true, "\(refused.body)") }
            }
            let listed = try await context.api.call("GET", "/v1/apps/demo/notifications", key: keys.send)
            #expect((listed.body["notifications"] as? [Any])?.isEmpty == true, "nothing was written")

            // At the edges of the ranges: accepted.
            for body in [
                #"{"audience":"all","body":"x","expiration":0}"#, #"{"audience":"all","body":"x","expiration":\#(now + 30 * day)}"#,
                #"{"audience":"all","body":"x","scheduledAt":\#((now + 30 * day) * 1000),"expiration":\#(now + 60 * day)}"#,
                #"{"audience":"all","body":"x","scheduledAt":\#((now - day) * 1000)}"#,
                #"{"audience":"all","pushType":"voip","data":{"call":1}}"#,
            ] {
                let accepted = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: body)
                #expect(accepted.status == 202, "\(body): \(accepted.body)")
                #expect(accepted.body["unknownTokens"] is NSNull, "not a token audience")
            }

            let known = String(repeating: "ab", count: 32)
            #expect(try await context.api.call("PUT", "/v1/apps/demo/devices/\(known)", key: keys.register, json: "{}").status == 200)
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"tokens":["\#(known.uppercased())","cdcd","efef","cdcd"]},"body":"x"}"#
            )
            #expect(sent.status == 202)
            #expect(sent.body["deliveries"] as? Int == 1)
            #expect(sent.body["unknownTokens"] as? Int == 2)
            #expect(sent.body["inactiveTokens"] as? Int == 0)
        }
    }
}

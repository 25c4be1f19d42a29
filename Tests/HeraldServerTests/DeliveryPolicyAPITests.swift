// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

/// Delivery policies through the real API (a server on a socket, the built-in emulator, a moved clock).
extension ServerTests {
    @Test(
        "quiet hours: a Tokyo device's alert is held (state held, reason QuietHours) and released when its window ends; New York's goes at once; time-sensitive, background and ignoreQuietHours sends are never held",
        arguments: StoreDriver.enabled)
    func quietHoursAPI(driver: StoreDriver) async throws {
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.withServer(driver: driver, clock: clock) { context in
            let keys = try await self.setUp(context)
            // A window around Tokyo's now, from an hour before to two hours after: New York
            // (13 or 14 hours behind) is outside it.
            var tokyo = Calendar(identifier: .gregorian)
            tokyo.timeZone = try #require(TimeZone(identifier: "Asia/Tokyo"))
            func wall(_ seconds: Int64) -> String {
                let parts = tokyo.dateComponents([.hour, .minute], from: Date(timeIntervalSince1970: Double(seconds)))
                return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
            }
            let (start, end) = (wall(clock.nowSeconds - 3600), wall(clock.nowSeconds + 7200))
            let bad = try await context.api.call(
                "PATCH", "/v1/apps/demo", key: context.admin, json: #"{"quietHours":{"start":"25:00","end":"08:00"}}"#)
            #expect(bad.status == 400 && (bad.body["error"] as? [String: Any])?["code"] as? String == "bad_quietHours")
            let half = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"quietHours":{"start":"22:00"}}"#)
            #expect(half.status == 400)
            let set = try await context.api.call(
                "PATCH", "/v1/apps/demo", key: context.admin, json: #"{"quietHours":{"start":"\#(start)","end":"\#(end)"}}"#)
            #expect(set.status == 200 && set.body["quietHours"] as? [String: String] == ["start": start, "end": end], "\(set.body)")
            let forbidden = try await context.api.call("PATCH", "/v1/apps/demo", key: keys.send, json: #"{"quietHours":{}}"#)
            #expect(forbidden.status == 403, "a send key cannot change the app's quiet hours")

            var tokens: [String: String] = [:]
            for zone in ["Asia/Tokyo", "America/New_York"] {
                let token = try await self.virtualDevice(context)
                tokens[zone] = token
                _ = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox","timeZone":"\#(zone)"}"#)
            }
            func deliveries(_ id: String) async throws -> [String: [String: Any]] {
                let status = try await context.api.call("GET", "/v1/apps/demo/notifications/\(id)", key: keys.send)
                var result: [String: [String: Any]] = [:]
                for delivery in status.body["deliveries"] as? [[String: Any]] ?? [] {
                    if let zone = tokens.first(where: { $0.value == delivery["token"] as? String })?.key { result[zone] = delivery }
                }
                return result
            }
            func send(_ json: String) async throws -> String {
                let sent = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: json)
                #expect(sent.status == 202, "\(sent.body)")
                return try #require(sent.body["id"] as? String)
            }

            let evening = try await send(#"{"audience":"all","body":"good evening"}"#)
            // New York's goes out in the claim that holds Tokyo's: once it is sent, Tokyo's is decided.
            let held = try await self.eventually(
                "New York's delivery sent", { try await deliveries(evening) }, until: { $0["America/New_York"]?["state"] as? String == "sent" })
            #expect(held["America/New_York"]?["state"] as? String == "sent")
            #expect(held["Asia/Tokyo"]?["state"] as? String == "held" && held["Asia/Tokyo"]?["reason"] as? String == "QuietHours", "\(held)")
            let counts = try await context.api.call("GET", "/v1/apps/demo/notifications/\(evening)", key: keys.send).body["counts"]
            #expect((counts as? [String: Int])?["pending"] == 1, "a held delivery is in the queue")

            // Never held: time-sensitive and critical alerts, an opt-out, a background push.
            for json in [
                #"{"audience":"all","body":"your taxi is here","interruptionLevel":"time-sensitive"}"#,
                #"{"audience":"all","body":"flood warning","aps":{"interruption-level":"critical"}}"#,
                #"{"audience":"all","body":"your code","ignoreQuietHours":true}"#,
                #"{"audience":"all","pushType":"background","contentAvailable":true}"#,
            ] {
                let id = try await send(json)
                let settled = try await self.settled(context, key: keys.send, id: id)
                #expect((settled["counts"] as? [String: Int])?["sent"] == 2, "\(json): \(settled)")
            }
            #expect(try await deliveries(evening)["Asia/Tokyo"]?["state"] as? String == "held")

            // Past the window's end in Tokyo, the held alert goes.
            clock.advance(seconds: 7200 + 60)
            let done = try await self.settled(context, key: keys.send, id: evening)
            #expect((done["counts"] as? [String: Int])?["sent"] == 2)
            #expect(try await self.inbox(context, try #require(tokens["Asia/Tokyo"])).count == 5)

            // {} turns them off.
            let off = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"quietHours":{}}"#)
            #expect(off.status == 200 && off.body["quietHours"] is NSNull)
        }
    }
}

extension ServerTests {
    @Test(
        "frequency cap: over it a send is failed FrequencyCapped, or held with frequencyCap defer and sent once the window has room (moved clock)",
        arguments: StoreDriver.enabled)
    func frequencyCapAPI(driver: StoreDriver) async throws {
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.withServer(driver: driver, clock: clock) { context in
            let keys = try await self.setUp(context)
            for json in [#"{"limit":0,"windowSeconds":3600}"#, #"{"limit":2}"#, #"{"limit":2,"windowSeconds":10}"#] {
                let bad = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"frequencyCap":\#(json)}"#)
                #expect(bad.status == 400 && (bad.body["error"] as? [String: Any])?["code"] as? String == "bad_frequencyCap", "\(json)")
            }
            let set = try await context.api.call(
                "PATCH", "/v1/apps/demo", key: context.admin, json: #"{"frequencyCap":{"limit":2,"windowSeconds":3600}}"#)
            let cap = set.body["frequencyCap"] as? [String: Any]
            #expect(set.status == 200 && cap?["limit"] as? Int == 2 && cap?["windowSeconds"] as? Int == 3600 && cap?["perCategory"] as? Bool == false)
            let token = try await self.virtualDevice(context)
            _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            func send(_ extra: String = "") async throws -> String {
                let sent = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["\#(token)"]},"body":"hi"\#(extra)}"#)
                #expect(sent.status == 202, "\(sent.body)")
                return try #require(sent.body["id"] as? String)
            }
            let bad = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"hi","frequencyCap":"later"}"#)
            #expect((bad.body["error"] as? [String: Any])?["code"] as? String == "bad_frequencyCap")
            for _ in 0..<2 {
                #expect((try await self.settled(context, key: keys.send, id: try await send())["counts"] as? [String: Int])?["sent"] == 1)
            }
            let over = try await self.settled(context, key: keys.send, id: try await send())
            let failed = (over["deliveries"] as? [[String: Any]])?.first
            #expect(failed?["state"] as? String == "failed" && failed?["reason"] as? String == "FrequencyCapped", "\(over)")
            let deferred = try await send(#","frequencyCap":"defer""#)
            // Decided by its claim: held (deferred), or, wrongly, sent or failed.
            let state = try await self.eventually(
                "the deferred delivery decided",
                {
                    let status = try await context.api.call("GET", "/v1/apps/demo/notifications/\(deferred)", key: keys.send)
                    return (status.body["deliveries"] as? [[String: Any]])?.first?["state"] as? String
                }, until: { ["held", "sent", "failed"].contains($0 ?? "") })
            #expect(state == "held")
            clock.advance(seconds: 3600)
            #expect((try await self.settled(context, key: keys.send, id: deferred)["counts"] as? [String: Int])?["sent"] == 1)
            #expect(try await self.inbox(context, token).count == 3)
            #expect(
                try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"frequencyCap":{}}"#).body["frequencyCap"] is NSNull
            )
        }
    }
}

extension ServerTests {
    @Test(
        "a batch all over the frequency cap does not idle the engine: the deliveries due behind it go at once, whatever the poll",
        .timeLimit(.minutes(60)), arguments: StoreDriver.enabled)
    func capOnlyBatch(driver: StoreDriver) async throws {
        // One worker, batches of 3, a poll once a day: only a claim that goes past a batch the cap
        // set aside whole can send the fourth device's alert.
        try await self.withServer(driver: driver, configure: Self.pollingOnceADay(workers: 1, batchSize: 3)) { context in
            let keys = try await self.setUp(context)
            #expect(
                try await context.api.call(
                    "PATCH", "/v1/apps/demo", key: context.admin, json: #"{"frequencyCap":{"limit":2,"windowSeconds":3600}}"#
                ).status == 200)
            for _ in 0..<3 {
                let token = try await self.virtualDevice(context)
                let assertion = try await self.assertion(context, send: keys.send, user: "ann", token: token)
                let registered = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
                    json: #"{"environment":"sandbox","userId":"ann","userAssertion":"\#(assertion)"}"#)
                #expect(registered.status == 200, "\(registered.body)")
            }
            let other = try await self.virtualDevice(context)
            #expect(
                try await context.api.call("PUT", "/v1/apps/demo/devices/\(other)", key: keys.register, json: #"{"environment":"sandbox"}"#).status
                    == 200)
            func send() async throws -> [String: Int] {
                let sent = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"hi"}"#)
                let id = try #require(sent.body["id"] as? String, "\(sent.body)")
                return try await self.settled(context, key: keys.send, id: id)["counts"] as? [String: Int] ?? [:]
            }
            // Ann's devices come first: two of them get the first alert, and the other device.
            let first = try await send()
            #expect(first["sent"] == 3 && first["failed"] == 1, "\(first)")
            // The second's first batch is Ann's three devices, all over her cap.
            let second = try await send()
            #expect(second["sent"] == 1 && second["failed"] == 3, "\(second)")
            #expect(try await self.inbox(context, other).count == 2)
        }
    }
}

extension ServerTests {
    typealias Progress = (sent: Int, pending: Int, expanding: Bool)

    /// A notification's deliveries sent and pending, and whether its audience is still being expanded.
    func progress(_ context: Context, key: String, id: String) async throws -> Progress {
        let body = try await context.api.call("GET", "/v1/apps/demo/notifications/\(id)", key: key).body
        let counts = body["counts"] as? [String: Int] ?? [:]
        return (counts["sent"] ?? 0, counts["pending"] ?? 0, body["expanding"] as? Bool ?? true)
    }

    @Test(
        "throttle: a 10,000-device send at throttlePerMinute 2500 goes to the emulator 2,500 a minute as the clock moves, never more",
        arguments: StoreDriver.enabled)
    func throttleAPI(driver: StoreDriver) async throws {
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.withServer(driver: driver, clock: clock) { context in
            let keys = try await self.setUp(context)
            let bad = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"throttlePerMinute":100001}"#)
            #expect((bad.body["error"] as? [String: Any])?["code"] as? String == "bad_throttlePerMinute")
            let set = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"throttlePerMinute":2500}"#)
            #expect(set.status == 200 && set.body["throttlePerMinute"] as? Int == 2500)
            // 10,000 virtual devices, registered through the store (the API would take minutes of curl).
            let emulator = try #require(context.server.emulator)
            for _ in 0..<10_000 {
                let device = emulator.state.createDevice(
                    bundleID: "com.example.app", environment: .development, kind: .device, now: clock.nowMilliseconds)
                _ = try await context.server.store.register(
                    appID: "demo", DeviceRegistration(token: try DeviceToken(hex: device.token), environment: .development),
                    now: clock.nowMilliseconds)
            }
            let sent = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"sale"}"#)
            let id = try #require(sent.body["id"] as? String)
            func wait(until done: (Progress) -> Bool) async throws -> Progress {
                try await self.eventually("the throttled send's progress", { try await self.progress(context, key: keys.send, id: id) }, until: done)
            }
            // The clock stands still: the whole audience gets its slots, one is sent.
            let first = try await wait { !$0.expanding && $0.sent >= 1 }
            #expect(first.sent == 1 && first.pending == 9_999, "\(first)")
            // Slots are 24 ms apart: by the last millisecond of each minute, 2,500 more.
            clock.advance(milliseconds: 59_999)
            for minute in 1...4 {
                let now = try await wait { $0.sent >= 2_500 * minute }
                #expect(now.sent == 2_500 * minute && now.pending == 10_000 - 2_500 * minute, "minute \(minute): \(now)")
                clock.advance(milliseconds: 60_000)
            }
            #expect(emulator.state.counters(now: clock.nowMilliseconds).accepted == 10_000)
        }
    }
}

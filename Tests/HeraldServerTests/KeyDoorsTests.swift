// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

/// One rule per key at every door, through real sockets: the dashboard's sign-in and sessions,
/// the event stream while it runs, failed authentication at the API, the registration lane and
/// the dashboard alike.
@Suite(.heavy) struct KeyDoorsTests {
    let server = ServerTests()

    /// The id part of a key's token (`hk_<id>_<secret>`).
    static func id(_ token: String) -> String { String(token.dropFirst(3).prefix(16)) }

    static func code(_ body: [String: Any]) -> String? { (body["error"] as? [String: Any])?["code"] as? String }

    @Test(
        "the dashboard takes only admin keys bound to no app; a session ends when its key is rotated out, revoked or expires, and never outlives its key"
    )
    func dashboardSessions() async throws {
        let clock = ServerTests.PausableClock()
        try await self.server.withServer(clock: clock) { context in
            _ = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-doors")
            defer { directory.remove() }
            let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar")
            func admin(_ json: String) async throws -> String {
                let made = try await context.api.call("POST", "/v1/keys", key: context.admin, json: json)
                return try #require(made.body["key"] as? String)
            }

            // An admin key confined to one app: the API lets it govern that app, the dashboard not at all.
            let confined = try await admin(#"{"scope":"admin","appId":"demo"}"#)
            #expect(try await context.api.call("GET", "/v1/apps/demo", key: confined).status == 200)
            let refused = try await browser.post("/dashboard/login", [("key", confined)])
            #expect(refused.status == 403 && refused.body.contains("confined to the app"), "\(refused.status) \(refused.body.prefix(300))")
            #expect(try await browser.get("/dashboard").status == 303, "no session was made")

            // Rotated out with no overlap: the API refuses the old key, and its session ends with it.
            let ops = try await admin(#"{"scope":"admin","name":"ops"}"#)
            #expect(try await browser.post("/dashboard/login", [("key", ops)]).status == 303)
            #expect(try await browser.get("/dashboard").status == 200)
            let rotated = try await context.api.call("POST", "/v1/keys/\(Self.id(ops))/rotate", key: context.admin, json: #"{"overlapSeconds":0}"#)
            let successor = try #require((rotated.body["key"] as? [String: Any])?["key"] as? String, "\(rotated)")
            #expect(try await context.api.call("GET", "/v1/apps", key: ops).status == 401)
            let ended = try await browser.get("/dashboard")
            #expect(ended.status == 303 && ended.headers.lowercased().contains("location: /dashboard/login"), "the rotated-out key's session ended")
            #expect(try await browser.post("/dashboard/login", [("key", ops)]).status == 401, "nor can it sign in again")
            #expect(try await browser.post("/dashboard/login", [("key", successor)]).status == 303)
            #expect(try await browser.get("/dashboard").status == 200)
            #expect(try await context.api.call("DELETE", "/v1/keys/\(Self.id(successor))", key: context.admin).status == 204)
            #expect(try await browser.get("/dashboard").status == 303, "revoked: the session ended")

            // A key that expires in a minute: its session's cookie lasts a minute, and ends with it.
            clock.stop()
            let expiring = try await admin(#"{"scope":"admin","expiresAt":\#(clock.nowMilliseconds + 60_000)}"#)
            let signedIn = try await browser.post("/dashboard/login", [("key", expiring)])
            #expect(signedIn.status == 303)
            let maxAge = signedIn.headers.range(of: "Max-Age=").flatMap { Int(signedIn.headers[$0.upperBound...].prefix { $0.isNumber }) }
            #expect(maxAge.map { (1...60).contains($0) } == true, "the cookie ends with the key: \(signedIn.headers)")
            #expect(try await browser.get("/dashboard").status == 200)
            clock.advance(by: 61_000)
            #expect(try await browser.get("/dashboard").status == 303, "expired: the session ended")
            let late = try await browser.post("/dashboard/login", [("key", expiring)])
            #expect(late.status == 401 && late.body.contains("expired"))
            #expect(Self.code(try await context.api.call("GET", "/v1/apps", key: expiring).body) == "key_expired")
        }
    }

    @Test("an event stream ends with a closed event once its key is revoked", arguments: StoreDriver.enabled)
    func streamEndsWithKey(driver: StoreDriver) async throws {
        try await self.server.withServer(driver: driver) { context in
            let keys = try await self.server.setUp(context)
            let watcher = try #require(
                try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"demo"}"#).body["key"] as? String)
            // --max-time is a hang guard: the stream ends when the key does.
            let stream = try BackgroundProcess(
                "/usr/bin/env",
                ["curl", "-sN", "--max-time", "300", "-H", "authorization: Bearer \(watcher)", context.api.base + "/v1/apps/demo/events"])
            try #require(try await stream.waitFor("herald delivery events", timeout: 300), "\(stream.printed)")
            // Another key's revocation does not touch it.
            let other = try #require(
                try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"demo"}"#).body["key"] as? String)
            #expect(try await context.api.call("DELETE", "/v1/keys/\(Self.id(other))", key: context.admin).status == 204)
            #expect(try await context.api.call("DELETE", "/v1/keys/\(Self.id(watcher))", key: context.admin).status == 204)
            let status = try await stream.exit(timeout: 300)
            if status == nil { _ = try await stream.stop() }
            #expect(status == 0, "curl ended because the stream did: \(stream.printed)")
            #expect(stream.printed.contains("event: closed") && stream.printed.contains("revoked"), "\(stream.printed)")
            // The other stream door, reconnecting: 401.
            #expect(try await context.api.call("GET", "/v1/apps/demo/events", key: watcher).status == 401)
            _ = keys
        }
    }

    @Test(
        "failed authentication is limited per address at every door: past the burst a key not verified lately waits, with Retry-After; a key in use does not"
    )
    func failedAuthentication() async throws {
        try await self.server.withServer(configure: { $0.rateLimits.failedAuthentication = TokenBucket.Limit(capacity: 3, perSecond: 0.001) }) {
            context in
            let keys = try await self.server.setUp(context)
            // A send key made now and not used yet: this process has not verified it.
            let fresh = try #require(
                try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"admin"}"#).body["key"] as? String)
            let wrong = "hk_" + Self.id(context.admin) + "_" + String(repeating: "0", count: 64)
            let unknown = "hk_" + String(repeating: "f", count: 16) + "_" + String(repeating: "0", count: 64)
            #expect(try await context.api.call("GET", "/v1/apps", key: wrong).status == 401)
            #expect(try await context.api.call("GET", "/v1/apps", key: unknown).status == 401)
            // The registration lane counts against the same address.
            let token = String(repeating: "ab", count: 32)
            #expect(
                try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: unknown, json: #"{"environment":"sandbox"}"#).status == 401)
            let limited = try await ProcessRunner.run(
                "curl", ["-s", "-o", "/dev/null", "-D", "-", "-H", "authorization: Bearer \(fresh)", context.api.base + "/v1/apps"])
            #expect(limited.standardOutput.hasPrefix("HTTP/1.1 429"), "\(limited.standardOutput)")
            #expect(limited.standardOutput.lowercased().contains("retry-after: "), "\(limited.standardOutput)")
            let lane = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            #expect(lane.status == 429 && Self.code(lane.body) == "rate_limited")
            let directory = try TemporaryDirectory(prefix: "herald-doors")
            defer { directory.remove() }
            let signIn = try await DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar").post(
                "/dashboard/login", [("key", fresh)])
            #expect(signIn.status == 429 && signIn.headers.lowercased().contains("retry-after: "))
            // The admin key, verified when it was used above, is not locked out by a guesser at its address.
            #expect(try await context.api.call("GET", "/v1/apps", key: context.admin).status == 200)
            // A request without a key is not an authentication: public routes still answer.
            #expect(try await context.api.call("GET", "/health").status == 200)
        }
    }

    @Test("failed dashboard sign-ins count like wrong API keys")
    func failedSignIns() async throws {
        try await self.server.withServer(configure: { $0.rateLimits.failedAuthentication = TokenBucket.Limit(capacity: 2, perSecond: 0.001) }) {
            context in
            let directory = try TemporaryDirectory(prefix: "herald-doors")
            defer { directory.remove() }
            let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", "hk_guess")]).status == 401)
            #expect(try await browser.post("/dashboard/login", [("key", "hk_guess_again")]).status == 401)
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 429)
            #expect(try await context.api.call("GET", "/v1/apps", key: context.admin).status == 429)
        }
    }

    @Test(
        "the last usable admin key bound to no app cannot be revoked, whatever expired or app-confined admin keys remain",
        arguments: StoreDriver.enabled)
    func lastGoverningKey(driver: StoreDriver) async throws {
        let clock = ServerTests.PausableClock()
        try await self.server.withServer(driver: driver, clock: clock) { context in
            _ = try await self.server.setUp(context)
            clock.stop()
            let confined = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"admin","appId":"demo"}"#)
            #expect(confined.status == 201)
            let expiring = try await context.api.call(
                "POST", "/v1/keys", key: context.admin, json: #"{"scope":"admin","expiresAt":\#(clock.nowMilliseconds + 60_000)}"#)
            let expiringKey = try #require(expiring.body["key"] as? String)
            clock.advance(by: 120_000)
            let last = try await context.api.call("DELETE", "/v1/keys/\(Self.id(context.admin))", key: context.admin)
            #expect(last.status == 409 && Self.code(last.body) == "last_admin_key", "\(last.body)")
            #expect(try await context.api.call("GET", "/v1/apps", key: context.admin).status == 200, "the only working admin key still works")
            // The expired and the confined keys may go.
            #expect(try await context.api.call("DELETE", "/v1/keys/\(Self.id(expiringKey))", key: context.admin).status == 204)
            let confinedKey = try #require(confined.body["key"] as? String)
            #expect(try await context.api.call("DELETE", "/v1/keys/\(Self.id(confinedKey))", key: context.admin).status == 204)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

/// What a register key — extractable from any copy of the app — can do to the registry, through
/// the real API: register an anonymous device, and bind a user only with the backend's assertion.
extension ServerTests {
    func inbox(_ context: Context, _ token: String) async throws -> [[String: Any]] {
        (try await context.control.call("GET", "/v1/devices/\(token)/inbox").body["notifications"] as? [[String: Any]]) ?? []
    }

    func userDevices(_ context: Context, _ key: String, _ user: String) async throws -> [String] {
        let listed = try await context.api.call("GET", "/v1/apps/demo/devices?userId=\(user)", key: key)
        return ((listed.body["devices"] as? [[String: Any]]) ?? []).compactMap { $0["token"] as? String }
    }

    @Test("a stolen register key cannot bind a device to another user, move a bound one, or take protected tags", arguments: StoreDriver.enabled)
    func stolenRegisterKey(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let ann = try await self.virtualDevice(context)
            let attacker = try await self.virtualDevice(context)
            // Ann's phone is bound with the backend's assertion for her.
            let bound = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(ann)", key: keys.register,
                json: #"{"environment":"sandbox","userAssertion":"\#(try await self.assertion(context, send: keys.send, user: "ann", token: ann))"}"#
            )
            #expect(bound.status == 200 && bound.body["userId"] as? String == "ann", "the assertion names the user: \(bound.body)")

            // The attack of the issue: the attacker's own token, claimed for ann, with the app's key.
            let claim = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(attacker)", key: keys.register, json: #"{"environment":"sandbox","userId":"ann"}"#
            )
            #expect(claim.status == 403 && (claim.body["error"] as? [String: Any])?["code"] as? String == "user_assertion_required")
            // Nor can it move ann's token to someone else, even knowing it.
            let move = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(ann)", key: keys.register, json: #"{"environment":"sandbox","userId":"mallory"}"#
            )
            #expect(move.status == 403 && (move.body["error"] as? [String: Any])?["code"] as? String == "user_assertion_required")
            // An assertion for mallory does not bind a device to ann.
            let mallory = try await self.assertion(context, send: keys.send, user: "mallory", token: attacker)
            let swapped = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(attacker)", key: keys.register,
                json: #"{"environment":"sandbox","userId":"ann","userAssertion":"\#(mallory)"}"#
            )
            #expect((swapped.body["error"] as? [String: Any])?["code"] as? String == "user_assertion_wrong_user")
            #expect(try await self.userDevices(context, keys.send, "ann") == [ann], "nothing was bound to ann but her phone")

            // An anonymous device is allowed and still reached by "all"; ann's sends reach only ann.
            #expect(
                try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(attacker)", key: keys.register, json: #"{"environment":"sandbox","tags":["news"]}"#
                ).status == 200)
            let secret = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"users":["ann"]},"title":"Your bank code","body":"123456"}"#
            )
            #expect(secret.body["deliveries"] as? Int == 1)
            _ = try await self.settled(context, key: keys.send, id: try #require(secret.body["id"] as? String))
            let everyone = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"hello all"}"#)
            #expect(everyone.body["deliveries"] as? Int == 2)
            _ = try await self.settled(context, key: keys.send, id: try #require(everyone.body["id"] as? String))
            let stolen = try await self.inbox(context, attacker)
            #expect(stolen.count == 1, "the anonymous device got the broadcast only: \(stolen)")
            #expect(!String(describing: stolen).contains("123456"))
            #expect(try await self.inbox(context, ann).count == 2)

            // Protected tags: the backend sets them; the register key can neither add nor drop them.
            #expect(try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"protectedTags":["vip"]}"#).status == 200)
            let vip = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(attacker)", key: keys.register, json: #"{"environment":"sandbox","tags":["vip"]}"#
            )
            #expect(vip.status == 403 && (vip.body["error"] as? [String: Any])?["code"] as? String == "tag_protected")
            #expect(
                try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(ann)", key: keys.send, json: #"{"environment":"sandbox","userId":"ann","tags":["vip"]}"#
                ).status == 200)
            let refreshed = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(ann)", key: keys.register, json: #"{"environment":"sandbox","userId":"ann","tags":["news"]}"#
            )
            #expect(refreshed.status == 200, "keeping the user it has needs no assertion")
            // The register key's answer shows what it registered, not the backend's tags nor the device's history.
            #expect(refreshed.body["tags"] as? [String] == ["news"], "\(refreshed.body)")
            #expect(refreshed.body["createdAt"] as? Int64 == refreshed.body["lastRegisteredAt"] as? Int64)
            let stored = try await context.api.call("GET", "/v1/apps/demo/devices/\(ann)", key: keys.send)
            #expect((stored.body["tags"] as? [String])?.sorted() == ["news", "vip"], "the protected tag stays: \(stored.body)")
            #expect(
                (stored.body["createdAt"] as? Int64).map { $0 < (stored.body["lastRegisteredAt"] as? Int64 ?? 0) } == true,
                "the backend sees the history: \(stored.body)")
            // Logging out (dropping the user) needs none either: the token's holder could unregister it anyway.
            let out = try await context.api.call("PUT", "/v1/apps/demo/devices/\(ann)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            #expect(out.status == 200 && out.body["userId"] is NSNull)
        }
    }

    @Test(
        "forged, expired, too long, wrong-app and malformed assertions are refused with their own code and write nothing",
        arguments: StoreDriver.enabled)
    func badAssertions(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let token = try await self.virtualDevice(context)
            let now = Int64(Date().timeIntervalSince1970)
            let forged = UserAssertion(appID: "demo", userID: "ann", expiresAt: now + 300).signed(secret: Array("hus_not-the-secret".utf8))
            // The app's real secret, as its backend holds it, signs the rest.
            let made = try await context.api.call("POST", "/v1/apps/demo/user-secret", key: context.admin)
            let secret = Array(try #require(made.body["secret"] as? String).utf8)
            let cases: [(String, Int, String)] = [
                (forged, 403, "user_assertion_invalid"),
                (UserAssertion(appID: "demo", userID: "ann", expiresAt: now - 3600).signed(secret: secret), 403, "user_assertion_expired"),
                (UserAssertion(appID: "demo", userID: "ann", expiresAt: now + 86_400).signed(secret: secret), 403, "user_assertion_too_long"),
                (UserAssertion(appID: "other", userID: "ann", expiresAt: now + 300).signed(secret: secret), 403, "user_assertion_wrong_app"),
                ("not.a.jwt!", 400, "bad_user_assertion"),
                ("abc", 400, "bad_user_assertion"),
            ]
            for (assertion, status, code) in cases {
                let answer = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox","userAssertion":"\#(assertion)"}"#
                )
                #expect(answer.status == status && (answer.body["error"] as? [String: Any])?["code"] as? String == code, "\(code): \(answer.body)")
            }
            #expect(try await context.server.store.device(appID: "demo", token: token) == nil, "nothing was written")
            // The same secret, well used, binds; a rotated secret leaves the old assertions worthless.
            let good = UserAssertion(appID: "demo", userID: "ann", expiresAt: now + 300, tokenHash: UserAssertion.tokenHash(token)).signed(
                secret: secret)
            #expect(
                try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox","userAssertion":"\#(good)"}"#
                ).status == 200)
            #expect(try await context.api.call("POST", "/v1/apps/demo/user-secret", key: context.admin).status == 201)
            let other = try await self.virtualDevice(context)
            let stale = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(other)", key: keys.register, json: #"{"environment":"sandbox","userAssertion":"\#(good)"}"#
            )
            #expect((stale.body["error"] as? [String: Any])?["code"] as? String == "user_assertion_invalid")
            // A register key cannot mint assertions or read the app; turning verification off (for a
            // migration) lets register keys bind directly again.
            #expect(try await context.api.call("POST", "/v1/apps/demo/user-assertions", key: keys.register, json: #"{"userId":"ann"}"#).status == 403)
            #expect(try await context.api.call("PATCH", "/v1/apps/demo", key: keys.send, json: #"{"userVerification":false}"#).status == 403)
            let off = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"userVerification":false}"#)
            #expect(off.body["userVerification"] as? Bool == false)
            #expect(
                try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(other)", key: keys.register, json: #"{"environment":"sandbox","userId":"bob"}"#
                ).status == 200)
        }
    }

    @Test(
        "an assertion binds only the device it names (tkh): another token is 403 user_assertion_wrong_device, none 403 user_assertion_unbound, until the app allows unbound ones",
        arguments: StoreDriver.enabled)
    func deviceBoundAssertions(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let phone = try await self.virtualDevice(context)
            let thief = try await self.virtualDevice(context)
            func code(_ body: [String: Any]) -> String? { (body["error"] as? [String: Any])?["code"] as? String }
            func register(_ token: String, _ assertion: String) async throws -> (status: Int, body: [String: Any]) {
                try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox","userAssertion":"\#(assertion)"}"#)
            }
            // Ann's assertion, leaked from her phone's traffic: it binds her phone, not the thief's.
            let leaked = try await self.assertion(context, send: keys.send, user: "ann", token: phone)
            let stolen = try await register(thief, leaked)
            #expect(stolen.status == 403 && code(stolen.body) == "user_assertion_wrong_device", "\(stolen.body)")
            #expect(try await context.server.store.device(appID: "demo", token: thief) == nil, "nothing was written")
            #expect(try await register(phone, leaked).status == 200)
            // An assertion that names no device: Herald will not sign one for this app, and refuses one signed elsewhere.
            let unsigned = try await context.api.call("POST", "/v1/apps/demo/user-assertions", key: keys.send, json: #"{"userId":"ann"}"#)
            #expect(unsigned.status == 400 && code(unsigned.body) == "missing_token", "\(unsigned.body)")
            let secret = Array(
                try #require(try await context.api.call("POST", "/v1/apps/demo/user-secret", key: context.admin).body["secret"] as? String).utf8)
            let unbound = UserAssertion(appID: "demo", userID: "ann", expiresAt: Int64(Date().timeIntervalSince1970) + 300).signed(secret: secret)
            let refused = try await register(thief, unbound)
            #expect(refused.status == 403 && code(refused.body) == "user_assertion_unbound", "\(refused.body)")
            // An app migrating from unbound assertions turns them on for a while (admin only).
            #expect(try await context.api.call("PATCH", "/v1/apps/demo", key: keys.send, json: #"{"unboundAssertions":true}"#).status == 403)
            let migrating = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"unboundAssertions":true}"#)
            #expect(migrating.body["unboundAssertions"] as? Bool == true)
            #expect(try await register(thief, unbound).status == 200)
            #expect(try await context.api.call("POST", "/v1/apps/demo/user-assertions", key: keys.send, json: #"{"userId":"ann"}"#).status == 201)
        }
    }

    @Test(
        "PostgreSQL: a register key registering a token the backend is inserting with a protected tag, at once, leaves the protected tag",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)))
    func protectedTagRace() async throws {
        try await PostgresTestDatabase.with { database in
            try await self.withServer(configure: { $0.database = database.url }) { context in
                let keys = try await self.setUp(context)
                #expect(try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"protectedTags":["vip"]}"#).status == 200)
                let url = database.url
                let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
                // The backend's first registration of the token, with its protected tag, uncommitted:
                // the register key's lock finds no row to lock, and its upsert waits on this insert.
                let backend = try BackgroundProcess(
                    "/usr/bin/env",
                    [
                        "psql", url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", "BEGIN",
                        "-c",
                        "INSERT INTO devices (app_id, token, kind, environment, created_at, last_registered_at) VALUES ('demo', '\(token)', 'device', 'development', 1, 1)",
                        "-c", "INSERT INTO device_tags (device_id, tag) SELECT id, 'vip' FROM devices WHERE app_id = 'demo' AND token = '\(token)'",
                        "-c", #"\echo inserted"#, "-c", #"\! cat > /dev/null"#, "-c", "COMMIT",
                    ], keepInput: true)
                try #require(try await backend.waitFor("inserted", timeout: 300), "psql: \(backend.printed)")
                let register = try BackgroundProcess(
                    "/usr/bin/env",
                    [
                        "curl", "-s", "-m", "300", "-X", "PUT", "-H", "authorization: Bearer \(keys.register)", "-H",
                        "content-type: application/json",
                        "--data", #"{"environment":"sandbox","tags":["news"]}"#, "-w", "\nstatus=%{http_code}\n",
                        context.api.base + "/v1/apps/demo/devices/\(token)",
                    ])
                _ = try await self.eventually(
                    "the registration waits for the backend's insert",
                    {
                        try await PostgresTestDatabase.psql(
                            url,
                            "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%devices%'"
                        )
                    }, until: { $0 == "t" })
                backend.closeInput()
                #expect(try await backend.exit(timeout: 300) == 0, "psql: \(backend.printed)")
                try #require(try await register.waitFor("status=", timeout: 300))
                #expect(register.printed.contains("status=200"), "\(register.printed)")
                let stored = try await context.api.call("GET", "/v1/apps/demo/devices/\(token)", key: keys.send)
                #expect((stored.body["tags"] as? [String])?.sorted() == ["news", "vip"], "the backend's protected tag stays: \(stored.body)")
            }
        }
    }
}

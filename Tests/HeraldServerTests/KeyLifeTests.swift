// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// API keys with a life: an expiry, the time of their last use, and rotation with an overlap.
extension ServerTests {
    @Test(
        "a key expires; rotation gives a new key while the old one works through the overlap; keys show their last use",
        arguments: StoreDriver.enabled)
    func keyLife(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            _ = try await self.setUp(context)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let past = try await context.api.call(
                "POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"demo","expiresAt":\#(now - 1000)}"#)
            #expect(past.status == 400 && (past.body["error"] as? [String: Any])?["code"] as? String == "bad_expiresAt")

            let made = try await context.api.call(
                "POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"demo","name":"backend","expiresAt":\#(now + 3_600_000)}"#
            )
            let old = try #require(made.body["key"] as? String)
            let oldID = try #require(made.body["id"] as? String)
            #expect(try await context.api.call("GET", "/v1/apps/demo/devices", key: old).status == 200)

            // Rotation: both work during the overlap; the new one has the old one's scope, app and name.
            let rotated = try await context.api.call("POST", "/v1/keys/\(oldID)/rotate", key: context.admin, json: #"{"overlapSeconds":600}"#)
            #expect(rotated.status == 201, "\(rotated.body)")
            let new = try #require((rotated.body["key"] as? [String: Any])?["key"] as? String)
            let previous = try #require(rotated.body["previous"] as? [String: Any])
            #expect(
                (previous["expiresAt"] as? Int64).map { $0 <= now + 3_600_000 && $0 >= now + 590_000 } == true,
                "the overlap shortens the old expiry: \(previous)")
            #expect(try await context.api.call("GET", "/v1/apps/demo/devices", key: old).status == 200)
            #expect(try await context.api.call("GET", "/v1/apps/demo/devices", key: new).status == 200)
            #expect(try await context.api.call("GET", "/v1/apps", key: new).status == 403, "the same scope as the old one")

            // An overlap of 0 ends the old key at once.
            let again = try await context.api.call("POST", "/v1/keys/\(oldID)/rotate", key: context.admin, json: #"{"overlapSeconds":0}"#)
            #expect(again.status == 201)
            let expired = try await context.api.call("GET", "/v1/apps/demo/devices", key: old)
            #expect(expired.status == 401 && (expired.body["error"] as? [String: Any])?["code"] as? String == "key_expired")
            #expect(try await context.api.call("POST", "/v1/keys/nope/rotate", key: context.admin, json: "{}").status == 404)

            let keys = try await context.api.call("GET", "/v1/keys", key: context.admin)
            let listed = try #require((keys.body["keys"] as? [[String: Any]])?.first { $0["id"] as? String == oldID })
            #expect(listed["lastUsedAt"] as? Int64 != nil && listed["expiresAt"] as? Int64 != nil, "\(listed)")
            #expect(listed["name"] as? String == "backend")
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

/// An app's own rate limits, set through the API, over the server's: a bucket of the app's alone
/// for its sends, registrations and receipts, and its register key's per-address limit.
extension ServerTests {
    @Test(
        "an app's own limits: its sends and its register key's addresses refused 429 past them, another app untouched; bad values refused",
        arguments: StoreDriver.enabled)
    func appRateLimits(driver: StoreDriver) async throws {
        let clock = PausableClock()
        try await self.withServer(driver: driver, clock: clock) { context in
            let keys = try await self.setUp(context)
            let base = context.api.base
            #expect(
                try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"other","bundleId":"com.example.other"}"#).status
                    == 201)
            let otherSend = try #require(
                try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"other"}"#).body["key"] as? String)
            let bad = try await context.api.call("PATCH", "/v1/apps/demo", key: context.admin, json: #"{"rateLimits":{"send":"lots"}}"#)
            #expect(bad.status == 400 && (bad.body["error"] as? [String: Any])?["code"] as? String == "bad_rateLimits", "\(bad.body)")
            #expect(try await context.api.call("PATCH", "/v1/apps/demo", key: keys.send, json: #"{"rateLimits":{"send":"2/0.001"}}"#).status == 403)
            let set = try await context.api.call(
                "PATCH", "/v1/apps/demo", key: context.admin, json: #"{"rateLimits":{"send":"2/0.001","registerPerAddress":"1/0.001"}}"#)
            #expect(set.status == 200)
            #expect((set.body["rateLimits"] as? [String: Any])?["send"] as? String == "2/0.001", "\(set.body)")
            clock.stop()
            let send = #"{"audience":"all","title":"t"}"#
            // Another app's key cannot spend this app's bucket: refused by the scope check, not counted.
            for _ in 0..<3 { #expect(try await self.limited(base, "POST", "/v1/apps/demo/notifications", key: otherSend, json: send).status == 403) }
            for _ in 0..<2 { #expect(try await self.limited(base, "POST", "/v1/apps/demo/notifications", key: keys.send, json: send).status == 202) }
            let refused = try await self.limited(base, "POST", "/v1/apps/demo/notifications", key: keys.send, json: send)
            #expect(refused.status == 429 && refused.code == "rate_limited" && refused.retryAfter != nil, "\(refused)")
            #expect(try await self.limited(base, "POST", "/v1/apps/other/notifications", key: otherSend, json: send).status == 202, "another app")
            // Its register key: one registration per address, then 429 (the server's own default is 60).
            #expect(try await self.limited(base, "PUT", Self.register(1), key: keys.register, json: Self.sandbox).status == 200)
            #expect(try await self.limited(base, "PUT", Self.register(2), key: keys.register, json: Self.sandbox).status == 429)
            // Removed: the server's limits alone again.
            let cleared = try await context.api.call(
                "PATCH", "/v1/apps/demo", key: context.admin, json: #"{"rateLimits":{"send":"0","registerPerAddress":"0"}}"#)
            #expect(cleared.status == 200 && cleared.body["rateLimits"] is NSNull, "\(cleared.body)")
            #expect(try await self.limited(base, "POST", "/v1/apps/demo/notifications", key: keys.send, json: send).status == 202)
            #expect(try await self.limited(base, "PUT", Self.register(3), key: keys.register, json: Self.sandbox).status == 200)
        }
    }
}

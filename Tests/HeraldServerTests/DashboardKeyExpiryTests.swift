// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

extension DashboardTests {
    @Test("a key made on the dashboard can expire after a number of days; a bad number is refused and makes no key")
    func keyExpiry() async throws {
        try await self.server.withServer { context in
            _ = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-key-expiry")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let page = try await browser.get("/dashboard/keys")
            #expect(page.body.contains(#"name="expiresInDays""#))
            let csrf = try #require(Browser.csrf(page.body))
            func keys() async throws -> [[String: Any]] {
                try await context.api.call("GET", "/v1/keys", key: context.admin).body["keys"] as? [[String: Any]] ?? []
            }
            let before = try await keys().count

            for bad in ["0", "3651", "soon"] {
                let refused = try await browser.post(
                    "/dashboard/keys", [("csrf", csrf), ("name", "bad"), ("scope", "send"), ("app", "demo"), ("expiresInDays", bad)])
                #expect(refused.status == 400 && refused.body.contains("number of days"), "\(bad): \(refused.status)")
            }
            #expect(try await keys().count == before, "no key was made")

            let start = Int64(Date().timeIntervalSince1970 * 1000)
            let made = try await browser.post(
                "/dashboard/keys", [("csrf", csrf), ("name", "campaign"), ("scope", "send"), ("app", "demo"), ("expiresInDays", "30")])
            let end = Int64(Date().timeIntervalSince1970 * 1000)
            #expect(made.status == 200 && made.body.contains(#"id="new-key-secret""#))
            let key = try #require(try await keys().first { $0["name"] as? String == "campaign" })
            let expiresAt = try #require(key["expiresAt"] as? Int64)
            #expect((start + 30 * 86_400_000...end + 30 * 86_400_000).contains(expiresAt), "\(expiresAt)")
            let never = try await browser.post("/dashboard/keys", [("csrf", csrf), ("name", "forever"), ("scope", "send"), ("app", "demo")])
            #expect(never.status == 200)
            let forever = try #require(try await keys().first { $0["name"] as? String == "forever" })
            #expect(forever["expiresAt"] == nil || forever["expiresAt"] is NSNull, "\(forever)")
        }
    }
}

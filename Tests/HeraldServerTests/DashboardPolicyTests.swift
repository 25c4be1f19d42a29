// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// The dashboard's delivery-policy settings through a real socket: the app's settings form sets
/// and clears quiet hours; the send form offers ignoring them.
extension DashboardTests {
    @Test(
        "the app's settings page sets quiet hours (refusing a half or bad window) and clears them, and sets a frequency cap; the send form offers both options"
    )
    func quietHoursSettings() async throws {
        try await self.server.withServer { context in
            _ = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let page = try await browser.get("/dashboard/apps/demo")
            #expect(page.status == 200 && page.body.contains(#"name="quietStart" type="time" value="""#))
            let csrf = try #require(Browser.csrf(page.body))
            func quietHours() async throws -> Any? {
                try await context.api.call("GET", "/v1/apps/demo", key: context.admin).body["quietHours"]
            }

            let saved = try await browser.post(
                "/dashboard/apps/demo/settings", [("csrf", csrf), ("userVerification", "on"), ("quietStart", "22:00"), ("quietEnd", "08:00:00")])
            #expect(saved.status == 200 && saved.body.contains("Settings saved.") && saved.body.contains(#"value="22:00""#))
            #expect(try await quietHours() as? [String: String] == ["start": "22:00", "end": "08:00"])
            let half = try await browser.post("/dashboard/apps/demo/settings", [("csrf", csrf), ("userVerification", "on"), ("quietStart", "22:00")])
            #expect(half.status == 400 && half.body.contains("role=\"alert\""))
            #expect(try await quietHours() as? [String: String] == ["start": "22:00", "end": "08:00"], "nothing written")
            let cleared = try await browser.post("/dashboard/apps/demo/settings", [("csrf", csrf), ("userVerification", "on")])
            #expect(cleared.status == 200)
            #expect(try await quietHours() is NSNull)

            let capped = try await browser.post(
                "/dashboard/apps/demo/settings",
                [("csrf", csrf), ("userVerification", "on"), ("capLimit", "3"), ("capWindow", "86400"), ("capPerCategory", "on")])
            #expect(capped.status == 200 && capped.body.contains(#"name="capLimit" type="number" min="1" max="1000" value="3""#))
            let cap = try await context.api.call("GET", "/v1/apps/demo", key: context.admin).body["frequencyCap"] as? [String: Any]
            #expect(cap?["limit"] as? Int == 3 && cap?["windowSeconds"] as? Int == 86400 && cap?["perCategory"] as? Bool == true)
            let throttled = try await browser.post(
                "/dashboard/apps/demo/settings", [("csrf", csrf), ("userVerification", "on"), ("throttlePerMinute", "600")])
            #expect(throttled.status == 200)
            #expect(try await context.api.call("GET", "/v1/apps/demo", key: context.admin).body["throttlePerMinute"] as? Int == 600)
            let badCap = try await browser.post("/dashboard/apps/demo/settings", [("csrf", csrf), ("userVerification", "on"), ("capLimit", "0")])
            #expect(badCap.status == 400)

            let send = try await browser.get("/dashboard/apps/demo/send")
            #expect(
                send.status == 200 && send.body.contains(#"name="ignoreQuietHours""#) && send.body.contains(#"<option value="defer""#)
                    && send.body.contains(#"name="throttlePerMinute""#))
        }
    }
}

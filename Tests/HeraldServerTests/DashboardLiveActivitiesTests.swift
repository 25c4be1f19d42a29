// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

extension DashboardTests {
    /// The path a 303 sends the browser to.
    func location(_ headers: String) throws -> String {
        let line = try #require(headers.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("location:") })
        return String(line.dropFirst("location:".count)).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(
        "the Live Activities page: a start refused in words with its code (the form kept), one started by push-to-start and listed active, an update that reaches the update token at priority 10, an end only once confirmed, then an update refused with activity_ended"
    )
    func liveActivitiesPage() async throws {
        try await self.server.withServer { context in
            let (_, send) = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            #expect(try await browser.get("/dashboard/apps/demo").body.contains(#"href="/dashboard/apps/demo/live-activities""#))
            let empty = try await browser.get("/dashboard/apps/demo/live-activities")
            #expect(empty.status == 200 && empty.body.contains(#"id="no-activities""#), "\(empty.body)")
            let csrf = try #require(Browser.csrf(empty.body))
            let starter = try await self.server.pushToStartDevice(context, key: send, user: "ann")
            let start = [
                ("csrf", csrf), ("to", "user"), ("attributesType", "GameAttributes"), ("attributes", #"{"home":"A"}"#),
                ("contentState", #"{"score":0}"#), ("title", "Kick-off"), ("body", "A vs B"), ("input", "token"),
            ]

            // Refusals: the API's, in words with their codes; the form keeps what was typed.
            let nobody = try await browser.post("/dashboard/apps/demo/live-activities", start + [("target", "zed")])
            #expect(nobody.status == 422 && nobody.body.contains("(<code>no_push_to_start_tokens</code>)"), "\(nobody.body)")
            #expect(nobody.body.contains(#"name="target" value="zed""#) && nobody.body.contains("{&quot;home&quot;:&quot;A&quot;}"), "\(nobody.body)")
            let notJSON = try await browser.post(
                "/dashboard/apps/demo/live-activities", start.filter { $0.0 != "contentState" } + [("target", "ann"), ("contentState", "{score")])
            #expect(notJSON.status == 400 && notJSON.body.contains("(<code>bad_contentState</code>)"), "\(notJSON.body)")
            #expect(notJSON.body.contains(">{score</textarea>"), "the content state kept: \(notJSON.body)")
            let forged = try await browser.post("/dashboard/apps/demo/live-activities", start.filter { $0.0 != "csrf" } + [("target", "ann")])
            #expect(forged.status == 403)
            #expect(try await context.api.call("GET", "/v1/apps/demo/live-activities", key: send).body["liveActivities"] as? [Any] != nil)
            #expect((try await context.api.call("GET", "/v1/apps/demo/live-activities", key: send).body["liveActivities"] as? [Any])?.isEmpty == true)

            let started = try await browser.post("/dashboard/apps/demo/live-activities", start + [("target", "ann")])
            #expect(started.status == 303, "\(started.body)")
            let page = try self.location(started.headers)
            let id = try #require(page.split(separator: "/").last.map(String.init))
            let received = self.server.aps(try await self.server.received(context, starter, count: 1).first)
            #expect(received["event"] as? String == "start" && received["attributes-type"] as? String == "GameAttributes", "\(received)")
            #expect((received["attributes"] as? [String: Any])?["heraldActivityId"] as? String == id && received["input-push-token"] as? Int == 1)
            #expect((received["alert"] as? [String: Any])?["body"] as? String == "A vs B")
            let listed = try await browser.get("/dashboard/apps/demo/live-activities?state=active")
            let rows = listed.body.matches(of: /<tr data-activity="([^"]+)">.*?<td class="state">(?:<[^>]+>)?([^<]+)<.*?<td class="input">([^<]+)</)
                .map {
                    "\($0.1) \($0.2) \($0.3)"
                }
            #expect(rows == ["\(id) active update tokens (0)"], "\(listed.body)")

            // The app registers the update token the started activity minted, with Herald's id.
            let update = try await self.server.virtualDevice(context, kind: "liveactivity")
            let registered = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(update)", key: send,
                json: #"{"environment":"sandbox","kind":"liveactivity","activityId":"\#(id)","userId":"ann"}"#)
            #expect(registered.status == 200, "\(registered)")
            let shown = try await browser.get(page)
            #expect(shown.body.contains(#"<dd id="activity-input">update tokens (1)</dd>"#), "\(shown.body)")
            #expect(shown.body.contains("{&quot;score&quot;:0}</textarea>"), "the update form starts from the newest content state")

            let updated = try await browser.post(
                page + "/update",
                [("csrf", csrf), ("contentState", #"{"score":2}"#), ("priority", "10"), ("title", "Goal"), ("relevanceScore", "40")])
            #expect(updated.status == 200 && updated.body.contains(#"id="activity-notice""#), "\(updated.body)")
            #expect(updated.body.contains(#"<dd id="activity-updates">1</dd>"#))
            let updateInbox = try await self.server.received(context, update, count: 1)
            #expect(updateInbox.first?["priority"] as? Int == 10, "\(updateInbox)")
            let sent = self.server.aps(updateInbox.first)
            #expect(sent["event"] as? String == "update" && (sent["content-state"] as? [String: Any])?["score"] as? Int == 2, "\(sent)")
            #expect((sent["alert"] as? [String: Any])?["title"] as? String == "Goal" && sent["relevance-score"] as? Int == 40, "\(sent)")
            let badPriority = try await browser.post(page + "/update", [("csrf", csrf), ("contentState", #"{"score":3}"#), ("priority", "7")])
            #expect(badPriority.status == 422 && badPriority.body.contains("(<code>bad_priority</code>)"), "\(badPriority.body)")
            #expect(badPriority.body.contains("{&quot;score&quot;:3}</textarea>"), "the form keeps its content state")

            // The first press asks; only the confirmation ends it.
            let asked = try await browser.post(page + "/end", [("csrf", csrf), ("dismissalDate", "2026-01-02T03:04")])
            #expect(asked.status == 200 && asked.body.contains(#"id="confirm-end""#), "\(asked.body)")
            #expect(try await context.api.call("GET", "/v1/apps/demo/live-activities/\(id)", key: send).body["state"] as? String == "active")
            let ended = try await browser.post(page + "/end", [("csrf", csrf), ("dismissalDate", "2026-01-02T03:04"), ("confirm", "yes")])
            #expect(ended.status == 200 && ended.body.contains(#"<dd id="activity-state">ended: ended from Herald</dd>"#), "\(ended.body)")
            #expect(!ended.body.contains(#"id="update-form""#), "no update form once ended")
            let end = self.server.aps(try await self.server.received(context, update, count: 2).last)
            #expect(end["event"] as? String == "end" && end["dismissal-date"] as? Int == 1_767_323_040, "\(end)")
            #expect((end["content-state"] as? [String: Any])?["score"] as? Int == 2, "the newest content state")

            // A stale page's update: refused by its code, nothing sent.
            let late = try await browser.post(page + "/update", [("csrf", csrf), ("contentState", #"{"score":9}"#)])
            #expect(late.status == 409 && late.body.contains("(<code>activity_ended</code>)"), "\(late.body)")
            #expect((try await context.control.call("GET", "/v1/devices/\(update)/inbox").body["notifications"] as? [Any])?.count == 2)
            let endedList = try await browser.get("/dashboard/apps/demo/live-activities?state=ended")
            #expect(endedList.body.contains(#"<tr data-activity="\#(id)">"#), "\(endedList.body)")
            #expect(try await browser.get("/dashboard/apps/demo/live-activities?state=active").body.contains(#"id="no-activities""#))
            #expect(try await browser.get("/dashboard/apps/demo/live-activities/nope").status == 404)
        }
    }

    @Test(
        "a Live Activity started from the dashboard with one of the app's channels (chosen from a list): updated by one broadcast on it, listed with the channel"
    )
    func liveActivityOnChannel() async throws {
        try await self.server.withServer { context in
            let (_, send) = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let made = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#)
            let channel = try #require(made.body["id"] as? String)
            let starter = try await self.server.pushToStartDevice(context, key: send, user: "ann")
            let page = try await browser.get("/dashboard/apps/demo/live-activities")
            #expect(page.body.contains(#"<option value="\#(channel)">channel \#(channel) (sandbox)</option>"#), "\(page.body)")
            let csrf = try #require(Browser.csrf(page.body))
            let started = try await browser.post(
                "/dashboard/apps/demo/live-activities",
                [
                    ("csrf", csrf), ("to", "user"), ("target", "ann"), ("attributesType", "GameAttributes"), ("attributes", "{}"),
                    ("contentState", #"{"score":0}"#), ("title", "Kick-off"), ("input", channel),
                ])
            #expect(started.status == 303, "\(started.body)")
            let activity = try self.location(started.headers)
            let start = self.server.aps(try await self.server.received(context, starter, count: 1).first)
            #expect(start["input-push-channel"] as? String == channel && start["input-push-token"] == nil, "\(start)")
            let updated = try await browser.post(activity + "/update", [("csrf", csrf), ("contentState", #"{"score":1}"#)])
            #expect(updated.status == 200 && updated.body.contains("as one broadcast on its channel"), "\(updated.body)")
            #expect(try await self.server.broadcastPaths(context) == ["/4/broadcasts/apps/com.example.app"], "one broadcast request")
            let inbox = try await self.server.received(context, starter, count: 2)
            #expect(inbox.last?["channelId"] as? String == channel && self.server.aps(inbox.last)["event"] as? String == "update")
            let listed = try await browser.get("/dashboard/apps/demo/live-activities")
            #expect(listed.body.contains(#"<td class="input">channel <code class="wrap">\#(channel)</code></td>"#), "\(listed.body)")
        }
    }
}

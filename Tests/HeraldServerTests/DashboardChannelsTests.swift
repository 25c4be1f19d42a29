// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

extension DashboardTests {
    @Test(
        "the channels page: made at the emulator and listed active, one APNs no longer holds listed as gone, a delete only once confirmed, the 10,000 limit refused with its code"
    )
    func channelsPage() async throws {
        try await self.server.withServer { context in
            _ = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let empty = try await browser.get("/dashboard/apps/demo/channels")
            #expect(empty.status == 200 && empty.body.contains(#"id="no-channels""#), "\(empty.body)")
            #expect(try await browser.get("/dashboard/apps/demo").body.contains(#"href="/dashboard/apps/demo/channels""#))
            let csrf = try #require(Browser.csrf(empty.body))

            let made = try await browser.post(
                "/dashboard/apps/demo/channels", [("csrf", csrf), ("environment", "sandbox"), ("messageStoragePolicy", "1")])
            #expect(made.status == 201 && made.body.contains(#"id="channel-notice""#), "\(made.body)")
            let id = try #require(try await self.server.emulatorChannels(context).first)
            // One APNs does not hold (deleted outside Herald): listed, and said to be gone.
            let stale = "AAAAAAAAAAAAAAAAAAAAAA=="
            #expect(
                try await context.server.store.createChannel(
                    StoredChannel(appID: "demo", environment: .development, channelID: stale, messageStoragePolicy: 0, createdAt: 1)))
            let page = try await browser.get("/dashboard/apps/demo/channels")
            let states = page.body.matches(of: /<tr data-channel="([^"]+)">.*?<td class="state">([^<]+)<\/td>/).map { "\($0.1)=\($0.2)" }
            #expect(states.sorted() == ["\(id)=active", "\(stale)=gone at APNs"].sorted(), "\(page.body)")

            // The first press asks; only the confirmation deletes (APNs's ChannelNotRegistered: forgotten here too).
            let asked = try await browser.post("/dashboard/apps/demo/channels/delete", [("csrf", csrf), ("channel", stale)])
            #expect(asked.status == 200 && asked.body.contains(#"id="confirm-delete""#), "\(asked.body)")
            let stillThere = try await context.server.store.channel(appID: "demo", environment: .development, channelID: stale)
            #expect(stillThere != nil)
            let deleted = try await browser.post("/dashboard/apps/demo/channels/delete", [("csrf", csrf), ("channel", stale), ("confirm", "yes")])
            #expect(deleted.status == 303, "\(deleted.body)")
            let gone = try await context.server.store.channel(appID: "demo", environment: .development, channelID: stale)
            #expect(gone == nil)
            // Without the session's CSRF token nothing is deleted.
            let forged = try await browser.post("/dashboard/apps/demo/channels/delete", [("channel", id), ("confirm", "yes")])
            let kept = try await self.server.emulatorChannels(context)
            #expect(forged.status == 403 && kept == [id])

            // Production's 10,000 taken: refused here, by its code, without asking APNs.
            for index in 0..<StoredChannel.maximumPerApp {
                let stored = StoredChannel(
                    appID: "demo", environment: .production, channelID: "c\(index)", messageStoragePolicy: 0, createdAt: Int64(index))
                #expect(try await context.server.store.createChannel(stored))
            }
            let refused = try await browser.post(
                "/dashboard/apps/demo/channels", [("csrf", csrf), ("environment", "production"), ("messageStoragePolicy", "1")])
            #expect(refused.status == 422 && refused.body.contains("(<code>channel_limit_reached</code>)"), "\(refused.body.prefix(2000))")
            #expect(refused.body.contains(#"<option value="production" selected>"#), "the form keeps its environment")
            #expect(try await self.server.emulatorChannels(context, environment: "production").isEmpty)
        }
    }

    @Test(
        "the send page broadcasts on a channel as audience channel does: event, content state and dates in the payload, one notification recorded; a missing channel or content state refused in words"
    )
    func sendPageBroadcast() async throws {
        try await self.server.withServer { context in
            let (_, send) = try await self.server.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard")
            defer { directory.remove() }
            let browser = Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let made = try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#)
            let id = try #require(made.body["id"] as? String)
            let token = try await self.server.virtualDevice(context, kind: "liveactivity")
            #expect(try await context.control.call("POST", "/v1/devices/\(token)/channels", json: #"{"channelId":"\#(id)"}"#).status == 200)

            let page = try await browser.get("/dashboard/apps/demo/send?to=channel&channel=\(self.server.pathID(id))")
            #expect(page.body.contains(#"<option value="\#(id)" selected>"#), "the link's channel is chosen: \(page.body)")
            let csrf = try #require(Browser.csrf(page.body))
            let base = [("csrf", csrf), ("to", "channel"), ("action", "send")]
            let unnamed = try await browser.post("/dashboard/apps/demo/send", base + [("contentState", #"{"score":4}"#)])
            #expect(unnamed.status == 422 && unnamed.body.contains("channels to broadcast on"), "\(unnamed.body)")
            let notObject = try await browser.post("/dashboard/apps/demo/send", base + [("channel", id), ("contentState", "[4]")])
            #expect(notObject.status == 422 && notObject.body.contains("must be a JSON object"), "\(notObject.body)")

            let sent = try await browser.post(
                "/dashboard/apps/demo/send",
                base + [
                    ("channel", self.server.pathID(id)), ("event", "end"), ("contentState", #"{"score":4}"#), ("dismissalDate", "2030-01-02T03:04"),
                    ("title", "Full time"), ("priority", "10"),
                ])
            #expect(sent.status == 303, "\(sent.body)")
            let location = try #require(sent.headers.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("location:") })
            let shown = try await browser.get(String(location.dropFirst("location:".count)).trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(shown.body.contains(#"id="broadcast-note""#) && !shown.body.contains(#"id="funnel""#), "\(shown.body)")
            #expect(shown.body.contains(#"<a href="/dashboard/apps/demo/channels"><code>"#), "the delivery links to the channels: \(shown.body)")
            let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
            let received = try #require((inbox.body["notifications"] as? [[String: Any]])?.first)
            #expect((inbox.body["notifications"] as? [[String: Any]])?.count == 1)
            #expect(received["channelId"] as? String == id && received["priority"] as? Int == 10, "\(received)")
            let aps = try #require((received["payload"] as? [String: Any])?["aps"] as? [String: Any])
            #expect(aps["event"] as? String == "end" && aps["dismissal-date"] as? Int == 1_893_553_440, "\(aps)")
            #expect((aps["content-state"] as? [String: Any])?["score"] as? Int == 4 && aps["timestamp"] is Int, "\(aps)")
            #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Full time", "\(aps)")
            let listed = try await context.api.call("GET", "/v1/apps/demo/notifications", key: send)
            #expect((listed.body["notifications"] as? [[String: Any]])?.count == 1, "one notification: \(listed.body)")
        }
    }
}

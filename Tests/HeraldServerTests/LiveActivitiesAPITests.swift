// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Testing

/// `/v1/apps/{app}/live-activities`: Live Activities started by push-to-start on the built-in
/// emulator's virtual devices, updated through update tokens or a broadcast channel, ended.
extension ServerTests {
    /// A virtual device's push-to-start token, registered for `user` (by the app's backend).
    func pushToStartDevice(_ context: Context, key: String, user: String, type: String = "GameAttributes") async throws -> String {
        let token = try await self.virtualDevice(context, kind: "push-to-start")
        let registered = try await context.api.call(
            "PUT", "/v1/apps/demo/devices/\(token)", key: key,
            json: #"{"environment":"sandbox","kind":"push-to-start","attributesType":"\#(type)","userId":"\#(user)"}"#)
        #expect(registered.status == 200, "\(registered)")
        return token
    }

    /// The `aps` of the device's notifications, once it holds `count` of them.
    func received(_ context: Context, _ token: String, count: Int) async throws -> [[String: Any]] {
        let inbox = try await self.eventually(
            "\(count) notifications at \(token.prefix(8))", { try await context.control.call("GET", "/v1/devices/\(token)/inbox").body },
            until: { ($0["notifications"] as? [Any])?.count ?? 0 >= count })
        return (inbox["notifications"] as? [[String: Any]] ?? []).map { $0 }
    }

    func aps(_ notification: [String: Any]?) -> [String: Any] {
        ((notification?["payload"] as? [String: Any])?["aps"] as? [String: Any]) ?? [:]
    }

    func broadcastPaths(_ context: Context) async throws -> [String] {
        let requests = try await context.control.call("GET", "/v1/requests?limit=100")
        return (requests.body["requests"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }.filter { $0.hasPrefix("/4/broadcasts/") }
    }

    @Test(
        "live activity with input-push-channel: started by push-to-start, updated by one broadcast, ended; then nothing more is sent",
        arguments: StoreDriver.enabled)
    func liveActivityChannel(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (_, send) = try await self.setUp(context)
            let channel = try #require(
                try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#).body["id"] as? String)
            let starter = try await self.pushToStartDevice(context, key: send, user: "ann")
            let started = try await context.api.call(
                "POST", "/v1/apps/demo/live-activities", key: send,
                json: """
                    {"audience":{"users":["ann"]},"attributesType":"GameAttributes","attributes":{"home":"A","away":"B"},
                    "contentState":{"score":0},"alert":{"title":"Kick-off","body":"A vs B"},"inputPushChannel":"\(channel)"}
                    """)
            #expect(started.status == 201, "\(started)")
            let id = try #require(started.body["id"] as? String)
            #expect(started.body["state"] as? String == "active" && started.body["channel"] as? String == channel)
            let second = try await context.api.call(
                "POST", "/v1/apps/demo/live-activities", key: send,
                json:
                    #"{"audience":{"users":["ann"]},"attributesType":"GameAttributes","attributes":{},"contentState":{},"alert":"Go","inputPushChannel":"\#(channel)"}"#
            )
            #expect(second.status == 409 && self.code(second) == "channel_in_use", "one active activity per channel: \(second)")
            #expect(started.body["environment"] as? String == "sandbox" && started.body["updates"] as? Int == 0)
            // Its channel cannot go from under it: the activity would show for ever, never updated nor ended.
            let busy = try await context.api.call("DELETE", "/v1/apps/demo/channels/\(self.pathID(channel))", key: send)
            #expect(busy.status == 409 && self.code(busy) == "channel_in_use", "\(busy)")

            let start = self.aps(try await self.received(context, starter, count: 1).first)
            #expect(start["event"] as? String == "start" && start["attributes-type"] as? String == "GameAttributes")
            #expect(start["input-push-channel"] as? String == channel && start["input-push-token"] == nil)
            let attributes = start["attributes"] as? [String: Any]
            #expect(attributes?["heraldActivityId"] as? String == id && attributes?["home"] as? String == "A", "\(start)")
            #expect((start["alert"] as? [String: Any])?["title"] as? String == "Kick-off")
            let device = try await context.control.call("GET", "/v1/devices/\(starter)")
            #expect((device.body["channels"] as? [String]) == [channel], "the started activity joined the channel: \(device.body)")

            #expect(try await self.broadcastPaths(context).isEmpty)
            let updated = try await context.api.call(
                "PATCH", "/v1/apps/demo/live-activities/\(id)", key: send, json: #"{"contentState":{"score":1},"relevanceScore":50}"#)
            #expect(updated.status == 200 && updated.body["updates"] as? Int == 1, "\(updated)")
            #expect(try await self.broadcastPaths(context) == ["/4/broadcasts/apps/com.example.app"], "one broadcast request")
            let inbox = try await self.received(context, starter, count: 2)
            #expect(inbox.last?["channelId"] as? String == channel && inbox.last?["priority"] as? Int == 5, "by broadcast, priority 5")
            let update = self.aps(inbox.last)
            #expect(update["event"] as? String == "update" && (update["content-state"] as? [String: Any])?["score"] as? Int == 1)
            #expect(update["relevance-score"] as? Int == 50 && update["timestamp"] as? Int != nil)
            let recorded = try await context.api.call(
                "GET", "/v1/apps/demo/notifications/\(try #require(updated.body["lastNotificationId"] as? String))", key: send)
            #expect((recorded.body["counts"] as? [String: Int])?["sent"] == 1, "recorded as one broadcast: \(recorded.body)")

            let dismissal = Int(Date().timeIntervalSince1970) + 60
            let ended = try await context.api.call("DELETE", "/v1/apps/demo/live-activities/\(id)?dismissalDate=\(dismissal)", key: send)
            #expect(ended.status == 200 && ended.body["state"] as? String == "ended" && ended.body["endReason"] as? String == "ended", "\(ended)")
            let end = self.aps(try await self.received(context, starter, count: 3).last)
            #expect(end["event"] as? String == "end" && end["dismissal-date"] as? Int == dismissal)
            #expect((end["content-state"] as? [String: Any])?["score"] as? Int == 1, "the newest content state")
            #expect(try await self.broadcastPaths(context).count == 2)

            let refused = try await context.api.call(
                "PATCH", "/v1/apps/demo/live-activities/\(id)", key: send, json: #"{"contentState":{"score":2}}"#)
            #expect(refused.status == 409 && self.code(refused) == "activity_ended", "\(refused)")
            let again = try await context.api.call("DELETE", "/v1/apps/demo/live-activities/\(id)", key: send)
            #expect(again.status == 409 && self.code(again) == "activity_ended")
            #expect(try await self.broadcastPaths(context).count == 2, "nothing more sent")
            #expect(try await context.control.call("GET", "/v1/devices/\(starter)/inbox").body["notifications"] as? [Any] != nil)
            #expect((try await context.control.call("GET", "/v1/devices/\(starter)/inbox").body["notifications"] as? [Any])?.count == 3)
            #expect(
                try await context.api.call("DELETE", "/v1/apps/demo/channels/\(self.pathID(channel))", key: send).status == 204, "ended: free to go")

            let listed = try await context.api.call("GET", "/v1/apps/demo/live-activities", key: send)
            let first = (listed.body["liveActivities"] as? [[String: Any]])?.first
            #expect(first?["id"] as? String == id && first?["state"] as? String == "ended", "\(listed)")
            #expect(
                (try await context.api.call("GET", "/v1/apps/demo/live-activities?state=active", key: send).body["liveActivities"] as? [Any])?.isEmpty
                    == true)
        }
    }

    @Test("a start for listed tokens keeps how many there were, not the tokens (no user's erasure would reach them)", arguments: StoreDriver.enabled)
    func liveActivityTokenList(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (_, send) = try await self.setUp(context)
            let starter = try await self.pushToStartDevice(context, key: send, user: "ann")
            let started = try await context.api.call(
                "POST", "/v1/apps/demo/live-activities", key: send,
                json:
                    #"{"audience":{"tokens":["\#(starter)"]},"attributesType":"GameAttributes","attributes":{},"contentState":{},"alert":"Go","inputPushToken":true}"#
            )
            #expect(started.status == 201, "\(started)")
            let id = try #require(started.body["id"] as? String)
            let stored = try #require(try await context.server.store.liveActivity(appID: "demo", id: id))
            #expect(!stored.audienceJSON.contains(starter) && stored.audienceJSON.contains("tokenCount"), "\(stored.audienceJSON)")
        }
    }

    @Test(
        "live activity with input-push-token: updates go to the update token registered with its id; a token moved to another user ends it",
        arguments: StoreDriver.enabled)
    func liveActivityToken(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (_, send) = try await self.setUp(context)
            let starter = try await self.pushToStartDevice(context, key: send, user: "ann")
            _ = try await self.pushToStartDevice(context, key: send, user: "bob")
            let otherType = try await self.pushToStartDevice(context, key: send, user: "ann", type: "OrderAttributes")
            let started = try await context.api.call(
                "POST", "/v1/apps/demo/live-activities", key: send,
                json:
                    #"{"audience":{"users":["ann"]},"attributesType":"GameAttributes","attributes":{},"contentState":{"score":0},"alert":"Go","inputPushToken":true}"#
            )
            #expect(started.status == 201 && started.body["tokens"] as? Int == 0 && started.body["channel"] is NSNull, "\(started)")
            let id = try #require(started.body["id"] as? String)
            let startStatus = try await self.settled(context, key: send, id: try #require(started.body["startNotificationId"] as? String))
            let startTokens = (startStatus["deliveries"] as? [[String: Any]])?.compactMap { $0["token"] as? String }
            #expect(startTokens == [starter], "ann's push-to-start token of that attributes type only, not \(otherType.prefix(8)) nor bob's")
            let start = self.aps(try await self.received(context, starter, count: 1).first)
            #expect(start["input-push-token"] as? Int == 1 && start["alert"] as? String == "Go")
            // What the app does: the started activity's update token, registered with the id from its attributes.
            let heraldID = try #require((start["attributes"] as? [String: Any])?["heraldActivityId"] as? String)
            #expect(heraldID == id)
            let update = try await self.virtualDevice(context, kind: "liveactivity")
            let other = try await self.virtualDevice(context, kind: "liveactivity")
            for (token, user) in [(update, "ann"), (other, "bob")] {
                let registered = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: send,
                    json: #"{"environment":"sandbox","kind":"liveactivity","activityId":"\#(heraldID)","userId":"\#(user)"}"#)
                #expect(registered.status == 200, "\(registered)")
            }
            #expect(try await context.api.call("GET", "/v1/apps/demo/live-activities/\(id)", key: send).body["tokens"] as? Int == 1, "ann's only")

            let updated = try await context.api.call(
                "PATCH", "/v1/apps/demo/live-activities/\(id)", key: send,
                json: #"{"contentState":{"score":2},"priority":10,"alert":{"title":"Goal"}}"#)
            #expect(updated.status == 200 && updated.body["updates"] as? Int == 1, "\(updated)")
            let status = try await self.settled(context, key: send, id: try #require(updated.body["lastNotificationId"] as? String))
            #expect((status["deliveries"] as? [[String: Any]])?.compactMap { $0["token"] as? String } == [update])
            let received = try await self.received(context, update, count: 1)
            #expect(received.first?["priority"] as? Int == 10 && received.first?["topic"] as? String == "com.example.app.push-type.liveactivity")
            let aps = self.aps(received.first)
            #expect(aps["event"] as? String == "update" && (aps["content-state"] as? [String: Any])?["score"] as? Int == 2)
            #expect((try await context.control.call("GET", "/v1/devices/\(other)/inbox").body["notifications"] as? [Any])?.isEmpty == true)

            // Ann logs out on that device: its tokens move to no user, and her activity ends there.
            let moved = try await context.api.call(
                "PUT", "/v1/apps/demo/devices/\(update)", key: send,
                json: #"{"environment":"sandbox","kind":"liveactivity","activityId":"\#(heraldID)"}"#)
            #expect(moved.status == 200)
            let read = try await context.api.call("GET", "/v1/apps/demo/live-activities/\(id)", key: send)
            #expect(read.body["state"] as? String == "ended" && read.body["endReason"] as? String == "user_changed", "\(read)")
            let refused = try await context.api.call(
                "PATCH", "/v1/apps/demo/live-activities/\(id)", key: send, json: #"{"contentState":{"score":3}}"#)
            #expect(refused.status == 409 && self.code(refused) == "activity_ended")
            // The logged-out phone is told to remove it at once: it would go on showing it otherwise.
            let removed = self.aps(try await self.received(context, update, count: 2).last)
            #expect(removed["event"] as? String == "end" && removed["dismissal-date"] as? Int != nil, "\(removed)")
            #expect((removed["content-state"] as? [String: Any])?["score"] as? Int == 2, "the newest content state")
        }
    }

    @Test("live activity: ended by Herald 8 hours after its start, as the system ends it; nothing is sent after", arguments: StoreDriver.enabled)
    func liveActivityExpiry(driver: StoreDriver) async throws {
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.withServer(driver: driver, clock: clock) { context in
            let (_, send) = try await self.setUp(context)
            _ = try await self.pushToStartDevice(context, key: send, user: "ann")
            let started = try await context.api.call(
                "POST", "/v1/apps/demo/live-activities", key: send,
                json:
                    #"{"audience":{"users":["ann"]},"attributesType":"GameAttributes","attributes":{},"contentState":{},"alert":"Go","inputPushToken":true}"#
            )
            let id = try #require(started.body["id"] as? String)
            let startedAt = try #require(started.body["startedAt"] as? Int)
            clock.advance(seconds: 8 * 3600 - 1)
            #expect(try await context.api.call("GET", "/v1/apps/demo/live-activities/\(id)", key: send).body["state"] as? String == "active")
            clock.advance(seconds: 1)
            let read = try await context.api.call("GET", "/v1/apps/demo/live-activities/\(id)", key: send)
            #expect(read.body["state"] as? String == "ended" && read.body["endReason"] as? String == "expired", "\(read)")
            #expect(read.body["endedAt"] as? Int == startedAt + 8 * 3_600_000)
            let refused = try await context.api.call("PATCH", "/v1/apps/demo/live-activities/\(id)", key: send, json: #"{"contentState":{}}"#)
            #expect(refused.status == 409 && self.code(refused) == "activity_ended")
        }
    }

    @Test("live activities: a register key is refused; every bad input has its code; an unknown activity is 404", arguments: StoreDriver.enabled)
    func liveActivityRefusals(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (register, send) = try await self.setUp(context)
            _ = try await self.pushToStartDevice(context, key: send, user: "ann")
            let channel = try #require(
                try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#).body["id"] as? String)
            let valid = #""attributesType":"GameAttributes","attributes":{},"contentState":{},"alert":"Go""#
            let good = #"{"audience":{"users":["ann"]},\#(valid),"inputPushToken":true}"#
            let made = try await context.api.call("POST", "/v1/apps/demo/live-activities", key: send, json: good)
            let id = try #require(made.body["id"] as? String)

            for (method, path, json) in [
                ("POST", "/v1/apps/demo/live-activities", good), ("GET", "/v1/apps/demo/live-activities", nil),
                ("GET", "/v1/apps/demo/live-activities/\(id)", nil), ("PATCH", "/v1/apps/demo/live-activities/\(id)", #"{"contentState":{}}"#),
                ("DELETE", "/v1/apps/demo/live-activities/\(id)", nil),
            ] as [(String, String, String?)] {
                let answer = try await context.api.call(method, path, key: register, json: json)
                #expect(answer.status == 403 && self.code(answer) == "forbidden", "\(method) \(path): \(answer)")
            }
            #expect(try await context.api.call("GET", "/v1/apps/demo/live-activities/\(id)", key: send).body["state"] as? String == "active")

            let starts: [(String, Int, String)] = [
                (#"{\#(valid),"inputPushToken":true}"#, 400, "missing_audience"),
                (#"{"audience":"all",\#(valid),"inputPushToken":true}"#, 400, "bad_audience"),
                (#"{"audience":{"activityId":"x"},\#(valid),"inputPushToken":true}"#, 400, "bad_audience"),
                (
                    #"{"audience":{"users":["ann"]},"attributes":{},"contentState":{},"alert":"Go","inputPushToken":true}"#, 400,
                    "missing_attributesType"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"","attributes":{},"contentState":{},"alert":"Go","inputPushToken":true}"#, 400,
                    "bad_attributesType"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"G","contentState":{},"alert":"Go","inputPushToken":true}"#, 400,
                    "missing_attributes"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"G","attributes":[],"contentState":{},"alert":"Go","inputPushToken":true}"#, 400,
                    "bad_attributes"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"G","attributes":{"heraldActivityId":"x"},"contentState":{},"alert":"Go","inputPushToken":true}"#,
                    400, "bad_attributes"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"G","attributes":{},"alert":"Go","inputPushToken":true}"#, 400,
                    "missing_contentState"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"G","attributes":{},"contentState":1,"alert":"Go","inputPushToken":true}"#, 400,
                    "bad_contentState"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"G","attributes":{},"contentState":{},"inputPushToken":true}"#, 400,
                    "missing_alert"
                ),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"G","attributes":{},"contentState":{},"alert":3,"inputPushToken":true}"#, 400,
                    "bad_alert"
                ),
                (#"{"audience":{"users":["ann"]},\#(valid)}"#, 400, "missing_input_push"),
                (#"{"audience":{"users":["ann"]},\#(valid),"inputPushToken":true,"inputPushChannel":"\#(channel)"}"#, 400, "bad_input_push"),
                (#"{"audience":{"users":["ann"]},\#(valid),"inputPushChannel":"QUJDRA=="}"#, 400, "unknown_channel"),
                (#"{"audience":{"users":["ann"]},\#(valid),"inputPushChannel":"a.b"}"#, 400, "bad_channel_id"),
                (#"{"audience":{"users":["ann"]},\#(valid),"inputPushChannel":"\#(channel)","environment":"production"}"#, 400, "bad_environment"),
                (#"{"audience":{"users":["ann"]},\#(valid),"inputPushToken":true,"staleDate":1}"#, 400, "bad_staleDate"),
                (#"{"audience":{"users":["ann"]},\#(valid),"inputPushToken":true,"relevanceScore":-1}"#, 400, "bad_relevanceScore"),
                (#"{"audience":{"users":["ann"]},\#(valid),"inputPushToken":true,"colour":"red"}"#, 400, "unknown_field"),
                (#"{"audience":{"users":["zed"]},\#(valid),"inputPushToken":true}"#, 422, "no_push_to_start_tokens"),
                (
                    #"{"audience":{"users":["ann"]},"attributesType":"OrderAttributes","attributes":{},"contentState":{},"alert":"Go","inputPushToken":true}"#,
                    422, "no_push_to_start_tokens"
                ),
            ]
            for (json, status, expected) in starts {
                let answer = try await context.api.call("POST", "/v1/apps/demo/live-activities", key: send, json: json)
                #expect(answer.status == status && self.code(answer) == expected, "\(json): \(answer)")
            }
            let updates: [(String, String, Int, String)] = [
                (id, "{}", 400, "missing_contentState"), (id, #"{"contentState":[]}"#, 400, "bad_contentState"),
                (id, #"{"contentState":{},"priority":1}"#, 422, "bad_priority"), (id, #"{"contentState":{},"staleDate":-5}"#, 400, "bad_staleDate"),
                (id, #"{"contentState":{},"alert":[]}"#, 400, "bad_alert"), ("nope", #"{"contentState":{}}"#, 404, "activity_not_found"),
                (id, #"{"contentState":{},"alert":{"foo":1}}"#, 400, "bad_alert"),
                (id, #"{"contentState":{},"alert":{"sound":"a"}}"#, 400, "bad_alert"),
                (id, #"{"contentState":{},"alert":{"title":"Goal","sound":3}}"#, 400, "bad_alert"),
            ]
            for (target, json, status, expected) in updates {
                let answer = try await context.api.call("PATCH", "/v1/apps/demo/live-activities/\(target)", key: send, json: json)
                #expect(answer.status == status && self.code(answer) == expected, "\(json): \(answer)")
            }
            let badDismissal = try await context.api.call("DELETE", "/v1/apps/demo/live-activities/\(id)?dismissalDate=soon", key: send)
            #expect(badDismissal.status == 400 && self.code(badDismissal) == "bad_dismissalDate")
            let unknown = try await context.api.call("GET", "/v1/apps/demo/live-activities/nope", key: send)
            #expect(unknown.status == 404 && self.code(unknown) == "activity_not_found")
            #expect(self.code(try await context.api.call("DELETE", "/v1/apps/demo/live-activities/nope", key: send)) == "activity_not_found")
            #expect(self.code(try await context.api.call("GET", "/v1/apps/demo/live-activities?state=gone", key: send)) == "bad_state")
            #expect(
                try await context.api.call("GET", "/v1/apps/demo/live-activities/\(id)", key: send).body["updates"] as? Int == 0, "nothing changed")
            let kept = try await context.api.call("GET", "/v1/apps/demo/live-activities", key: send)
            #expect((kept.body["liveActivities"] as? [Any])?.count == 1, "a start refused keeps no activity: \(kept)")
        }
    }

    /// Requests sent at once: each one's status and error code.
    func concurrently(_ context: Context, key: String, _ requests: [(String, String, String?)]) async throws -> [(Int, String?)] {
        let api = context.api
        return try await withThrowingTaskGroup(of: (Int, Int, String?).self) { group in
            for (index, (method, path, json)) in requests.enumerated() {
                group.addTask {
                    let answer = try await api.call(method, path, key: key, json: json)
                    return (index, answer.status, (answer.body["error"] as? [String: Any])?["code"] as? String)
                }
            }
            var answers: [(Int, Int, String?)] = []
            for try await answer in group { answers.append(answer) }
            return answers.sorted { $0.0 < $1.0 }.map { ($0.1, $0.2) }
        }
    }

    @Test(
        "live activity: of concurrent DELETEs one ends it (200) and sends the one end, the others answer 409; a PATCH racing a DELETE sends before the end or not at all",
        arguments: StoreDriver.enabled)
    func liveActivityConcurrentEnds(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let (_, send) = try await self.setUp(context)
            let starter = try await self.pushToStartDevice(context, key: send, user: "ann")
            var sentBroadcasts = 0
            for round in 0..<2 {
                let channel = try #require(
                    try await context.api.call("POST", "/v1/apps/demo/channels", key: send, json: #"{"environment":"sandbox"}"#).body["id"] as? String
                )
                let started = try await context.api.call(
                    "POST", "/v1/apps/demo/live-activities", key: send,
                    json: """
                        {"audience":{"users":["ann"]},"attributesType":"GameAttributes","attributes":{},"contentState":{"score":0},
                        "alert":"Go","inputPushChannel":"\(channel)"}
                        """)
                #expect(started.status == 201, "\(started)")
                let id = try #require(started.body["id"] as? String)
                let path = "/v1/apps/demo/live-activities/\(id)"
                // Started on the device (it joined the channel) before the race.
                _ = try await self.received(context, starter, count: round + 1 + sentBroadcasts)
                if round == 0 {
                    let answers = try await self.concurrently(context, key: send, Array(repeating: ("DELETE", path, nil), count: 4))
                    #expect(answers.filter { $0.0 == 200 }.count == 1, "one end: \(answers)")
                    #expect(answers.filter { $0 == (409, "activity_ended") }.count == 3, "\(answers)")
                    sentBroadcasts += 1
                    #expect(try await self.broadcastPaths(context).count == sentBroadcasts, "one end sent")
                    let inbox = try await self.received(context, starter, count: 2)
                    #expect(inbox.count == 2 && self.aps(inbox.last)["event"] as? String == "end", "\(inbox)")
                } else {
                    let answers = try await self.concurrently(
                        context, key: send, [("PATCH", path, #"{"contentState":{"score":1}}"#), ("DELETE", path, nil)])
                    #expect(answers[1].0 == 200, "\(answers)")
                    let updated = answers[0].0 == 200
                    #expect(updated || answers[0] == (409, "activity_ended"), "\(answers)")
                    sentBroadcasts += updated ? 2 : 1
                    #expect(try await self.broadcastPaths(context).count == sentBroadcasts)
                    let inbox = try await self.received(context, starter, count: 2 + sentBroadcasts)
                    #expect(inbox.count == 2 + sentBroadcasts, "two starts and the broadcasts")
                    let ends = inbox.map { self.aps($0) }.filter { $0["event"] as? String == "end" }
                    #expect(ends.count == 2, "one end per activity")
                    let end = ends.last ?? [:]
                    #expect(
                        (end["content-state"] as? [String: Any])?["score"] as? Int == (updated ? 1 : 0), "the state of the update claimed before it")
                    let read = try await context.api.call("GET", path, key: send)
                    #expect(read.body["state"] as? String == "ended" && read.body["updates"] as? Int == (updated ? 1 : 0), "\(read)")
                }
            }
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldTesting
import Testing
import WebPush
import WebPushEmulator

/// Store-and-forward while a virtual browser is off line, and the control API over HTTP.
@Suite(.heavy) struct DeliveryTests {
    @Test("offline: messages wait, TTL 0 is dropped, Topic replaces, order is kept")
    func storeAndForward() async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(.mozilla)
            #expect(fixture.emulator.setOnline(browser.id, false))
            #expect(try await fixture.push("one", to: browser).status == 201)
            #expect(try await fixture.push("dropped", to: browser, [("TTL", "0")]).status == 201)
            #expect(try await fixture.push("score 1-0", to: browser, [("Topic", "score")]).status == 201)
            #expect(try await fixture.push("two", to: browser).status == 201)
            #expect(try await fixture.push("score 2-0", to: browser, [("Topic", "score")]).status == 201)
            let waiting = try #require(fixture.emulator.inbox(browser.id))
            #expect(waiting.messages.isEmpty)
            #expect(waiting.waiting == 3)
            #expect(!waiting.online)

            #expect(fixture.emulator.setOnline(browser.id, true))
            let inbox = try #require(fixture.emulator.inbox(browser.id))
            #expect(inbox.messages.map(\.text) == ["one", "two", "score 2-0"])
            #expect(inbox.waiting == 0)
            let counters = fixture.emulator.counters
            #expect(counters.accepted == 5)
            #expect(counters.dropped == 2)
            #expect(counters.delivered == 3)
        }
    }

    @Test("a waiting message whose TTL runs out is not delivered")
    func expiry() async throws {
        let clock = WebPushEmulatorClock.manual(startingAt: 1_800_000_000_000)
        try await withFixture(clock: clock) { fixture in
            let browser = try fixture.browser(.apple)
            fixture.emulator.setOnline(browser.id, false)
            #expect(try await fixture.push("short", to: browser, [("TTL", "30")]).status == 201)
            #expect(try await fixture.push("long", to: browser, [("TTL", "3600")]).status == 201)
            clock.advance(seconds: 31)
            fixture.emulator.setOnline(browser.id, true)
            #expect(fixture.emulator.inbox(browser.id)?.messages.map(\.text) == ["long"])
        }
    }

    @Test("browsers, inbox, offline/online, faults, counters and reset over HTTP")
    func controlAPI() async throws {
        try await withFixture { fixture in
            let port = fixture.port
            let key = fixture.vapid.publicKeyBase64URL
            let made = try await RawHTTPClient.json(
                port: port, "POST", "/emulator/browsers", #"{"personality":"apple","applicationServerKey":"\#(key)"}"#
            )
            #expect(made.status == 200, "\(made.body)")
            let id = try #require(made.json?["id"]?.stringValue)
            let endpoint = try #require(made.json?["subscription"]?["endpoint"]?.stringValue)
            #expect(endpoint.hasPrefix("http://127.0.0.1:\(port)/apple/"))
            let browser = WebPushBrowserSubscription(
                id: id, personality: .apple, endpoint: endpoint,
                p256dh: try #require(made.json?["subscription"]?["keys"]?["p256dh"]?.stringValue),
                auth: try #require(made.json?["subscription"]?["keys"]?["auth"]?.stringValue)
            )
            #expect(try await fixture.push("over http", to: browser).status == 201)
            let inbox = try await RawHTTPClient.json(port: port, "GET", "/emulator/browsers/\(id)")
            #expect(inbox.json?["messages"]?.arrayValue?.first?["text"]?.stringValue == "over http")
            #expect(inbox.json?["online"]?.boolValue == true)
            for field in ["id", "ttl", "urgency", "topic", "receivedAt"] {
                #expect(inbox.json?["messages"]?.arrayValue?.first?[field] != nil)
            }

            let offline = try await RawHTTPClient.json(port: port, "POST", "/emulator/browsers/\(id)/offline")
            #expect(offline.json?["online"]?.boolValue == false)
            #expect(try await fixture.push("later", to: browser).status == 201)
            let online = try await RawHTTPClient.json(port: port, "POST", "/emulator/browsers/\(id)/online")
            #expect(online.json?["messages"]?.arrayValue?.count == 2)

            let fault = try await RawHTTPClient.json(port: port, "POST", "/emulator/faults", #"{"status":503,"retryAfter":3,"count":1}"#)
            #expect(fault.json?["queued"]?.intValue == 1)
            let unavailable = try await fixture.push("x", to: browser)
            #expect(unavailable.status == 503 && unavailable.reason == "ServiceUnavailable" && unavailable.headers["retry-after"] == "3")

            let counters = try await RawHTTPClient.json(port: port, "GET", "/emulator/counters")
            #expect(counters.json?["accepted"]?.intValue == 2)
            #expect(counters.json?["delivered"]?.intValue == 2)
            #expect(counters.json?["refused"]?["fault503"]?.intValue == 1)

            let deleted = try await RawHTTPClient.json(port: port, "DELETE", "/emulator/browsers/\(id)")
            #expect(deleted.json?["subscribed"]?.boolValue == false)
            #expect(try await fixture.push("gone", to: browser).status == 410)

            let reset = try await RawHTTPClient.json(port: port, "POST", "/emulator/reset")
            #expect(reset.status == 200)
            #expect(try await RawHTTPClient.json(port: port, "GET", "/emulator/browsers/\(id)").status == 404)
            #expect(try await fixture.push("forgotten", to: browser).status == 404)
            #expect(fixture.emulator.counters.accepted == 0)

            let bad = try await RawHTTPClient.json(port: port, "POST", "/emulator/browsers", #"{"personality":"opera"}"#)
            #expect(bad.status == 400)
            let badKey = try await RawHTTPClient.json(
                port: port, "POST", "/emulator/browsers", #"{"personality":"fcm","applicationServerKey":"AAAA"}"#
            )
            #expect(badKey.status == 400)
        }
    }

    @Test("POST browsers with count makes that many subscriptions, each its own keys, each pushable")
    func browsersInBulk() async throws {
        try await withFixture { fixture in
            let port = fixture.port
            let key = fixture.vapid.publicKeyBase64URL
            let made = try await RawHTTPClient.json(
                port: port, "POST", "/emulator/browsers", #"{"personality":"fcm","applicationServerKey":"\#(key)","count":3}"#
            )
            #expect(made.status == 200, "\(made.body)")
            let items = try #require(made.json?["browsers"]?.arrayValue)
            #expect(items.count == 3)
            var browsers: [WebPushBrowserSubscription] = []
            for item in items {
                #expect(item["personality"]?.stringValue == "fcm")
                browsers.append(
                    WebPushBrowserSubscription(
                        id: try #require(item["id"]?.stringValue), personality: .fcm,
                        endpoint: try #require(item["subscription"]?["endpoint"]?.stringValue),
                        p256dh: try #require(item["subscription"]?["keys"]?["p256dh"]?.stringValue),
                        auth: try #require(item["subscription"]?["keys"]?["auth"]?.stringValue)
                    ))
            }
            #expect(Set(browsers.map(\.id)).count == 3)
            #expect(Set(browsers.map(\.endpoint)).count == 3)
            #expect(Set(browsers.map(\.p256dh)).count == 3)
            #expect(browsers.allSatisfy { $0.endpoint.hasPrefix("http://127.0.0.1:\(port)/fcm/send/") })
            for (index, browser) in browsers.enumerated() {
                #expect(try await fixture.push("message \(index)", to: browser).status == 201)
                #expect(fixture.emulator.inbox(browser.id)?.messages.map(\.text) == ["message \(index)"])
            }

            for count in ["0", "10001", "\"3\""] {
                let refused = try await RawHTTPClient.json(
                    port: port, "POST", "/emulator/browsers", #"{"personality":"fcm","applicationServerKey":"\#(key)","count":\#(count)}"#
                )
                #expect(refused.status == 400, "count \(count)")
            }
            // An Apple subscription still needs a key, in bulk too.
            let keyless = try await RawHTTPClient.json(port: port, "POST", "/emulator/browsers", #"{"personality":"apple","count":2}"#)
            #expect(keyless.status == 400)
        }
    }

    @Test("the event stream reports arrivals, failures and refusals")
    func events() async throws {
        try await withFixture { fixture in
            let browser = try fixture.browser(.fcm)
            let events = try await EventStreamClient.open(port: fixture.port, path: "/emulator/events")
            defer { events.close() }
            try await withHangGuard {
                #expect(try await fixture.push("streamed", to: browser).status == 201)
                var seen: [WebPushEvent] = []
                while seen.last?.kind != .delivered, let data = await events.next() { seen.append(try WebPushEvent(json: data)) }
                #expect(seen.map(\.kind) == [.accepted, .delivered])
                #expect(seen.last?.text == "streamed")
                #expect(seen.last?.browserID == browser.id)

                #expect(try await fixture.push("no ttl", to: browser, [("TTL", nil)]).status == 400)
                let refused = try WebPushEvent(json: try #require(await events.next()))
                #expect(refused.kind == .refused && refused.reason == "missingTTL" && refused.code == 400)
            }
        }
        // Stopping the emulator ends open streams.
    }

    @Test("an open event stream does not hold up shutdown()")
    func shutdownWithOpenStream() async throws {
        let events = try await withFixture { fixture in
            try await EventStreamClient.open(port: fixture.port, path: "/emulator/events")
        }
        #expect(await events.next() == nil)
        events.close()
    }
}

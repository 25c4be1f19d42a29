// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import Crypto
import Foundation
import HeraldServer
import HeraldTesting
import Hummingbird
import NIOCore
import Synchronization
import Testing

/// Delivery events: webhooks (signed, retried until acknowledged, durable) and the SSE stream,
/// through real sockets.
@Suite(.heavy) struct EventsTests {
    let server = ServerTests()

    /// A webhook receiver on a free port: records each request; answers `statuses` in turn, then 200.
    final class Receiver: Sendable {
        struct Received: Sendable {
            var headers: [String: String]
            var body: [UInt8]
        }

        let received = Mutex<[Received]>([])
        let statuses: Mutex<[Int]>

        init(statuses: [Int]) {
            self.statuses = Mutex(statuses)
        }

        func run<Result: Sendable>(_ body: @escaping @Sendable (Int) async throws -> Result) async throws -> Result {
            let router = Router()
            router.post("/hook") { request, _ in
                var request = request
                let bytes = try await request.collectBody(upTo: 1 << 22)
                var headers: [String: String] = [:]
                for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
                self.received.withLock { $0.append(Received(headers: headers, body: Array(bytes.readableBytesView))) }
                let status = self.statuses.withLock { $0.isEmpty ? 200 : $0.removeFirst() }
                return Response(status: .init(code: status))
            }
            let port = AsyncStream<Int>.makeStream()
            let application = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in
                    port.continuation.yield(channel.localAddress?.port ?? 0)
                    port.continuation.finish()
                }
            )
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await application.runService() }
                var iterator = port.stream.makeAsyncIterator()
                let bound = try #require(await iterator.next())
                defer { group.cancelAll() }
                return try await body(bound)
            }
        }
    }

    @Test("webhooks: events signed with HMAC-SHA256, retried after a 500 until acknowledged, visible as delivered", arguments: StoreDriver.enabled)
    func webhooks(driver: StoreDriver) async throws {
        let receiver = Receiver(statuses: [500])
        try await receiver.run { port in
            try await self.server.withServer(driver: driver, configure: { $0.webhookAllowInternal = true }) { context in
                let keys = try await self.server.setUp(context)
                let url = "http://127.0.0.1:\(port)/hook"
                // Bad input writes nothing.
                let badURL = try await context.api.call("POST", "/v1/apps/demo/webhooks", key: context.admin, json: #"{"url":"ftp://example.com/x"}"#)
                #expect(badURL.status == 400)
                #expect((badURL.body["error"] as? [String: Any])?["code"] as? String == "bad_url")
                let badEvents = try await context.api.call(
                    "POST", "/v1/apps/demo/webhooks", key: context.admin, json: #"{"url":"\#(url)","events":["delivery.maybe"]}"#
                )
                #expect((badEvents.body["error"] as? [String: Any])?["code"] as? String == "bad_events")
                #expect(try await context.api.call("POST", "/v1/apps/demo/webhooks", key: keys.send, json: #"{"url":"\#(url)"}"#).status == 403)
                #expect(try await context.api.call("POST", "/v1/apps/demo/webhooks", key: keys.register, json: #"{"url":"\#(url)"}"#).status == 403)
                #expect((try await context.api.call("GET", "/v1/apps/demo/webhooks", key: context.admin).body["webhooks"] as? [Any])?.isEmpty == true)

                let created = try await context.api.call(
                    "POST", "/v1/apps/demo/webhooks", key: context.admin,
                    json: #"{"url":"\#(url)","events":["delivery.sent","delivery.failed","token.invalidated"]}"#
                )
                #expect(created.status == 201)
                let secret = try #require(created.body["secret"] as? String)
                let hookID = try #require(created.body["id"] as? String)
                #expect(try await context.api.call("GET", "/v1/apps/demo/webhooks", key: context.admin).body.description.contains(secret) == false)

                // One device receives, one was uninstalled (410: failed, then invalidated).
                let alive = try await self.server.virtualDevice(context)
                let gone = try await self.server.virtualDevice(context)
                for token in [alive, gone] {
                    #expect(
                        try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
                            .status == 200)
                }
                _ = try await context.control.call("POST", "/v1/devices/\(gone)/uninstall")
                try await Task.sleep(for: .milliseconds(20))
                let sent = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","title":"Hi"}"#)
                let notification = try #require(sent.body["id"] as? String)

                // The first POST is answered 500, the retry 200: the same events, signed each time.
                var delivered = false
                let deadline = ContinuousClock.now + ServerTests.hangGuard
                while !delivered, ContinuousClock.now < deadline {
                    let messages = try await context.api.call("GET", "/v1/apps/demo/webhooks/\(hookID)/messages", key: context.admin)
                    let all = messages.body["messages"] as? [[String: Any]] ?? []
                    delivered = !all.isEmpty && all.allSatisfy { $0["state"] as? String == "delivered" }
                    if !delivered { try await Task.sleep(for: .milliseconds(50)) }
                }
                #expect(delivered)
                let requests = receiver.received.withLock { $0 }
                #expect(requests.count >= 2)
                var events: [[String: Any]] = []
                for request in requests {
                    let signature = try #require(request.headers["herald-signature"])
                    let parts = Dictionary(
                        uniqueKeysWithValues: signature.split(separator: ",").map { part in
                            let pair = part.split(separator: "=", maxSplits: 1)
                            return (String(pair[0]), String(pair[1]))
                        })
                    let timestamp = try #require(parts["t"].flatMap { Int64($0) })
                    #expect(abs(timestamp - Int64(Date().timeIntervalSince1970)) < 300)
                    let expected = HMAC<SHA256>.authenticationCode(
                        for: Array("\(timestamp).".utf8) + request.body, using: SymmetricKey(data: Array(secret.utf8)))
                    #expect(parts["v1"] == expected.map { String(format: "%02x", $0) }.joined())
                    // A wrong secret does not verify.
                    let forged = HMAC<SHA256>.authenticationCode(
                        for: Array("\(timestamp).".utf8) + request.body, using: SymmetricKey(data: Array("whsec_wrong".utf8)))
                    #expect(parts["v1"] != forged.map { String(format: "%02x", $0) }.joined())
                    #expect(request.headers["herald-webhook-id"] == hookID)
                    let json = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
                    events += json["events"] as? [[String: Any]] ?? []
                }
                #expect(requests.first?.body == requests.last?.body)
                let last = try #require(try JSONSerialization.jsonObject(with: Data(requests.last!.body)) as? [String: Any])
                let finalEvents = last["events"] as? [[String: Any]] ?? []
                let kinds = finalEvents.map { "\($0["type"] as? String ?? "")/\(($0["token"] as? String ?? "") == alive ? "alive" : "gone")" }
                    .sorted()
                #expect(kinds == ["delivery.failed/gone", "delivery.sent/alive", "token.invalidated/gone"])
                #expect(finalEvents.allSatisfy { $0["notificationId"] as? String == notification })
                #expect(finalEvents.first { $0["type"] as? String == "delivery.failed" }?["reason"] as? String == "Unregistered")
                let message = try #require(
                    (try await context.api.call("GET", "/v1/apps/demo/webhooks/\(hookID)/messages", key: context.admin).body["messages"]
                        as? [[String: Any]])?.first)
                #expect(message["attempts"] as? Int == 2)
                #expect(message["lastStatus"] as? Int == 200)

                // Deleted: no more messages.
                #expect(try await context.api.call("DELETE", "/v1/apps/demo/webhooks/\(hookID)", key: context.admin).status == 204)
                #expect(try await context.api.call("DELETE", "/v1/apps/demo/webhooks/\(hookID)", key: context.admin).status == 404)
            }
        }
    }

    @Test("an unreachable webhook is retried with back-off and given up at its expiry")
    func webhookExpiry() async throws {
        // The server's clock moves only when the test moves it: the back-off and the 3 s expiry
        // are then steps of the test, not a race against a loaded machine's speed.
        let clock = EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
        try await self.server.withServer(
            clock: clock,
            configure: { configuration in
                configuration.webhookExpiry = .seconds(3)
                configuration.webhookAllowInternal = true
            }
        ) { context in
            let keys = try await self.server.setUp(context)
            // A port nothing listens on.
            let created = try await context.api.call(
                "POST", "/v1/apps/demo/webhooks", key: context.admin, json: #"{"url":"http://127.0.0.1:9/hook","events":["delivery.sent"]}"#
            )
            let hookID = try #require(created.body["id"] as? String)
            let token = try await self.server.virtualDevice(context)
            _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            _ = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","title":"Hi"}"#)
            var message: [String: Any] = [:]
            // The first attempt fails and backs off at most 1 s: 2 s later (clock moved) the
            // second is due, still before the expiry; its back-off (1-2 s) passes the expiry.
            var moved = false
            let deadline = ContinuousClock.now + ServerTests.hangGuard
            while ContinuousClock.now < deadline {
                message =
                    (try await context.api.call("GET", "/v1/apps/demo/webhooks/\(hookID)/messages", key: context.admin).body["messages"]
                    as? [[String: Any]])?.first ?? [:]
                if message["state"] as? String == "expired" { break }
                if !moved, (message["attempts"] as? Int ?? 0) >= 1, message["lastError"] as? String != nil {
                    clock.advance(seconds: 2)
                    moved = true
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(message["state"] as? String == "expired")
            #expect((message["attempts"] as? Int ?? 0) >= 2)
            #expect((message["lastError"] as? String ?? "").contains("gave up") || (message["lastError"] as? String ?? "").contains("expired"))
        }
    }

    @Test("by default a webhook cannot point into the server's own network: refused at creation for an address, at sending for a name")
    func internalAddresses() async throws {
        try await self.server.withServer { context in
            let keys = try await self.server.setUp(context)
            for url in ["http://127.0.0.1:8080/x", "http://10.1.2.3/x", "http://169.254.169.254/latest", "http://[::1]/x", "https://192.168.0.1/x"] {
                let refused = try await context.api.call("POST", "/v1/apps/demo/webhooks", key: context.admin, json: #"{"url":"\#(url)"}"#)
                #expect(refused.status == 400, "\(url)")
                #expect(((refused.body["error"] as? [String: Any])?["message"] as? String)?.contains("internal address") == true)
            }
            // A name is checked when the message is sent: "localhost" resolves to loopback.
            let created = try await context.api.call(
                "POST", "/v1/apps/demo/webhooks", key: context.admin, json: #"{"url":"http://localhost:9/hook","events":["delivery.sent"]}"#
            )
            let hookID = try #require(created.body["id"] as? String)
            let token = try await self.server.virtualDevice(context)
            _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            _ = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","title":"Hi"}"#)
            var message: [String: Any] = [:]
            let deadline = ContinuousClock.now + ServerTests.hangGuard
            while (message["lastError"] as? String) == nil, ContinuousClock.now < deadline {
                message =
                    (try await context.api.call("GET", "/v1/apps/demo/webhooks/\(hookID)/messages", key: context.admin).body["messages"]
                    as? [[String: Any]])?.first ?? [:]
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect((message["lastError"] as? String ?? "").contains("internal address"), "\(message)")
        }
    }

    @Test("the SSE stream carries delivered, failed and invalidated events for its app, to send and admin keys only", arguments: StoreDriver.enabled)
    func serverSentEvents(driver: StoreDriver) async throws {
        let stream = try await self.server.withServer(driver: driver) { context in
            let keys = try await self.server.setUp(context)
            #expect(try await context.api.call("GET", "/v1/apps/demo/events", key: keys.register).status == 403)
            #expect(try await context.api.call("GET", "/v1/apps/demo/events?types=delivery.nope", key: keys.send).status == 400)
            let stream = try BackgroundProcess(
                "/usr/bin/env",
                ["curl", "-sN", "--max-time", "900", "-H", "authorization: Bearer \(keys.send)", context.api.base + "/v1/apps/demo/events"]
            )
            #expect(try await stream.waitFor(": herald delivery events", timeout: 300))
            let alive = try await self.server.virtualDevice(context)
            let gone = try await self.server.virtualDevice(context)
            for token in [alive, gone] {
                _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            }
            _ = try await context.control.call("POST", "/v1/devices/\(gone)/uninstall")
            _ = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","title":"Hi"}"#)
            // Waits end at the event; 300 s is only a hang guard.
            #expect(try await stream.waitFor("event: token.invalidated", timeout: 300))
            #expect(try await stream.waitFor("event: delivery.sent", timeout: 300))
            let printed = stream.printed
            #expect(printed.contains("event: delivery.failed"))
            #expect(printed.contains(#""reason":"Unregistered""#))
            #expect(printed.contains(alive) && printed.contains(gone))
            return stream
        }
        // The server shut down with the stream open: it ended the stream (no hang), and curl
        // finished by itself (signal 0 only waits).
        #expect(try await stream.stop(signal: 0, timeout: 120) == 0)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// Pushes APNs may or may not have delivered, through the real API, engine, client and the
/// emulator's faults: resent at most once, never with `drop`, marked on the delivery, counted in
/// `/metrics`; a resend replaces on the device instead of adding. Serialized: the metrics are
/// the process's, counted before and after.
@Suite(.serialized, .heavy) struct UnknownOutcomeServerTests {
    let tests = ServerTests()

    /// A server whose engine retries fast and gives APNs 5 s to answer, serving `/metrics`.
    func withServer(driver: StoreDriver, _ body: @escaping @Sendable (ServerTests.Context) async throws -> Void) async throws {
        let registry = ServerDocumentTests.registry
        try await self.tests.withServer(
            driver: driver,
            configure: {
                $0.metrics = registry
                $0.engine.retryBase = .milliseconds(50)
                $0.engine.apnsTimeout = .seconds(5)
            }, body)
    }

    /// `count` registered devices of app `demo`; warmed up (one notification each), so that the
    /// client's connection is open and ramped before a fault is armed.
    func devices(_ context: ServerTests.Context, _ keys: (register: String, send: String), count: Int) async throws -> [String] {
        var tokens: [String] = []
        for _ in 0..<count { tokens.append(try await self.tests.registeredDevice(context, keys)) }
        let warm = try await self.send(context, keys, #"{"audience":"all","body":"warm"}"#)
        _ = try await self.finished(context, keys, warm)
        return tokens
    }

    func send(_ context: ServerTests.Context, _ keys: (register: String, send: String), _ json: String) async throws -> String {
        let sent = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: json)
        #expect(sent.status == 202, "\(sent.body)")
        return try #require(sent.body["id"] as? String)
    }

    /// The notification's deliveries once none is pending (a 120 s hang guard, not a window).
    func finished(_ context: ServerTests.Context, _ keys: (register: String, send: String), _ id: String) async throws -> [[String: Any]] {
        let guardEnd = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < guardEnd {
            let status = try await context.api.call("GET", "/v1/apps/demo/notifications/\(id)", key: keys.send)
            if let counts = status.body["counts"] as? [String: Int], counts["pending"] == 0 {
                return try #require(status.body["deliveries"] as? [[String: Any]])
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("notification \(id) still pending")
        return []
    }

    /// `herald_unknown_outcomes_total` for app demo and `decision`, as `/metrics` shows it (0 when absent).
    func unknownOutcomes(_ context: ServerTests.Context, decision: String) async throws -> Int {
        let text = try await ProcessRunner.run("curl", ["-s", context.metrics]).standardOutput
        let line = text.split(separator: "\n").first {
            $0.hasPrefix("herald_unknown_outcomes_total{") && $0.contains(#"app="demo""#) && $0.contains(#"decision="\#(decision)""#)
        }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int(Double($0) ?? -1) } ?? 0
    }

    func counter(_ context: ServerTests.Context, _ name: String) async throws -> Int {
        try await context.control.call("GET", "/v1/counters").body[name] as? Int ?? -1
    }

    func inbox(_ context: ServerTests.Context, _ token: String) async throws -> [[String: Any]] {
        try await context.control.call("GET", "/v1/devices/\(token)/inbox").body["notifications"] as? [[String: Any]] ?? []
    }

    @Test(
        "a connection dropped with pushes written: each is resent once, every device gets it exactly once, the deliveries are marked uncertain and counted",
        arguments: StoreDriver.enabled)
    func droppedResent(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.tests.setUp(context)
            let tokens = try await self.devices(context, keys, count: 10)
            let acceptedBefore = try await self.counter(context, "accepted")
            let resentBefore = try await self.unknownOutcomes(context, decision: "resend")
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"drop"}"#)
            let id = try await self.send(context, keys, #"{"audience":"all","body":"flaky"}"#)
            let deliveries = try await self.finished(context, keys, id)
            #expect(deliveries.count == 10 && deliveries.allSatisfy { $0["state"] as? String == "sent" }, "\(deliveries)")
            let uncertain = deliveries.filter { $0["outcomeUncertain"] as? Bool == true }
            #expect(uncertain.count >= 1, "the dropped push at least was written and unanswered")
            #expect(uncertain.allSatisfy { $0["attempts"] as? Int == 2 }, "resent once: \(uncertain)")
            #expect(deliveries.filter { $0["outcomeUncertain"] as? Bool != true }.allSatisfy { $0["attempts"] as? Int == 1 })
            // Every device got it; one copy, or two where APNs had processed a push before the drop
            // (then the second replaced the first: they share a collapse id).
            let accepted = try await self.counter(context, "accepted") - acceptedBefore
            #expect(accepted >= 10 && accepted <= 10 + uncertain.count, "\(accepted) copies for 10 devices, \(uncertain.count) uncertain")
            for token in tokens { #expect(try await self.inbox(context, token).count == 2, "the warm-up and this one, shown once") }
            #expect(try await self.unknownOutcomes(context, decision: "resend") - resentBefore == uncertain.count)
        }
    }

    @Test(
        "resends of unknown outcomes go on a connection of their own, which first sends never share",
        arguments: StoreDriver.enabled)
    func resendLane(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.tests.setUp(context)
            _ = try await self.devices(context, keys, count: 10)
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"drop"}"#)
            let flaky = try await self.send(context, keys, #"{"audience":"all","body":"flaky"}"#)
            let uncertain = Set(
                try await self.finished(context, keys, flaky).filter { $0["outcomeUncertain"] as? Bool == true }.compactMap { $0["token"] as? String }
            )
            #expect(uncertain.count >= 1)
            let after = try await self.send(context, keys, #"{"audience":"all","body":"after"}"#)
            _ = try await self.finished(context, keys, after)
            // Oldest first: … the flaky pushes and their resends, then the 10 pushes of `after`, each on its connection.
            let log = try #require(try await context.control.call("GET", "/v1/requests?limit=1000").body["requests"] as? [[String: Any]])
            let pushes: [(token: Substring, connection: Int)] = log.compactMap { entry in
                guard let path = entry["path"] as? String, path.hasPrefix("/3/device/"), let connection = entry["connection"] as? Int else {
                    return nil
                }
                return (path.dropFirst("/3/device/".count), connection)
            }
            try #require(pushes.count >= 10 + uncertain.count)
            let afterConnections = Set(pushes.suffix(10).map(\.connection))
            // A resend is an uncertain delivery's last push before `after`: found by its token, not by its place (a
            // push that never left the dropped connection is retried on the main lane, possibly after the resends).
            let before = pushes.dropLast(10)
            let resendConnections = Set(uncertain.compactMap { token in before.last { $0.token == token }?.connection })
            #expect(resendConnections.count == 1, "one resend connection: \(resendConnections)")
            #expect(resendConnections.isDisjoint(with: afterConnections), "resends \(resendConnections), first sends \(afterConnections)")
        }
    }

    @Test(
        "onUnknownOutcome drop: a push written to a dropped connection is never resent; no device gets it twice",
        arguments: StoreDriver.enabled)
    func droppedNotResent(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.tests.setUp(context)
            let tokens = try await self.devices(context, keys, count: 10)
            let acceptedBefore = try await self.counter(context, "accepted")
            let collapsedBefore = try await self.counter(context, "collapsed")
            let droppedBefore = try await self.unknownOutcomes(context, decision: "drop")
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"drop"}"#)
            let id = try await self.send(context, keys, #"{"audience":"all","body":"once at most","onUnknownOutcome":"drop"}"#)
            let deliveries = try await self.finished(context, keys, id)
            let uncertain = deliveries.filter { $0["outcomeUncertain"] as? Bool == true }
            #expect(uncertain.count >= 1)
            #expect(
                uncertain.allSatisfy {
                    $0["state"] as? String == "failed" && $0["attempts"] as? Int == 1
                        && ($0["reason"] as? String)?.hasPrefix("UnknownOutcome") == true
                }, "\(uncertain)")
            #expect(deliveries.filter { $0["outcomeUncertain"] as? Bool != true }.allSatisfy { $0["state"] as? String == "sent" })
            let accepted = try await self.counter(context, "accepted") - acceptedBefore
            #expect(accepted >= 10 - uncertain.count && accepted <= 10, "none sent twice: \(accepted)")
            #expect(try await self.counter(context, "collapsed") == collapsedBefore, "no device got a second copy")
            for token in tokens { #expect(try await self.inbox(context, token).count <= 2) }
            #expect(try await self.unknownOutcomes(context, decision: "drop") - droppedBefore == uncertain.count)
        }
    }

    @Test(
        "an answer that never comes (APNs delivered it): resent once, the device replaces it (collapse id); a second unknown outcome is not resent",
        arguments: StoreDriver.enabled)
    func unansweredCollapsed(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.tests.setUp(context)
            let token = try #require(try await self.devices(context, keys, count: 1).first)
            // The emulator delivers at once and answers 30 s late: the 5 s deadline passes in flight.
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"latency","milliseconds":30000}"#)
            let id = try await self.send(context, keys, #"{"audience":"all","body":"twice, shown once"}"#)
            let delivery = try #require(try await self.finished(context, keys, id).first)
            #expect(delivery["state"] as? String == "sent" && delivery["attempts"] as? Int == 2, "\(delivery)")
            #expect(delivery["outcomeUncertain"] as? Bool == true)
            let inbox = try await self.inbox(context, token)
            #expect(inbox.count == 2, "the warm-up and this one, its two copies collapsed into one: \(inbox)")
            #expect(inbox.last?["collapseId"] as? String == id, "collapsed on the notification's id")
            #expect(try await self.counter(context, "collapsed") == 1)

            // Two unknown outcomes in a row: the second is not resent. Two copies at most, never three.
            let acceptedBefore = try await self.counter(context, "accepted")
            _ = try await context.control.call("POST", "/v1/faults", json: #"{"type":"latency","milliseconds":30000,"count":2}"#)
            let twice = try await self.send(context, keys, #"{"audience":"all","body":"lost twice","collapseId":"mine"}"#)
            let ended = try #require(try await self.finished(context, keys, twice).first)
            #expect(ended["state"] as? String == "failed" && ended["attempts"] as? Int == 2, "\(ended)")
            #expect(ended["reason"] as? String == "UnknownOutcome (after a resend)")
            #expect(ended["outcomeUncertain"] as? Bool == true)
            #expect(try await self.counter(context, "accepted") - acceptedBefore == 2)
            #expect(try await self.inbox(context, token).last?["collapseId"] as? String == "mine", "a sender's collapse id is kept as is")
        }
    }

    @Test("onUnknownOutcome other than resend or drop is refused with bad_on_unknown_outcome")
    func badValue() async throws {
        try await self.tests.withServer { context in
            let keys = try await self.tests.setUp(context)
            for value in [#""twice""#, #""RESEND""#, "1", "true"] {
                let refused = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"x","onUnknownOutcome":\#(value)}"#)
                #expect(refused.status == 400, "\(value)")
                #expect((refused.body["error"] as? [String: Any])?["code"] as? String == "bad_on_unknown_outcome", "\(value): \(refused.body)")
            }
            for value in ["resend", "drop"] {
                let accepted = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"x","onUnknownOutcome":"\#(value)"}"#)
                #expect(accepted.status == 202, "\(value): \(accepted.body)")
            }
        }
    }
}

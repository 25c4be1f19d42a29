// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// `/metrics` counts receipts: applied by event, and replays and refusals by result. The registry
/// is the process's, and every virtual device of other suites reports receipts for app `demo`:
/// this test's app is its own (`metered`), so its counters move only with what it does.
@Suite(.heavy) struct ReceiptMetricsTests {
    /// `herald_receipts_total` for app metered, `event` and `result`, as `/metrics` shows it (0 when absent).
    static func counter(_ base: String, event: String, result: String) async throws -> Int {
        let text = try await ProcessRunner.run("curl", ["-s", base]).standardOutput
        let name = #"herald_receipts_total{app="metered",event="\#(event)",result="\#(result)"} "#
        let line = text.split(separator: "\n").first { $0.hasPrefix(name) }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int(Double($0) ?? -1) } ?? 0
    }

    @Test("/metrics counts receipts applied, replayed and refused")
    func receiptCounters() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-receipt-metrics")
        defer { directory.remove() }
        var configuration = ServerTests.configuration(directory)
        configuration.metrics = ServerDocumentTests.registry
        try await withHeraldServer(configuration: configuration) { server in
            let base = "http://127.0.0.1:\(server.port)"
            let metrics = "http://127.0.0.1:\(try #require(server.metricsPort))/metrics"
            let tests = ServerTests()
            let context = ServerTests.Context(
                api: .init(base: base), control: .init(base: "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"),
                admin: try #require(server.initialAdminKey), server: server
            )
            #expect(
                try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"metered","bundleId":"com.example.metered"}"#)
                    .status == 201)
            let register = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"register","appId":"metered"}"#)
            let send = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"send","appId":"metered"}"#)
            let keys = (register: try #require(register.body["key"] as? String), send: try #require(send.body["key"] as? String))
            let device = try await context.control.call(
                "POST", "/v1/devices", json: #"{"bundleId":"com.example.metered","environment":"development","kind":"device"}"#)
            let token = try #require(device.body["token"] as? String)
            _ = try await context.api.call("PUT", "/v1/apps/metered/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            let sent = try await context.api.call("POST", "/v1/apps/metered/notifications", key: keys.send, json: #"{"audience":"all","body":"m"}"#)
            _ = try await tests.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String), app: "metered")
            let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
            let payload = try #require((inbox.body["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any])
            let receipt = try #require(payload["hr"] as? String)
            let before = (
                applied: try await Self.counter(metrics, event: "received", result: "applied"),
                duplicate: try await Self.counter(metrics, event: "any", result: "duplicate"),
                refused: try await Self.counter(metrics, event: "any", result: "refused")
            )
            let batch =
                #"{"receipts":[{"receipt":"\#(receipt)","event":"received"},{"receipt":"\#(receipt)","event":"received"},"#
                + #"{"receipt":"AAAAAAAAAAAAAAAAAAAAAAAAAAA","event":"opened"}]}"#
            let answer = try await context.api.call("POST", "/v1/apps/metered/receipts", key: keys.register, json: batch)
            #expect(answer.status == 200 && answer.body["applied"] as? Int == 1 && answer.body["duplicates"] as? Int == 1, "\(answer)")
            #expect(try await Self.counter(metrics, event: "received", result: "applied") - before.applied == 1)
            #expect(try await Self.counter(metrics, event: "any", result: "duplicate") - before.duplicate == 1)
            #expect(try await Self.counter(metrics, event: "any", result: "refused") - before.refused == 1)
        }
    }
}

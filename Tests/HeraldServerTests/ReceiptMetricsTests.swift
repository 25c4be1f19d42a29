// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// `/metrics` counts receipts: applied by event, and replays and refusals by result.
@Suite struct ReceiptMetricsTests {
    @Test("/metrics counts receipts applied, replayed and refused")
    func receiptCounters() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-receipt-metrics")
        defer { directory.remove() }
        var configuration = ServerTests.configuration(directory)
        configuration.metrics = ServerDocumentTests.registry
        try await withHeraldServer(configuration: configuration) { server in
            let base = "http://127.0.0.1:\(server.port)"
            let tests = ServerTests()
            let context = ServerTests.Context(
                api: .init(base: base), control: .init(base: "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"),
                admin: try #require(server.initialAdminKey), server: server
            )
            let keys = try await tests.setUp(context)
            let token = try await tests.virtualDevice(context)
            _ = try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox"}"#)
            let sent = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"m"}"#)
            _ = try await tests.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
            let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
            let payload = try #require((inbox.body["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any])
            let receipt = try #require(payload["hr"] as? String)
            let batch =
                #"{"receipts":[{"receipt":"\#(receipt)","event":"received"},{"receipt":"\#(receipt)","event":"received"},"#
                + #"{"receipt":"AAAAAAAAAAAAAAAAAAAAAAAAAAA","event":"opened"}]}"#
            let answer = try await context.api.call("POST", "/v1/apps/demo/receipts", key: keys.register, json: batch)
            #expect(answer.status == 200 && answer.body["applied"] as? Int == 1 && answer.body["duplicates"] as? Int == 1, "\(answer)")
            let metrics = try await ProcessRunner.run("curl", ["-s", base + "/metrics"]).standardOutput
            #expect(metrics.contains(#"herald_receipts_total{app="demo",event="received",result="applied"} 1"#), "\(metrics.prefix(3000))")
            #expect(metrics.contains(#"herald_receipts_total{app="demo",event="any",result="duplicate"} 1"#))
            #expect(metrics.contains(#"herald_receipts_total{app="demo",event="any",result="refused"} 1"#))
        }
    }
}

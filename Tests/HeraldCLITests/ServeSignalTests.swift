// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// `herald serve` as a process, told to stop while a delivery is in flight.
@Suite(.heavy) struct ServeSignalTests {
    func call(_ method: String, _ url: String, key: String? = nil, json: String? = nil) async throws -> [String: Any] {
        var arguments = ["-s", "-S", "--max-time", "20", "-X", method, url]
        if let key { arguments += ["-H", "authorization: Bearer \(key)"] }
        if let json { arguments += ["--data-binary", json, "-H", "content-type: application/json"] }
        let text = try await ProcessRunner.run("curl", arguments).standardOutput
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    @Test("SIGTERM waits for the delivery in flight, past 10 s with a longer APNs timeout; a second SIGTERM exits at once, with status 1")
    func secondSignal() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-signal")
        defer { directory.remove() }
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path, "--emulator-port", "0", "--emulator-production-port", "0",
                "--emulator-control-port", "0", "--fcm-emulator-port", "0", "--webpush-emulator-port", "0", "--lease-seconds", "600",
                "--apns-timeout-seconds", "300",
            ])
        try #require(try await server.waitFor("Built-in APNs emulator: control API", timeout: 300), "\(server.printed)")
        // The crash test already reads a port from what a process printed.
        let crashTests = HeavyProcessTests.ServeCrashTests()
        let api = "http://127.0.0.1:\(try crashTests.port(of: server, "Herald listening on"))"
        let control = "http://127.0.0.1:\(try crashTests.port(of: server, "Built-in APNs emulator: control API"))"
        let lines = server.printed.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let admin = try #require(lines.first { $0.hasPrefix("hk_") })

        _ = try await self.call("POST", api + "/v1/apps", key: admin, json: #"{"id":"demo","bundleId":"com.example.app"}"#)
        let device = try await self.call(
            "POST", control + "/v1/devices", json: #"{"bundleId":"com.example.app","environment":"development","kind":"device"}"#)
        let token = try #require(device["token"] as? String)
        _ = try await self.call("PUT", api + "/v1/apps/demo/devices/\(token)", key: admin, json: #"{"environment":"sandbox"}"#)
        // The emulator answers ten minutes late: the delivery stays in flight until its 300 s APNs
        // timeout, however slowly this test gets to the signals on a loaded machine.
        _ = try await self.call("POST", control + "/v1/faults", json: #"{"type":"latency","milliseconds":600000,"count":1}"#)
        let sent = try await self.call(
            "POST", api + "/v1/apps/demo/notifications", key: admin, json: #"{"audience":{"tokens":["\#(token)"]},"title":"Late"}"#)
        #expect(sent["deliveries"] as? Int == 1)
        var inFlight = false
        // Until the emulator holds the delivery (300 s is a hang guard, not a window).
        let deadline = ContinuousClock.now + .seconds(300)
        while !inFlight, ContinuousClock.now < deadline {
            inFlight = (try await self.call("GET", control + "/v1/counters")["faultsInjected"] as? Int ?? 0) >= 1
            if !inFlight { try await Task.sleep(for: .milliseconds(50)) }
        }
        try #require(inFlight, "the emulator never received the delivery")
        // Past the 10 s default: only the configured timeout still holds the delivery in flight.
        try await Task.sleep(for: .seconds(11))

        server.signal(SIGTERM)
        try #require(try await server.waitFor("shutting down", timeout: 300), "\(server.printed)")
        // Still finishing the delivery in flight (it would exit 0 at its APNs timeout); the second
        // signal ends the process now, with status 1.
        let status = try await server.stop(signal: SIGTERM, timeout: 120)
        #expect(status == 1, "\(server.printed)")
        #expect(server.printed.contains("second signal"))
    }

    @Test("an APNs timeout over half the lease, or under a second, is refused before anything starts")
    func apnsTimeoutBounds() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-options")
        defer { directory.remove() }
        for (lease, timeout) in [("20", "11"), ("60", "0")] {
            let result = try await ProcessRunner.run(
                BackgroundProcess.heraldExecutable,
                [
                    "serve", "--port", "0", "--no-emulator", "--data-dir", directory.path, "--lease-seconds", lease, "--apns-timeout-seconds",
                    timeout,
                ])
            #expect(result.exitCode == 64, "\(result.standardError)")
            #expect(result.standardError.contains("the APNs timeout must be at least 1 second and at most half the lease (\(lease) s)"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/herald.sqlite"), "nothing is created for a refused start")
    }
}

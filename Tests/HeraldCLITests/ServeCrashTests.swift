// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// The tests that run several server processes at full tilt, one after the other: beside each
/// other on two cores, deadlines measured in seconds would start to expire.
@Suite(.serialized, .heavy) struct HeavyProcessTests {}

extension HeavyProcessTests {
    /// `herald serve` as a process, killed with SIGKILL in the middle of a broadcast and started
    /// again on the same database: every delivery arrives, and the only duplicates are the ones
    /// that were in flight when it died.
    @Suite(.heavy) struct ServeCrashTests {
        /// Creates the app with the key, registers `count` random tokens over one keep-alive
        /// connection, and prints nothing but errors.
        static let setupScript = #"""
            import http.client, json, os, sys
            port, admin, key_file, count = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
            connection = http.client.HTTPConnection("127.0.0.1", port)
            def call(method, path, body):
                connection.request(method, path, json.dumps(body), {"authorization": "Bearer " + admin, "content-type": "application/json"})
                response = connection.getresponse()
                text = response.read()
                if response.status >= 300:
                    sys.exit(f"{method} {path}: {response.status} {text}")
                return json.loads(text) if text else None
            call("POST", "/v1/apps", {"id": "demo", "bundleId": "com.example.app"})
            call("PUT", "/v1/apps/demo/credentials/development",
                 {"keyId": "KEY1234567", "teamId": "TEAM123456", "privateKey": open(key_file).read()})
            for _ in range(count):
                call("PUT", "/v1/apps/demo/devices/" + os.urandom(32).hex(), {"environment": "sandbox"})
            """#

        func line(after marker: String, in text: String) -> String? {
            let lines = text.split(separator: "\n").map(String.init)
            guard let index = lines.firstIndex(where: { $0.contains(marker) }) else { return nil }
            return lines[index].contains("http://") ? lines[index] : (index + 1 < lines.count ? lines[index + 1] : nil)
        }

        func port(of process: BackgroundProcess, _ marker: String) throws -> Int {
            let entry = try #require(process.printed.split(separator: "\n").first { $0.contains(marker) })
            if let field = entry.split(separator: " ").first(where: { $0.hasPrefix("emulator.port=") }) {
                return try #require(Int(field.dropFirst("emulator.port=".count)))
            }
            return try #require(Int(entry.split(separator: ":").last ?? ""))
        }

        func counter(_ control: Int, _ name: String) async throws -> Int {
            let text = try await ProcessRunner.run("curl", ["-s", "http://127.0.0.1:\(control)/v1/counters"]).standardOutput
            return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?[name] as? Int ?? -1
        }

        @Test("SIGKILL mid-broadcast, restart: every delivery arrives, duplicates at most the in-flight window")
        func killMidBroadcast() async throws {
            let directory = try TemporaryDirectory(prefix: "herald-crash")
            defer { directory.remove() }
            let herald = BackgroundProcess.heraldExecutable
            let keyFile = directory.path + "/AuthKey.p8"
            #expect(
                try await ProcessRunner.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyFile])
                    .exitCode == 0)
            let emulator = try BackgroundProcess(
                herald,
                [
                    "emulator", "--port", "0", "--no-production", "--control-port", "0", "--no-fcm", "--no-webpush", "--data-dir",
                    directory.path + "/emulator",
                    "--key-file", keyFile, "--key-id", "KEY1234567", "--team-id", "TEAM123456", "--accept-unknown-tokens",
                ])
            try #require(try await emulator.waitFor("control API listening", timeout: 300), "\(emulator.printed)")
            let apns = try self.port(of: emulator, "emulator.environment=development")
            let control = try self.port(of: emulator, "control API listening")

            func serve() async throws -> (BackgroundProcess, Int) {
                let process = try BackgroundProcess(
                    herald,
                    [
                        "serve", "--port", "0", "--no-emulator", "--data-dir", directory.path + "/serve",
                        "--apns-host", "127.0.0.1", "--apns-port", "\(apns)", "--apns-ca-file", directory.path + "/emulator/ca.pem",
                        "--lease-seconds", "30", "--log-level", "warning",
                    ])
                try #require(try await process.waitFor("Herald listening on", timeout: 300), "\(process.printed)")
                return (process, try self.port(of: process, "Herald listening on"))
            }

            let count = 1500
            var (server, port) = try await serve()
            let admin = try #require(self.line(after: "Admin API key", in: server.printed)?.trimmingCharacters(in: .whitespaces))
            let script = try directory.write("setup.py", Self.setupScript)
            let setup = try await ProcessRunner.run("python3", [script, "\(port)", admin, keyFile, "\(count)"], timeout: 120)
            try #require(setup.exitCode == 0, "\(setup.standardError)")

            // Answers now take 1.5 s: the first batch is processed by the emulator but not yet
            // recorded by Herald when it dies.
            _ = try await ProcessRunner.run(
                "curl",
                [
                    "-s", "-X", "POST", "http://127.0.0.1:\(control)/v1/faults", "-d", #"{"type":"latency","milliseconds":1500,"persistent":true}"#,
                ])
            let sent = try await ProcessRunner.run(
                "curl",
                [
                    "-s", "-X", "POST", "http://127.0.0.1:\(port)/v1/apps/demo/notifications", "-H", "authorization: Bearer \(admin)",
                    "-d", #"{"audience":"all","body":"to everyone"}"#,
                ])
            let id = try #require(
                (try JSONSerialization.jsonObject(with: Data(sent.standardOutput.utf8)) as? [String: Any])?["id"] as? String, "\(sent.standardOutput)"
            )
            var processed = 0
            // The waits end at their event; their deadlines are only hang guards.
            let started = ContinuousClock.now + .seconds(300)
            while processed == 0, ContinuousClock.now < started {
                try await Task.sleep(for: .milliseconds(50))
                processed = try await self.counter(control, "acceptedForUnknownTokens")
            }
            try #require(processed > 0, "the broadcast started")
            _ = try await server.stop(signal: SIGKILL)
            _ = try await ProcessRunner.run("curl", ["-s", "-X", "DELETE", "http://127.0.0.1:\(control)/v1/faults"])

            (server, port) = try await serve()
            var counts: [String: Int] = [:]
            // The killed process's leases (30 s: its APNs deadline is half of that, far beyond what a
            // loaded machine needs) run out before the restarted one sends them again.
            let deadline = ContinuousClock.now + .seconds(900)
            while ContinuousClock.now < deadline {
                let status = try await ProcessRunner.run(
                    "curl",
                    [
                        "-s", "http://127.0.0.1:\(port)/v1/apps/demo/notifications/\(id)", "-H", "authorization: Bearer \(admin)",
                    ])
                counts =
                    ((try? JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8))) as? [String: Any])?["counts"] as? [String: Int]
                    ?? [:]
                if counts["pending"] == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            _ = try await server.stop()
            let accepted = try await self.counter(control, "acceptedForUnknownTokens")
            _ = try await emulator.stop()
            #expect(counts["sent"] == count, "\(counts)")
            #expect(accepted >= count, "every delivery reached the emulator")
            // In flight at the kill: up to 4 workers × 1000, i.e. the whole broadcast here. Each
            // delivery may be sent again once after the restart, never more.
            #expect(accepted <= 2 * count, "duplicates at most the in-flight window (\(accepted - count))")
        }
    }
}

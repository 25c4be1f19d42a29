// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// `herald serve`'s rate limits as flags and environment variables.
@Suite(.heavy) struct ServeRateLimitTests {
    /// `curl`: the status and the Retry-After header.
    func call(_ method: String, _ url: String, key: String, _ json: String? = nil) async throws -> String {
        var arguments = ["-s", "-o", "/dev/null", "-w", "%{http_code} %header{retry-after}", "-X", method, url, "-H", "authorization: Bearer \(key)"]
        if let json { arguments += ["-d", json] }
        return try await ProcessRunner.run("curl", arguments).standardOutput.trimmingCharacters(in: .whitespaces)
    }

    @Test("--send-key-limit reaches the server: a send key's third registration is answered 429 with Retry-After")
    func sendKeyLimitFlag() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-rate-cli")
        defer { directory.remove() }
        // A token every 1000 s: none comes back during the test.
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            ["serve", "--port", "0", "--no-emulator", "--data-dir", directory.path, "--send-key-limit", "2/0.001"])
        try #require(try await server.waitFor("Herald listening on"), "\(server.printed)")
        let lines = server.printed.split(separator: "\n").map(String.init)
        let admin = try #require(lines.first { $0.contains("hk_") }?.trimmingCharacters(in: .whitespaces))
        let base = try #require(lines.first { $0.contains("Herald listening on") }?.split(separator: " ").last.map(String.init))
        #expect(try await self.call("POST", base + "/v1/apps", key: admin, #"{"id":"demo","bundleId":"com.example.demo"}"#) == "201")
        let made = try await ProcessRunner.run(
            "curl", ["-s", "-X", "POST", base + "/v1/keys", "-H", "authorization: Bearer \(admin)", "-d", #"{"scope":"send","appId":"demo"}"#])
        let send = try #require((try JSONSerialization.jsonObject(with: Data(made.standardOutput.utf8)) as? [String: Any])?["key"] as? String)
        var answers: [String] = []
        let clock = ContinuousClock()
        let first = clock.now
        for n in 0..<3 {
            answers.append(
                try await self.call(
                    "PUT", base + "/v1/apps/demo/devices/" + String(repeating: "a", count: 63) + "\(n)", key: send, #"{"environment":"sandbox"}"#))
        }
        let elapsed = Int((clock.now - first).components.seconds) + 1
        _ = try await server.stop()
        #expect(answers.prefix(2) == ["200", "200"], "\(answers)")
        // Refused until a token is back: 1000 s after the first was taken, less the time since
        // (however slow a busy machine made the three requests).
        let refused = answers[2].split(separator: " ")
        #expect(refused.first == "429" && refused.last.flatMap { Int($0) }.map { (1000 - elapsed...1000).contains($0) } == true, "\(answers)")
    }

    @Test("rate limits that are not BURST/PER_SECOND are refused before anything starts")
    func badLimits() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-rate-options")
        defer { directory.remove() }
        let serve = ["serve", "--port", "0", "--no-emulator", "--data-dir", directory.path]
        let flag = try await ProcessRunner.run(BackgroundProcess.heraldExecutable, serve + ["--register-address-limit", "60"])
        #expect(flag.exitCode == 64 && flag.standardError.contains("registerAddressLimit must be BURST/PER_SECOND"), "\(flag.standardError)")
        let environment = try await ProcessRunner.run("env", ["HERALD_SEND_KEY_LIMIT=10/0", BackgroundProcess.heraldExecutable] + serve)
        #expect(environment.exitCode == 64 && environment.standardError.contains("sendKeyLimit must be"), "\(environment.standardError)")
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/herald.sqlite"), "nothing is created for a refused start")
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// `herald emulator` and `herald token` as a user runs them: a real process, real ports, real files.
@Suite(.heavy) struct EmulatorCommandTests {
    @Test("herald emulator serves, writes its CA, takes a key file, and stops cleanly on SIGTERM")
    func emulatorCommand() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-cli")
        defer { directory.remove() }
        let keyFile = directory.path + "/AuthKey.p8"
        #expect(
            try await ProcessRunner.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyFile]).exitCode
                == 0)
        // Port 0 everywhere: the emulator logs the ports it bound. Trace logging, so the checks
        // below that no secret reaches the log have something to look at.
        let herald = BackgroundProcess.heraldExecutable
        let emulator = try BackgroundProcess(
            herald,
            [
                "emulator", "--port", "0", "--production-port", "0", "--control-port", "0", "--fcm-port", "0", "--webpush-port", "0",
                "--data-dir", directory.path + "/data", "--key-file", keyFile, "--key-id", "ABC123DEFG", "--team-id", "TEAM123456",
                "--log-level", "trace",
            ])
        try #require(try await emulator.waitFor("APNs emulator control API listening", timeout: 300), "\(emulator.printed)")
        // The FCM emulator beside it, on a port of its own (`--fcm-port 0`: a free one).
        try #require(try await emulator.waitFor("FCM emulator listening", timeout: 300), "\(emulator.printed)")
        func port(_ line: String) throws -> Int {
            let entry = try #require(emulator.printed.split(separator: "\n").first { $0.contains(line) })
            let value = try #require(entry.split(separator: " ").first { $0.hasPrefix("emulator.port=") })
            return try #require(Int(value.dropFirst("emulator.port=".count)))
        }
        let apns = try port("emulator.environment=development")
        let control = try port("control API listening")
        #expect(FileManager.default.fileExists(atPath: directory.path + "/data/ca.pem"))
        #expect(!emulator.printed.contains("BEGIN"), "no key material in the log")

        let created = try await ProcessRunner.run(
            "curl", ["-s", "-X", "POST", "http://127.0.0.1:\(control)/v1/devices", "-d", #"{"bundleId":"com.example.app"}"#])
        let token = try #require((try JSONSerialization.jsonObject(with: Data(created.standardOutput.utf8)) as? [String: Any])?["token"] as? String)
        let jwt = try await ProcessRunner.run(herald, ["token", "--key-file", keyFile, "--key-id", "ABC123DEFG", "--team-id", "TEAM123456"])
        #expect(jwt.exitCode == 0)
        let bearer = jwt.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(bearer.split(separator: ".").count == 3)

        let push = try await ProcessRunner.run(
            "curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", "--http2", "--cacert", directory.path + "/data/ca.pem",
                "-H", "authorization: bearer \(bearer)", "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
                "--data-binary", #"{"aps":{"alert":"from the CLI"}}"#, "https://localhost:\(apns)/3/device/\(token)",
            ])
        #expect(push.standardOutput == "200 2")
        let inbox = try await ProcessRunner.run("curl", ["-s", "http://127.0.0.1:\(control)/v1/devices/\(token)/inbox"])
        #expect(inbox.standardOutput.contains("from the CLI"))

        #expect(try await emulator.stop() == 0)
        #expect(!emulator.printed.contains(bearer), "no provider token in the log")
    }

    @Test("herald token refuses a missing or broken key with a clear error")
    func tokenErrors() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-cli")
        defer { directory.remove() }
        let herald = BackgroundProcess.heraldExecutable
        let missing = try await ProcessRunner.run(herald, ["token", "--key-file", directory.path + "/nope.p8", "--key-id", "A", "--team-id", "B"])
        #expect(missing.exitCode != 0)
        #expect(missing.standardError.contains("cannot read"))
        let broken = try directory.write("broken.p8", "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
        let bad = try await ProcessRunner.run(herald, ["token", "--key-file", broken, "--key-id", "A", "--team-id", "B"])
        #expect(bad.exitCode != 0)
        #expect(bad.standardError.contains("bad_key"))
    }
}

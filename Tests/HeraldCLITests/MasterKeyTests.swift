// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// A change of master key, as an operator makes it: the key in a file, `herald serve` told with
/// SIGHUP, and `herald rekey` for a database no process is running on.
@Suite(.heavy) struct MasterKeyTests {
    static func key() -> String { (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }

    /// `herald serve` with `environment` (NAME=value): the process, the API's base URL and the admin key (nil after the first start).
    static func serve(_ directory: TemporaryDirectory, _ environment: [String]) async throws -> (BackgroundProcess, String, String?) {
        let server = try BackgroundProcess(
            "/usr/bin/env",
            environment + [
                BackgroundProcess.heraldExecutable, "serve", "--port", "0", "--data-dir", directory.path + "/data", "--emulator-port", "0",
                "--emulator-production-port", "0", "--emulator-control-port", "0", "--fcm-emulator-port", "0", "--webpush-emulator-port", "0",
            ])
        try #require(try await server.waitFor("Herald listening on", timeout: 300), "\(server.printed)")
        let crash = HeavyProcessTests.ServeCrashTests()
        let port = try crash.port(of: server, "Herald listening on")
        return (server, "http://127.0.0.1:\(port)", crash.line(after: "Admin API key", in: server.printed)?.trimmingCharacters(in: .whitespaces))
    }

    /// The status of asking Herald to sign a user assertion: it opens the app's sealed user secret.
    static func assertionStatus(_ api: String, _ admin: String) async throws -> Int {
        let result = try await ProcessRunner.run(
            "curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", api + "/v1/apps/demo/user-assertions",
                "-H", "authorization: Bearer \(admin)", "-d", #"{"userId":"ann","token":"\#(String(repeating: "ab", count: 32))"}"#,
            ])
        return Int(result.standardOutput) ?? 0
    }

    @Test("SIGHUP after the key file changed re-seals a running server's secrets; herald rekey does it offline; the old key then opens nothing")
    func changeOfKey() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-rekey")
        defer { directory.remove() }
        let (first, second, third) = (Self.key(), Self.key(), Self.key())
        let file = try directory.write("master.key", first)
        let (server, api, adminKey) = try await Self.serve(directory, ["HERALD_MASTER_KEY_FILE=\(file)"])
        let admin = try #require(adminKey, "\(server.printed)")
        for (path, body) in [("/v1/apps", #"{"id":"demo","bundleId":"com.example.app"}"#), ("/v1/apps/demo/user-secret", "")] {
            _ = try await ProcessRunner.run("curl", ["-s", "-X", "POST", api + path, "-H", "authorization: Bearer \(admin)", "-d", body])
        }
        #expect(try await Self.assertionStatus(api, admin) == 201)

        // The operator puts the new key in the file and tells the process.
        _ = try directory.write("master.key", second)
        server.signal(SIGHUP)
        #expect(try await server.waitFor("master key changed", timeout: 300), "\(server.printed)")
        #expect(try await Self.assertionStatus(api, admin) == 201, "the running process opens what it re-sealed")
        _ = try await server.stop()

        // Started again with the new key alone, it opens them: they were sealed again, not only read.
        let (again, api2, _) = try await Self.serve(directory, ["HERALD_MASTER_KEY_FILE=\(file)"])
        #expect(try await Self.assertionStatus(api2, admin) == 201)
        _ = try await again.stop()

        // Offline: herald rekey with the old key as the previous one.
        let rekeyed = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "HERALD_MASTER_KEY=\(third)", "HERALD_PREVIOUS_MASTER_KEY=\(second)", BackgroundProcess.heraldExecutable, "rekey",
                "--data-dir", directory.path + "/data",
            ])
        #expect(
            rekeyed.exitCode == 0 && rekeyed.standardOutput.contains("sealed 1 stored secrets"), "\(rekeyed.standardOutput)\(rekeyed.standardError)")
        let (old, api3, _) = try await Self.serve(directory, ["HERALD_MASTER_KEY=\(second)"])
        #expect(try await Self.assertionStatus(api3, admin) == 500, "the old key opens nothing any more")
        _ = try await old.stop()
        let (new, api4, _) = try await Self.serve(directory, ["HERALD_MASTER_KEY=\(third)"])
        #expect(try await Self.assertionStatus(api4, admin) == 201)
        _ = try await new.stop()
    }
}

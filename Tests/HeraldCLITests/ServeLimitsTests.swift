// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// `herald serve`'s connection limits as flags and environment variables.
@Suite(.heavy) struct ServeLimitsTests {
    @Test("--max-connections reaches the server: with one connection open, the next is closed unanswered")
    func maxConnectionsFlag() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-limits-cli")
        defer { directory.remove() }
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--no-emulator", "--data-dir", directory.path, "--max-connections", "1",
            ])
        try #require(try await server.waitFor("Herald listening on", timeout: 300), "\(server.printed)")
        let port = try HeavyProcessTests.ServeCrashTests().port(of: server, "Herald listening on")
        // The first connection is answered (so the server counted it) and kept open; the second
        // is read until the server closes it. The sockets' 30 s timeout is only a hang guard.
        let client = """
            import http.client, socket, sys
            port = int(sys.argv[1])
            first = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            first.request("GET", "/health")
            first.getresponse().read()
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            data = b""
            try:
                s.sendall(b"GET /health HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n")
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                print("EOF", data.decode("latin-1").split("\\r\\n")[0])
            except (ConnectionResetError, BrokenPipeError):
                print("EOF", data.decode("latin-1").split("\\r\\n")[0])
            except socket.timeout:
                print("HANG", data.decode("latin-1").split("\\r\\n")[0])
            """
        let result = try await ProcessRunner.run("python3", ["-c", client, "\(port)"], timeout: 300)
        _ = try await server.stop()
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "EOF", "\(result.standardOutput) \(result.standardError)")
    }

    @Test("limits out of range, as flags or environment variables, are refused before anything starts")
    func bounds() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-limits-options")
        defer { directory.remove() }
        let serve = ["serve", "--port", "0", "--no-emulator", "--data-dir", directory.path]
        for (arguments, message) in [
            (["--max-connections=-1"], "maxConnections must be 0 (no cap) to 1000000"),
            (["--request-head-timeout-seconds", "3601"], "requestHeadTimeoutSeconds must be 0 (no bound) to 3600"),
            (["--idle-timeout-seconds=-5"], "idleTimeoutSeconds must be 0 (no bound) to 86400"),
        ] {
            let result = try await ProcessRunner.run(BackgroundProcess.heraldExecutable, serve + arguments)
            #expect(result.exitCode == 64, "\(result.standardError)")
            #expect(result.standardError.contains(message), "\(result.standardError)")
        }
        let environment = try await ProcessRunner.run("env", ["HERALD_MAX_CONNECTIONS=many", BackgroundProcess.heraldExecutable] + serve)
        #expect(environment.exitCode == 64, "\(environment.standardError)")
        #expect(environment.standardError.contains("HERALD_MAX_CONNECTIONS must be a number"))
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/herald.sqlite"), "nothing is created for a refused start")
    }
}

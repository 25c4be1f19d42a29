// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// `herald send` as a user runs it, against an emulator over real sockets.
@Suite(.heavy) struct SendCommandTests {
    func arguments(_ fixture: EmulatorFixture) throws -> [String] {
        let keyFile = try fixture.directory.write("AuthKey.p8", fixture.key.privateKeyPEM)
        return [
            "send", "--key-file", keyFile, "--key-id", EmulatorFixture.keyID, "--team-id", EmulatorFixture.teamID,
            "--host", "127.0.0.1", "--port", "\(fixture.emulator.ports[.development]!)", "--ca-file", fixture.caFile,
            "--topic", EmulatorFixture.bundleID,
        ]
    }

    @Test("one notification from flags: accepted, printed, delivered")
    func single() async throws {
        try await withEmulatorFixture(clock: EmulatorClock()) { fixture in
            let token = try await fixture.createDevice()
            let result = try await ProcessRunner.run(
                BackgroundProcess.heraldExecutable,
                try self.arguments(fixture) + ["--token", token, "--title", "Hello", "--body", "from the CLI", "--badge", "2"]
            )
            #expect(result.exitCode == 0, "\(result.standardError)")
            #expect(result.standardOutput.hasPrefix("accepted apns-id="))
            let inbox = try await fixture.inbox(token)
            let aps = (inbox.first?["payload"] as? [String: Any])?["aps"] as? [String: Any]
            #expect((aps?["alert"] as? [String: Any])?["title"] as? String == "Hello")
            #expect(aps?["badge"] as? Int == 2)
        }
    }

    @Test("many from standard input: tokens and JSON lines, failures by line, a summary, exit status 1")
    func many() async throws {
        try await withEmulatorFixture(clock: EmulatorClock()) { fixture in
            let first = try await fixture.createDevice()
            let second = try await fixture.createDevice()
            let gone = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/devices/\(gone)/uninstall")
            let input = [
                "# tokens, one per line",
                first,
                "",
                #"{"token":"\#(second)","payload":{"aps":{"alert":"from JSON"}},"collapseId":"c1"}"#,
                "not-a-token",
                gone,
                first,
            ].joined(separator: "\n")
            let result = try await ProcessRunner.run(
                BackgroundProcess.heraldExecutable,
                try self.arguments(fixture) + ["--payload", #"{"aps":{"alert":"from stdin"}}"#],
                input: Data(input.utf8)
            )
            #expect(result.exitCode == 1)
            #expect(result.standardError.contains("line 5: not sent"), "\(result.standardError)")
            #expect(result.standardError.contains("line 6 ("), "\(result.standardError)")
            #expect(result.standardError.contains("410 Unregistered"))
            #expect(result.standardError.contains("sent 4, accepted 3, failed 1 (1 invalidate_token), 1 invalid lines not sent"))
            #expect(!result.standardError.contains(gone), "device tokens are shown redacted")
            #expect(try await fixture.inbox(first).count == 2)
            let secondInbox = try await fixture.inbox(second)
            #expect(((secondInbox.first?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String == "from JSON")
        }
    }

    @Test("all accepted from standard input: exit status 0")
    func allAccepted() async throws {
        try await withEmulatorFixture(clock: EmulatorClock()) { fixture in
            var tokens: [String] = []
            for _ in 0..<5 { tokens.append(try await fixture.createDevice()) }
            let result = try await ProcessRunner.run(
                BackgroundProcess.heraldExecutable,
                try self.arguments(fixture) + ["--body", "hi"],
                input: Data((tokens + tokens).joined(separator: "\n").utf8)
            )
            #expect(result.exitCode == 0, "\(result.standardError)")
            #expect(result.standardError.contains("sent 10, accepted 10, failed 0"))
        }
    }

    @Test(
        "bad options are refused with exit status 64 before anything is sent",
        arguments: [
            ["--priority", "7"],
            ["--push-type", "telegram"],
            ["--payload", "{not json"],
            ["--payload", "{}", "--title", "both"],
            ["--environment", "staging"],
            ["--token", "xyz"],
        ])
    func badOptions(extra: [String]) async throws {
        try await withEmulatorFixture(clock: EmulatorClock()) { fixture in
            let result = try await ProcessRunner.run(
                BackgroundProcess.heraldExecutable,
                try self.arguments(fixture) + (extra.contains("--token") ? [] : ["--token", String(repeating: "a", count: 64)]) + extra
            )
            #expect(result.exitCode == 64, "\(extra): \(result.standardError)")
            #expect(try await fixture.counter("connections") == 0)
        }
    }

    @Test("missing credentials are refused")
    func noCredentials() async throws {
        let result = try await ProcessRunner.run(BackgroundProcess.heraldExecutable, ["send", "--topic", "com.example.app", "--token", "aa"])
        #expect(result.exitCode == 64)
        #expect(result.standardError.contains("--key-file"))
    }

    @Test(".apns files for simctl: the payload with its Simulator Target Bundle, at most 4096 bytes, no credentials")
    func simulatorFile() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-apns")
        defer { directory.remove() }
        let file = directory.path + "/out.apns"
        let written = try await ProcessRunner.run(
            BackgroundProcess.heraldExecutable,
            [
                "send", "--simulator-file", file, "--topic", "com.example.app", "--title", "Hi", "--body", "from the simulator", "--badge", "2",
            ])
        #expect(written.exitCode == 0, "\(written.standardError)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        #expect(object["Simulator Target Bundle"] as? String == "com.example.app")
        let aps = try #require(object["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Hi" && aps["badge"] as? Int == 2)

        let big = directory.path + "/big.apns"
        let tooLarge = try await ProcessRunner.run(
            BackgroundProcess.heraldExecutable,
            [
                "send", "--simulator-file", big, "--topic", "com.example.app", "--push-type", "background",
                "--payload", #"{"aps":{"content-available":1},"x":"\#(String(repeating: "y", count: 4080))"}"#,
            ])
        #expect(tooLarge.exitCode == 64)
        #expect(tooLarge.standardError.contains("4096"), "\(tooLarge.standardError)")
        #expect(!FileManager.default.fileExists(atPath: big), "nothing written")
        let voip = try await ProcessRunner.run(
            BackgroundProcess.heraldExecutable,
            [
                "send", "--simulator-file", big, "--topic", "com.example.app.voip", "--push-type", "voip", "--payload", "{}",
            ])
        #expect(voip.exitCode == 64 && voip.standardError.contains("voip"))
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMEmulator
import Foundation
import HeraldTesting
import Testing

/// Google's own Python clients (google-auth, firebase-admin) against the emulator, unchanged but
/// for their endpoint: `Tests/ThirdParty/fcm_clients.py`. Needs `python3 -m pip install
/// google-auth firebase-admin requests`; runs only with HERALD_THIRD_PARTY=1.
@Suite(.heavy, .enabled(if: ProcessInfo.processInfo.environment["HERALD_THIRD_PARTY"] == "1"))
struct ThirdPartyClientTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("ThirdParty/fcm_clients.py").path

    @Test("google-auth and firebase-admin get a token, send, renew and see FCM's errors")
    func pythonClients() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let directory = try TemporaryDirectory(prefix: "fcm-clients")
            defer { directory.remove() }
            let accountFile = try directory.write("service-account.json", fixture.account.json)
            let result = try await ProcessRunner.run(
                "env",
                [
                    "FCM_EMULATOR=\(fixture.emulator.baseURL)", "FCM_SERVICE_ACCOUNT=\(accountFile)", "FCM_TOKEN=\(token)",
                    "python3", Self.script,
                ],
                timeout: 120
            )
            #expect(result.exitCode == 0, "\(result.standardOutput)\n\(result.standardError)")
            let line = try #require(result.standardOutput.split(separator: "\n").last.map(String.init))
            let report = try JSONValue.parse(line)
            #expect(report["failures"]?.arrayValue?.isEmpty == true)
            #expect(report["unregistered"]?.stringValue == "UnregisteredError")
            #expect(report["invalid"]?.stringValue == "InvalidArgumentError")

            let inbox = await fixture.emulator.messages(token, count: 3)
            let first = try #require(inbox.first)
            #expect(report["name"]?.stringValue?.hasSuffix("/" + first.messageID) == true)
            #expect(first.kind == "notification")
            #expect(first.title == "Hello")
            #expect(first.body == "From firebase-admin")
            #expect(first.data == ["source": "fcm_clients.py", "n": "1"])
            #expect(first.priority == "high")
            #expect(first.ttlSeconds == 3600)
            #expect(first.collapseKey == "greeting")
            #expect(inbox.map { $0.data["n"] } == ["1", "2", "3"])
            let counters = fixture.emulator.counters
            #expect(counters.tokensIssued >= 2)
            #expect(counters.refused["UNAUTHENTICATED"] == 1)
            #expect(counters.refused["UNAVAILABLE"] == 1)
            #expect(counters.refused["UNREGISTERED"] == 1)
            #expect(counters.refused["INVALID_ARGUMENT"] == 1)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldTesting
import Testing
import WebPushEmulator

/// pywebpush (py-vapid, http-ece) against the emulator, unchanged:
/// `Tests/ThirdParty/webpush_pywebpush.py`. Needs `python3 -m pip install pywebpush py-vapid
/// http-ece`; runs only with HERALD_THIRD_PARTY=1.
@Suite(.heavy, .enabled(if: ProcessInfo.processInfo.environment["HERALD_THIRD_PARTY"] == "1"))
struct ThirdPartyClientTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("ThirdParty/webpush_pywebpush.py").path

    @Test("pywebpush pushes to every personality, is refused with another key and told 410/404 after unsubscribe")
    func pywebpush() async throws {
        try await withFixture { fixture in
            let result = try await ProcessRunner.run(
                "env", ["WEBPUSH_EMULATOR=\(fixture.emulator.origin)", "python3", Self.script], timeout: 120
            )
            #expect(result.exitCode == 0, "\(result.standardOutput)\n\(result.standardError)")
            let line = try #require(result.standardOutput.split(separator: "\n").last.map(String.init))
            let report = try JSONValue.parse(line)
            #expect(report["failures"]?.arrayValue?.isEmpty == true, "\(line)")
            for personality in WebPushPersonality.allCases {
                let id = try #require(report["browsers"]?[personality.rawValue]?.stringValue)
                let inbox = try #require(fixture.emulator.inbox(id))
                #expect(inbox.messages.map(\.text) == ["Hello from pywebpush ✓ 🔔 (\(personality.rawValue))"])
                #expect(inbox.messages.first?.id == report["messages"]?[personality.rawValue]?.stringValue)
                #expect(inbox.messages.first?.ttl == 60)
                #expect(!inbox.subscribed)
                let wrongKey = report["wrongKey"]?[personality.rawValue]?.intValue
                #expect(wrongKey == (personality == .mozilla ? 401 : 403))
                #expect(report["unsubscribed"]?[personality.rawValue]?.intValue == 410)
            }
            let counters = fixture.emulator.counters
            #expect(counters.accepted == 3)
            #expect(counters.refused["vapidKeyMismatch"] == 3)
            #expect(counters.refused["unsubscribed"] == 3)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// The README's "A push in one minute" lines, run as written against a real `herald serve`
/// (only the ports and the printed admin key are filled in), so the first thing a newcomer tries
/// cannot silently break.
@Suite(.heavy) struct ReadmeTests {
    static var readme: String {
        get throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            return try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        }
    }

    /// The first ```sh block after `heading`.
    static func block(after heading: String, in text: String) -> String? {
        guard let start = text.range(of: heading), let open = text.range(of: "```sh\n", range: start.upperBound..<text.endIndex),
            let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex)
        else { return nil }
        return String(text[open.upperBound..<close.lowerBound])
    }

    @Test("the README's one-minute push works as written")
    func onePush() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-readme")
        defer { directory.remove() }
        let (server, api, control, admin) = try await DeviceCommandTests.serve(directory)
        let port = try #require(api.split(separator: ":").last.flatMap { Int($0) })

        var script = try #require(Self.block(after: "### A push in one minute", in: try Self.readme), "the README has the walkthrough")
        let keyLine = try #require(script.split(separator: "\n").first { $0.hasPrefix("KEY=") }, "it sets KEY")
        script = script.replacingOccurrences(of: String(keyLine), with: "KEY=\(admin)")
            .replacingOccurrences(of: "localhost:8080", with: "127.0.0.1:\(port)")
            .replacingOccurrences(of: "localhost:2198", with: "127.0.0.1:\(control)")
        let result = try await ProcessRunner.run("bash", ["-euo", "pipefail", "-c", script], timeout: 300)
        #expect(result.exitCode == 0, "\(result.standardError)")
        // The inbox, printed last (curl -s adds no newline between answers), holds the
        // notification the walkthrough sent.
        let start = try #require(result.standardOutput.range(of: #"{"notifications""#, options: .backwards), "\(result.standardOutput)")
        let inbox = String(result.standardOutput[start.lowerBound...])
        let notifications = (try JSONSerialization.jsonObject(with: Data(inbox.utf8)) as? [String: Any])?["notifications"] as? [[String: Any]]
        let alert = ((notifications?.first?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? [String: Any]
        #expect(notifications?.count == 1, "\(result.standardOutput)")
        #expect(alert?["title"] as? String == "Hello")
        _ = try await server.stop()
    }
}

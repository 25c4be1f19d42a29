// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

extension DashboardBrowserTests {
    @Test(
        "Live Activities: a start refused with its code, one started by push-to-start for a user's virtual device, listed, updated and ended after a confirmation; the emulator received the start, the update and the end",
        .enabled(if: available || required, Comment(rawValue: skipMessage))
    )
    func liveActivitiesInBrowser() async throws {
        try #require(Self.available, Comment(rawValue: Self.skipMessage))
        let directory = try TemporaryDirectory(prefix: "herald-live-activities")
        defer { directory.remove() }
        // An app without credentials: its pushes go to the built-in emulator.
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path, "--emulator-port", "0", "--emulator-production-port", "0",
                "--emulator-control-port", "0", "--log-level", "warning",
            ])
        try #require(try await server.waitFor("Herald listening on", timeout: 300), "\(server.printed)")
        let lines = server.printed.split(separator: "\n").map(String.init)
        let admin = try #require(lines.first { $0.contains("hk_") }?.trimmingCharacters(in: .whitespaces))
        let base = try #require(lines.first { $0.contains("Herald listening on") }?.split(separator: " ").last.map(String.init))
        let control = try #require(lines.first { $0.contains("control API") }?.split(separator: " ").last.map(String.init))
        let created = try await ProcessRunner.run(
            "curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", base + "/v1/apps", "-H", "authorization: Bearer \(admin)",
                "-d", #"{"id":"live","bundleId":"com.example.live"}"#,
            ])
        try #require(created.standardOutput == "201")
        let artifacts =
            ProcessInfo.processInfo.environment["HERALD_TEST_ARTIFACTS"]
            ?? FileManager.default.currentDirectoryPath + "/.build/test-artifacts/dashboard"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "Browser/live_activities_test.py"
        ).path
        let browser = try BackgroundProcess(
            "/usr/bin/env",
            [
                "HERALD_URL=\(base)", "HERALD_ADMIN_KEY=\(admin)", "HERALD_APP=live", "HERALD_BUNDLE=com.example.live",
                "HERALD_EMULATOR_CONTROL=\(control)", "HERALD_ARTIFACTS=\(artifacts)", "HERALD_CHROMIUM=\(Self.chromium)",
                "HERALD_CHROMEDRIVER=\(Self.chromedriver)", "python3", script,
            ])
        let status = try await browser.stop(signal: 0, timeout: 300)
        #expect(status == 0, "\(browser.printed)")
        #expect(browser.printed.contains("dashboard live activities passed"))
        _ = try await server.stop()
    }
}

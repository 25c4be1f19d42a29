// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// Web Push in real browsers, against a `herald serve` process with its built-in Web Push
/// emulator, through the web SDK Herald serves at `/sdk/`:
/// - Firefox ESR (`Tests/Browser/firefox_webpush_test.py`, no driver): subscribes through the
///   emulator's autopush WebSocket, decrypts Herald's pushes with its own code (acks 100), shows
///   them from herald-sw.js, whose receipts Herald records; a subscription registered with the
///   wrong auth secret gets ack 101 and shows nothing; a VAPID key rotation, a renewed
///   subscription (pushsubscriptionchange), logout and unsubscribe, each followed to its effect;
/// - Chromium (`Tests/Browser/chromium_sw_test.py`, Selenium): Herald's payload, as the emulator's
///   virtual browser decrypted it, delivered to herald-sw.js through DevTools'
///   `ServiceWorker.deliverPushMessage`: shown, received, opened; plain text shown generically.
///
/// Skipped without the browser (and, for Chromium, its driver and Selenium) with how to install
/// them; `HERALD_REQUIRE_BROWSER=1` (set by CI) makes that a failure instead. Firefox's output
/// goes to `.build/test-artifacts/dashboard/firefox-webpush.log` (or `HERALD_TEST_ARTIFACTS`).
@Suite(.heavy) struct WebPushBrowserTests {
    static let firefox = ProcessInfo.processInfo.environment["HERALD_FIREFOX"] ?? "/usr/bin/firefox-esr"
    static let firefoxAvailable = FileManager.default.isExecutableFile(atPath: firefox)
    static let firefoxSkip = "needs Firefox ESR (apt-get install firefox-esr)"

    @Test(
        "Firefox ESR: subscribe with a user assertion, a push decrypted (ack 100), shown by herald-sw.js, received and opened with its action; the wrong auth secret: ack 101, nothing shown; VAPID rotation, renewal, logout, unsubscribe",
        .enabled(if: firefoxAvailable || DashboardBrowserTests.required, Comment(rawValue: firefoxSkip))
    )
    func firefoxEndToEnd() async throws {
        try #require(Self.firefoxAvailable, Comment(rawValue: Self.firefoxSkip))
        try await Self.run(
            script: "firefox_webpush_test.py", prefix: "herald-firefox-webpush", environment: ["HERALD_FIREFOX=\(Self.firefox)"],
            passed: "firefox webpush passed")
    }

    @Test(
        "Chromium: Herald's declarative payload delivered to herald-sw.js by DevTools, shown with its action, received and opened; plain text shown generically",
        .enabled(if: DashboardBrowserTests.available || DashboardBrowserTests.required, Comment(rawValue: DashboardBrowserTests.skipMessage))
    )
    func chromiumServiceWorker() async throws {
        try #require(DashboardBrowserTests.available, Comment(rawValue: DashboardBrowserTests.skipMessage))
        try await Self.run(
            script: "chromium_sw_test.py", prefix: "herald-chromium-sw",
            environment: ["HERALD_CHROMIUM=\(DashboardBrowserTests.chromium)", "HERALD_CHROMEDRIVER=\(DashboardBrowserTests.chromedriver)"],
            passed: "chromium sw passed")
    }

    /// Runs `Tests/Browser/<script>` against `herald serve` on a new data directory, with its Web
    /// Push emulator on a free port and the script's page origin (a port chosen here) allowed to
    /// call Herald from the browser (`--web-origin`).
    static func run(script name: String, prefix: String, environment: [String], passed: String) async throws {
        let directory = try TemporaryDirectory(prefix: prefix)
        defer { directory.remove() }
        let pagePort = try freeLoopbackPort()
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path, "--emulator-port", "0", "--emulator-production-port", "0",
                "--emulator-control-port", "0", "--fcm-emulator-port", "0", "--webpush-emulator-port", "0",
                "--web-origin", "http://127.0.0.1:\(pagePort)", "--log-level", "warning",
            ])
        try #require(try await server.waitFor("Herald listening on", timeout: 300), "\(server.printed)")
        // The Web Push emulator's line comes after the listening line.
        try #require(try await server.waitFor("Web Push emulator", timeout: 60), "\(server.printed)")
        let lines = server.printed.split(separator: "\n").map(String.init)
        let admin = try #require(lines.first { $0.contains("hk_") }?.trimmingCharacters(in: .whitespaces))
        let base = try #require(lines.first { $0.contains("Herald listening on") }?.split(separator: " ").last.map(String.init))
        let emulatorLine = try #require(lines.first { $0.contains("Web Push emulator") })
        // "Built-in Web Push emulator: http://127.0.0.1:P (push endpoints, control API; Firefox: ws://127.0.0.1:P/)"
        let emulator = try #require(emulatorLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init), "\(emulatorLine)")
        let artifacts =
            ProcessInfo.processInfo.environment["HERALD_TEST_ARTIFACTS"]
            ?? FileManager.default.currentDirectoryPath + "/.build/test-artifacts/dashboard"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "Browser/" + name
        ).path
        // A background process, not ProcessRunner: this runs for tens of seconds and must not hold
        // one of the few process slots the other suites' short commands share.
        let browser = try BackgroundProcess(
            "/usr/bin/env",
            environment + [
                "HERALD_URL=\(base)", "HERALD_ADMIN_KEY=\(admin)", "HERALD_WEBPUSH_EMULATOR=\(emulator)", "HERALD_PAGE_PORT=\(pagePort)",
                "HERALD_ARTIFACTS=\(artifacts)", "python3", script,
            ])
        // Signal 0 only waits (bounded) for it to finish.
        let status = try await browser.stop(signal: 0, timeout: 400)
        #expect(status == 0, "\(browser.printed)\n--- herald serve:\n\(server.printed)")
        #expect(browser.printed.contains(passed))
        _ = try await server.stop()
    }
}

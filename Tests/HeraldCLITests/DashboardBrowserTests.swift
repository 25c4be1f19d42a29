// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// The dashboard in a real browser: Debian's `chromium` and `chromium-driver`, driven by
/// Selenium (`Tests/Browser/dashboard_test.py`), against a `herald serve` process with its
/// built-in emulator. Screenshots go to `.build/test-artifacts/dashboard` (or
/// `HERALD_TEST_ARTIFACTS`).
///
/// Without Chromium or Selenium it is skipped with how to install them; `HERALD_REQUIRE_BROWSER=1`
/// (set by CI) makes that a failure instead.
@Suite(.heavy) struct DashboardBrowserTests {
    static let chromium = ProcessInfo.processInfo.environment["HERALD_CHROMIUM"] ?? "/usr/bin/chromium"
    static let chromedriver = ProcessInfo.processInfo.environment["HERALD_CHROMEDRIVER"] ?? "/usr/bin/chromedriver"
    static let required = ProcessInfo.processInfo.environment["HERALD_REQUIRE_BROWSER"] == "1"

    /// Chromium, its driver and Python's selenium package are all there.
    static let available: Bool = {
        guard FileManager.default.isExecutableFile(atPath: chromium), FileManager.default.isExecutableFile(atPath: chromedriver) else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import selenium"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()

    static let skipMessage = "needs chromium and chromium-driver (apt-get install chromium chromium-driver) and selenium (pip install selenium)"

    @Test(
        "sign in, find a device, send a test push through the form, see it on the emulated phone and in the delivery log",
        .enabled(if: available || required, Comment(rawValue: skipMessage))
    )
    func dashboardInBrowser() async throws {
        try #require(Self.available, Comment(rawValue: Self.skipMessage))
        let directory = try TemporaryDirectory(prefix: "herald-dashboard")
        defer { directory.remove() }
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path, "--emulator-port", "0", "--emulator-production-port", "0",
                "--emulator-control-port", "0", "--fcm-emulator-port", "0", "--webpush-emulator-port", "0", "--log-level", "warning",
            ])
        try #require(try await server.waitFor("Herald listening on", timeout: 300), "\(server.printed)")
        let lines = server.printed.split(separator: "\n").map(String.init)
        let admin = try #require(lines.first { $0.contains("hk_") }?.trimmingCharacters(in: .whitespaces))
        let base = try #require(lines.first { $0.contains("Herald listening on") }?.split(separator: " ").last.map(String.init))
        let created = try await ProcessRunner.run(
            "curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", base + "/v1/apps", "-H", "authorization: Bearer \(admin)",
                "-d", #"{"id":"demo","bundleId":"com.example.demo"}"#,
            ])
        try #require(created.standardOutput == "201")
        // A key with an expiry, for the keys page (a day ahead).
        // Whole seconds: the page shows seconds.
        let expiry = (Int64(Date().timeIntervalSince1970) + 86_400) * 1000
        let key = try await ProcessRunner.run(
            "curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", base + "/v1/keys", "-H", "authorization: Bearer \(admin)",
                "-d", #"{"scope":"send","appId":"demo","name":"backend","expiresAt":\#(expiry)}"#,
            ])
        try #require(key.standardOutput == "201")
        let artifacts =
            ProcessInfo.processInfo.environment["HERALD_TEST_ARTIFACTS"]
            ?? FileManager.default.currentDirectoryPath + "/.build/test-artifacts/dashboard"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "Browser/dashboard_test.py"
        ).path
        // A background process, not ProcessRunner: this runs for tens of seconds and must not hold
        // one of the few process slots the other suites' short commands share.
        let browser = try BackgroundProcess(
            "/usr/bin/env",
            [
                "HERALD_URL=\(base)", "HERALD_ADMIN_KEY=\(admin)", "HERALD_APP=demo", "HERALD_KEY_EXPIRY=\(expiry)", "HERALD_ARTIFACTS=\(artifacts)",
                "HERALD_CHROMIUM=\(Self.chromium)", "HERALD_CHROMEDRIVER=\(Self.chromedriver)", "python3", script,
            ])
        // Signal 0 only waits (bounded) for it to finish.
        let status = try await browser.stop(signal: 0, timeout: 300)
        #expect(status == 0, "\(browser.printed)")
        #expect(browser.printed.contains("dashboard browser test passed"))
        #expect(FileManager.default.fileExists(atPath: artifacts + "/08-phone-received.png"))
        _ = try await server.stop()
    }

    @Test(
        "a new team from an empty server to a first push without curl: create the app, upload a bad key and a good one and check each, make, rotate and revoke an API key, a virtual device, the push, the history",
        .enabled(if: available || required, Comment(rawValue: skipMessage))
    )
    func setupWalk() async throws {
        try #require(Self.available, Comment(rawValue: Self.skipMessage))
        let directory = try TemporaryDirectory(prefix: "herald-walk")
        defer { directory.remove() }
        // Apps with credentials of their own are sent to the built-in emulator's sandbox port
        // (as to Apple): a port chosen here, since --apns-port must name it before it is open.
        let port = try freeLoopbackPort()
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path, "--emulator-port", "\(port)", "--emulator-production-port", "0",
                "--emulator-control-port", "0", "--fcm-emulator-port", "0", "--webpush-emulator-port", "0", "--apns-host", "127.0.0.1", "--apns-port",
                "\(port)", "--apns-ca-file",
                directory.path + "/emulator/ca.pem", "--log-level", "warning",
            ])
        try #require(try await server.waitFor("Herald listening on", timeout: 300), "\(server.printed)")
        let lines = server.printed.split(separator: "\n").map(String.init)
        let admin = try #require(lines.first { $0.contains("hk_") }?.trimmingCharacters(in: .whitespaces))
        let base = try #require(lines.first { $0.contains("Herald listening on") }?.split(separator: " ").last.map(String.init))
        let control = try #require(lines.first { $0.contains("control API") }?.split(separator: " ").last.map(String.init))
        let artifacts =
            ProcessInfo.processInfo.environment["HERALD_TEST_ARTIFACTS"]
            ?? FileManager.default.currentDirectoryPath + "/.build/test-artifacts/dashboard"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "Browser/dashboard_test.py"
        ).path
        let browser = try BackgroundProcess(
            "/usr/bin/env",
            [
                "HERALD_WALK=1", "HERALD_URL=\(base)", "HERALD_ADMIN_KEY=\(admin)", "HERALD_EMULATOR_CONTROL=\(control)",
                "HERALD_ARTIFACTS=\(artifacts)", "HERALD_CHROMIUM=\(Self.chromium)", "HERALD_CHROMEDRIVER=\(Self.chromedriver)", "python3", script,
            ])
        let status = try await browser.stop(signal: 0, timeout: 300)
        #expect(status == 0, "\(browser.printed)")
        #expect(browser.printed.contains("dashboard walk passed"))
        // The uploaded keys never reach the log.
        #expect(!server.printed.contains("PRIVATE KEY"))
        _ = try await server.stop()
    }

    @Test(
        "broadcast channels: a refusal shown with its code, a channel made and listed, a Live Activity broadcast from the send page received once on the channel at the emulator, a delete that asks first",
        .enabled(if: available || required, Comment(rawValue: skipMessage))
    )
    func channelsInBrowser() async throws {
        try await self.walkOnEmulator(
            prefix: "herald-channels", script: "dashboard_test.py", environment: ["HERALD_WALK=channels"], passed: "dashboard channels passed")
    }

    @Test(
        "Android and the web: an FCM service account uploaded (a refusal shown with its code) and checked (key and project OK), an FCM phone's platform in the devices list and on the overview, the Android message in the send preview, a push to the phone; a browser subscribed with the app's VAPID key listed as Web with its endpoint masked, the web message previewed and decrypted as previewed, a new key",
        .enabled(if: available || required, Comment(rawValue: skipMessage))
    )
    func androidInBrowser() async throws {
        try #require(Self.available, Comment(rawValue: Self.skipMessage))
        let directory = try TemporaryDirectory(prefix: "herald-android")
        defer { directory.remove() }
        // Apps with a service account of their own send to the built-in FCM emulator (as to
        // Google): a port chosen here, since --fcm-endpoint must name it before it is open.
        let port = try freeLoopbackPort()
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path, "--emulator-port", "0", "--emulator-production-port", "0",
                "--emulator-control-port", "0", "--webpush-emulator-port", "0", "--fcm-emulator-port", "\(port)", "--fcm-endpoint",
                "http://127.0.0.1:\(port)", "--log-level",
                "warning",
            ])
        // The Web Push emulator's line, whole, is printed last: every line needed is there once it is.
        try #require(try await server.waitFor("Firefox: ws://", timeout: 300), "\(server.printed)")
        let lines = server.printed.split(separator: "\n").map(String.init)
        let admin = try #require(lines.first { $0.contains("hk_") }?.trimmingCharacters(in: .whitespaces))
        let base = try #require(lines.first { $0.contains("Herald listening on") }?.split(separator: " ").last.map(String.init))
        let fcm = try #require(
            lines.first { $0.contains("Built-in FCM emulator:") }?.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let webPush = try #require(
            lines.first { $0.contains("Built-in Web Push emulator:") }?.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let created = try await ProcessRunner.run(
            "curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", base + "/v1/apps", "-H", "authorization: Bearer \(admin)",
                "-d", #"{"id":"demo","bundleId":"com.example.demo"}"#,
            ])
        try #require(created.standardOutput == "201")
        let artifacts =
            ProcessInfo.processInfo.environment["HERALD_TEST_ARTIFACTS"]
            ?? FileManager.default.currentDirectoryPath + "/.build/test-artifacts/dashboard"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "Browser/dashboard_android_test.py"
        ).path
        let browser = try BackgroundProcess(
            "/usr/bin/env",
            [
                "HERALD_URL=\(base)", "HERALD_ADMIN_KEY=\(admin)", "HERALD_APP=demo", "HERALD_FCM_EMULATOR=\(fcm)",
                "HERALD_WEBPUSH_EMULATOR=\(webPush)",
                "HERALD_ARTIFACTS=\(artifacts)",
                "HERALD_CHROMIUM=\(Self.chromium)", "HERALD_CHROMEDRIVER=\(Self.chromedriver)", "python3", script,
            ])
        let status = try await browser.stop(signal: 0, timeout: 300)
        #expect(status == 0, "\(browser.printed)")
        #expect(browser.printed.contains("dashboard android passed"))
        // The uploaded key never reaches the log.
        #expect(!server.printed.contains("PRIVATE KEY"))
        _ = try await server.stop()
    }

    /// Runs a browser walk (`Tests/Browser/<script>`) against `herald serve` on a new data
    /// directory with an app "live" without credentials, so its pushes and channels go to the
    /// built-in emulator, whose control API the walk is given too.
    func walkOnEmulator(prefix: String, script name: String, environment: [String] = [], passed: String) async throws {
        try #require(Self.available, Comment(rawValue: Self.skipMessage))
        let directory = try TemporaryDirectory(prefix: prefix)
        defer { directory.remove() }
        let server = try BackgroundProcess(
            BackgroundProcess.heraldExecutable,
            [
                "serve", "--port", "0", "--data-dir", directory.path, "--emulator-port", "0", "--emulator-production-port", "0",
                "--emulator-control-port", "0", "--fcm-emulator-port", "0", "--webpush-emulator-port", "0", "--log-level", "warning",
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
            "Browser/" + name
        ).path
        let browser = try BackgroundProcess(
            "/usr/bin/env",
            environment + [
                "HERALD_URL=\(base)", "HERALD_ADMIN_KEY=\(admin)", "HERALD_APP=live", "HERALD_BUNDLE=com.example.live",
                "HERALD_EMULATOR_CONTROL=\(control)", "HERALD_ARTIFACTS=\(artifacts)", "HERALD_CHROMIUM=\(Self.chromium)",
                "HERALD_CHROMEDRIVER=\(Self.chromedriver)", "python3", script,
            ])
        let status = try await browser.stop(signal: 0, timeout: 300)
        #expect(status == 0, "\(browser.printed)")
        #expect(browser.printed.contains(passed))
        _ = try await server.stop()
    }
}

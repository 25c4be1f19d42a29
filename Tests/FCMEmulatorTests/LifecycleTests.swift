// SPDX-License-Identifier: Apache-2.0
import FCMEmulator
import HeraldTesting
import Logging
import ServiceLifecycle
import Testing

/// Running the emulator as a `Service`, and binding failures.
@Suite(.heavy) struct LifecycleTests {
    static let quiet = Logger(label: "fcm-emulator-test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test("as a Service it serves until graceful shutdown")
    func service() async throws {
        let emulator = FCMEmulator(logger: Self.quiet)
        let group = ServiceGroup(configuration: .init(services: [emulator], logger: Self.quiet))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let port = try await emulator.waitUntilListening()
            #expect(emulator.port == port)
            #expect(emulator.baseURL == "http://127.0.0.1:\(port)")
            #expect(emulator.tokenURL == "http://127.0.0.1:\(port)/token")
            let health = try await RawHTTPClient.json(port: port, "GET", "/emulator/health")
            #expect(health.status == 200)
            let unknown = try await RawHTTPClient.json(port: port, "POST", "/fcm/send", "{}")
            #expect(unknown.status == 404)
            #expect(unknown.googleStatus == "NOT_FOUND")
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await #expect(throws: (any Error).self) { try await emulator.waitUntilListening() }
        await #expect(throws: RawHTTPError.self) { try await RawHTTPClient.json(port: emulator.port ?? 1, "GET", "/emulator/health") }
    }

    @Test("start() throws when the port is taken")
    func portTaken() async throws {
        let first = FCMEmulator(logger: Self.quiet)
        try await first.start()
        var configuration = FCMEmulator.Configuration()
        configuration.port = try #require(first.port)
        let second = FCMEmulator(configuration: configuration, logger: Self.quiet)
        await #expect(throws: (any Error).self) { try await second.start() }
        await second.stop()
        await first.stop()
    }
}

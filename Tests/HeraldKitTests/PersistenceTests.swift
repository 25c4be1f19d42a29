// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import HeraldKit
import HeraldServer
import HeraldTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// HeraldKit's state file: a registration made while Herald is down survives a relaunch (a new
/// client over the same file) and lands once Herald is back (a real `herald serve`, through a
/// real socket, stopped and started again on the same port); the user survives too; a cancelled
/// call ends with `CancellationError`.
@Suite(.heavy) struct PersistenceTests {
    /// One `herald serve` over `directory` (its SQLite file and master key), on `port` (0: a free one).
    static func withServer<T: Sendable>(
        _ directory: TemporaryDirectory, masterKey: [UInt8], port: Int, _ body: @escaping @Sendable (RunningServer) async throws -> T
    ) async throws -> T {
        var configuration = ServerConfiguration()
        configuration.port = port
        configuration.dataDirectory = directory.path + "/server"
        configuration.emulatorPorts = (0, 0, 0)
        configuration.fcmEmulatorPort = 0
        configuration.webPushEmulatorPort = 0
        configuration.masterKey = masterKey
        configuration.engine.pollInterval = .milliseconds(20)
        configuration.engine.lease = .seconds(600)
        configuration.engine.apnsTimeout = .seconds(300)
        return try await withHeraldServer(configuration: configuration, body)
    }

    @Test("a registration made while Herald is down is kept in the state file, survives a relaunch and lands when Herald is back; so does the user")
    func relaunchAfterOutage() async throws {
        let directory = try TemporaryDirectory(prefix: "heraldkit-state")
        defer { directory.remove() }
        let masterKey = SecretBox.generateMasterKey()
        let stateFile = URL(fileURLWithPath: directory.path + "/app/Application Support/HeraldKit/state.json")
        let quick = RetryPolicy(maximumAttempts: 2, initialDelaySeconds: 0.01, maximumDelaySeconds: 0.05)
        let phone = PushToken.device(Data(repeating: 0x11, count: 32))
        let voip = PushToken.voip(Data(repeating: 0x22, count: 32))
        let activity = PushToken.liveActivity(Data(repeating: 0x33, count: 32), activityID: "match-9")
        let details = DeviceDetails(environment: .sandbox, appVersion: "3.0")

        // Launch 1, Herald up: the app, its keys; the phone registers and ann signs in.
        let (port, admin, registerKey) = try await Self.withServer(directory, masterKey: masterKey, port: 0) { server in
            let base = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
            let admin = try #require(server.initialAdminKey)
            _ = try await HeraldClientTests.admin(base, admin, "POST", "/v1/apps", #"{"id":"demo","bundleId":"com.example.app"}"#)
            let registerKey = try #require(
                try await HeraldClientTests.admin(base, admin, "POST", "/v1/keys", #"{"scope":"register","appId":"demo"}"#)["key"] as? String)
            let client = HeraldClient(
                serverURL: base, appID: "demo", registerKey: registerKey, retry: quick, persistence: .file(stateFile),
                userAssertions: try await HeraldClientTests.backend(base, admin))
            try await client.register(phone, details)
            try await client.setUser("ann")
            return (server.port, admin, registerKey)
        }
        let base = try #require(URL(string: "http://127.0.0.1:\(port)"))
        // The backend's assertions, asked of whichever server is up.
        let assertions: @Sendable (String, String) async throws -> String = { user, token in
            let made = try await HeraldClientTests.admin(
                base, admin, "POST", "/v1/apps/demo/user-assertions", #"{"userId":"\#(user)","token":"\#(token)"}"#)
            return try #require(made["assertion"] as? String)
        }

        // Still launch 1, Herald down: the VoIP token cannot be registered; it stays pending.
        let first = HeraldClient(
            serverURL: base, appID: "demo", registerKey: registerKey, retry: quick, persistence: .file(stateFile), userAssertions: assertions)
        #expect(first.userID == "ann")
        do {
            try await first.register(voip, details)
            Issue.record("nobody is listening")
        } catch let error as HeraldKitError {
            #expect(error.code == "network")
        }
        #expect(first.registrations.first { $0.token == voip }?.status == .pendingRegistration)
        #expect(first.registrations.first { $0.token == voip }?.details.userID == "ann", "the remembered user")

        // Launch 2 (a new client over the same file), Herald up again on the same port.
        try await Self.withServer(directory, masterKey: masterKey, port: port) { server in
            #expect(server.port == port)
            let relaunched = HeraldClient(
                serverURL: base, appID: "demo", registerKey: registerKey, retry: quick, persistence: .file(stateFile), userAssertions: assertions)
            #expect(relaunched.userID == "ann", "setUser survives the relaunch")
            #expect(relaunched.registrations.map(\.status).sorted { $0.description < $1.description } == [.pendingRegistration, .registered])
            // The next call (a new Live Activity token, no user given) also carries the pending one.
            let started = try await relaunched.register(activity, details)
            #expect(started.userID == "ann")
            #expect(try await relaunched.retryPending() == 0)
            #expect(relaunched.registrations.allSatisfy { $0.status == .registered })
            let anns = try await HeraldClientTests.admin(base, admin, "GET", "/v1/apps/demo/devices?userId=ann")
            let tokens = Set(((anns["devices"] as? [[String: Any]]) ?? []).compactMap { $0["token"] as? String })
            #expect(tokens == [phone.hex, voip.hex, activity.hex])
        }
        // What the file holds is JSON an operator can read: no key, no assertion in it.
        let saved = try String(contentsOf: stateFile, encoding: .utf8)
        #expect(saved.contains(voip.hex) && !saved.contains(registerKey))
    }

    /// Accepts connections and never answers.
    static let silentServer = #"""
        import socket, sys, time
        server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(8)
        print("listening", server.getsockname()[1], flush=True)
        held = []
        while True:
            connection, _ = server.accept(); held.append(connection)
            print("accepted", flush=True)
        """#

    @Test("cancelling a call ends it with CancellationError, not a network error; the work stays pending")
    func cancellation() async throws {
        let directory = try TemporaryDirectory(prefix: "heraldkit-cancel")
        defer { directory.remove() }
        let script = try directory.write("silent.py", Self.silentServer)
        let server = try BackgroundProcess("/usr/bin/env", ["python3", script])
        do {
            try await Self.cancel(server, directory)
        } catch {
            _ = try await server.stop(signal: SIGKILL)
            throw error
        }
        _ = try await server.stop(signal: SIGKILL)
    }

    static func cancel(_ server: BackgroundProcess, _ directory: TemporaryDirectory) async throws {
        let port = try await Self.printed(server, "listening ")
        let client = HeraldClient(
            serverURL: try #require(URL(string: "http://127.0.0.1:\(port)")), appID: "demo", registerKey: "hk_x",
            retry: RetryPolicy(maximumAttempts: 1),  // one attempt: no back-off sleep to notice the cancellation instead
            persistence: .file(URL(fileURLWithPath: directory.path + "/state.json")))
        let token = PushToken.device(Data([0xAA, 0xBB]))
        let call = Task { try await client.register(token, DeviceDetails(environment: .production)) }
        // Once the request is at the server (which never answers), cancel the caller.
        _ = try await Self.printed(server, "accepted")
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        #expect(client.registrations.first?.status == .pendingRegistration)
    }

    /// What follows `prefix` on the line the process printed (a hang guard, not a window).
    static func printed(_ process: BackgroundProcess, _ prefix: String) async throws -> String {
        try #require(try await process.line(startingWith: prefix), "no \(prefix) from \(process.printed)")
    }
}

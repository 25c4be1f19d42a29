// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// A registration the lane is writing when graceful shutdown begins: the server stops listening,
/// but answers it once it is written, and only then stops. The write is held by a row lock that
/// another PostgreSQL session takes on the device, and let go once the server no longer listens.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)), .heavy)
struct RegistrationLaneShutdownTests {
    /// What the server's body hands over before it returns (and the shutdown begins).
    struct InFlight: Sendable {
        let port: Int
        /// psql, holding the device's row lock until its input closes.
        let lock: BackgroundProcess
        /// curl, waiting for the registration's answer.
        let client: BackgroundProcess
    }

    @Test("a registration the lane is writing when graceful shutdown begins is answered 200 and written before the server stops")
    func inFlightAcrossShutdown() async throws {
        try await PostgresTestDatabase.with { database in
            let directory = try TemporaryDirectory(prefix: "herald-lane-stop")
            defer { directory.remove() }
            let configuration = {
                var configuration = ServerTests.configuration(directory)
                configuration.database = database.url
                configuration.metrics = ServerDocumentTests.registry
                return configuration
            }()
            let token = String(repeating: "0", count: 62) + "b1"
            let (handed, hand) = AsyncStream.makeStream(of: InFlight.self)
            let answer = try await withThrowingTaskGroup(of: String?.self) { group in
                group.addTask {
                    try await withHeraldServer(configuration: configuration) { server in
                        defer { hand.finish() }
                        let api = ServerTests.HTTP(base: "http://127.0.0.1:\(server.port)")
                        let metrics = "http://127.0.0.1:\(try #require(server.metricsPort))/metrics"
                        let admin = try #require(server.initialAdminKey)
                        #expect(
                            try await api.call("POST", "/v1/apps", key: admin, json: #"{"id":"halt","bundleId":"com.example.halt"}"#).status == 201)
                        let made = try await api.call("POST", "/v1/keys", key: admin, json: #"{"scope":"register","appId":"halt"}"#)
                        let key = try #require(made.body["key"] as? String)
                        #expect(try await api.call("PUT", "/v1/apps/halt/devices/\(token)", key: key, json: "{}").status == 200)
                        let lock = try BackgroundProcess(
                            "/usr/bin/env",
                            [
                                "psql", database.url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", "BEGIN",
                                "-c", "SELECT id FROM devices WHERE token = '\(token)' FOR UPDATE", "-c", #"\echo locked"#,
                                "-c", #"\! cat > /dev/null"#, "-c", "COMMIT",
                            ], keepInput: true)
                        try #require(try await lock.waitFor("locked", timeout: 300), "psql: \(lock.printed)")
                        let answered = try await RegistrationLaneTests.answered(metrics, app: "halt")
                        let client = try BackgroundProcess(
                            "/usr/bin/env",
                            [
                                "curl", "-s", "-m", "300", "-X", "PUT", "-H", "Authorization: Bearer \(key)", "-H", "Content-Type: application/json",
                                "--data", #"{"locale":"de_DE"}"#, "-w", "\nstatus=%{http_code}\n", api.base + "/v1/apps/halt/devices/\(token)",
                            ])
                        hand.yield(InFlight(port: server.port, lock: lock, client: client))
                        // The registration waits for the row: in PostgreSQL, and counted as the lane's.
                        _ = try await ServerTests().eventually(
                            "the registration waits for the device's row lock",
                            {
                                try await database.psql(
                                    """
                                    SELECT count(*) > 0 FROM pg_stat_activity
                                    WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%devices%'
                                    """)
                            }, until: { $0 == "t" })
                        #expect(try await RegistrationLaneTests.answered(metrics, app: "halt") == answered + 1)
                    }
                    return nil
                }
                group.addTask {
                    var inFlight: InFlight?
                    for await handed in handed { inFlight = handed }
                    guard let inFlight else { return nil }
                    // However this ends, the lock goes (else the server's shutdown would wait for it).
                    defer { inFlight.lock.closeInput() }
                    // The shutdown has begun once the server no longer listens.
                    _ = try await ServerTests().eventually(
                        "the server stops listening",
                        { try await ProcessRunner.run("curl", ["-s", "-o", "/dev/null", "http://127.0.0.1:\(inFlight.port)/livez"]).exitCode },
                        until: { $0 == 7 })
                    #expect(inFlight.client.printed.isEmpty, "answered before its write: \(inFlight.client.printed)")
                    inFlight.lock.closeInput()
                    return try await inFlight.client.line(startingWith: "status=")
                }
                var answer: String?
                for try await result in group { answer = answer ?? result }
                return answer
            }
            #expect(answer == "200")
            #expect(try await database.psql("SELECT locale FROM devices WHERE token = '\(token)'") == "de_DE")
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// `/health` on PostgreSQL names why the database cannot be used — refused, no such database —
/// instead of only that the pool gave no answer within 3 s; `/livez` stays alive meanwhile.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)), .heavy)
struct HealthCauseTests {
    let server = ServerTests()

    /// A TCP forwarder to PostgreSQL (python3); stopping it makes the database refuse connections.
    static let forwarder = #"""
        import socket, sys, threading
        target = (sys.argv[1], int(sys.argv[2]))
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        print("forwarding on", listener.getsockname()[1], "ready", flush=True)

        def pipe(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        while True:
            client, _ = listener.accept()
            upstream = socket.create_connection(target)
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        """#

    @Test("a database that refuses connections: /health says so")
    func refused() async throws {
        try await PostgresTestDatabase.with { database in
            var components = try #require(URLComponents(string: database.url))
            let forwarder = try BackgroundProcess("python3", ["-c", Self.forwarder, components.host ?? "127.0.0.1", "\(components.port ?? 5432)"])
            try #require(try await forwarder.waitFor("ready", timeout: 300), "\(forwarder.printed)")
            let line = try #require(forwarder.printed.split(separator: "\n").first { $0.hasPrefix("forwarding on") })
            let port: Int = try #require(Int(String(line.split(separator: " ")[2])))
            components.port = port
            let url = try #require(components.string)
            try await self.server.withServer(configure: { $0.database = url }) { context in
                // Healthy first. On a loaded machine one probe can miss its 3 s: the wait is for
                // the first healthy answer, not for the first answer.
                let healthy = try await self.server.eventually("a healthy answer", { try await context.api.call("GET", "/health") }) {
                    $0.status == 200
                }
                #expect(healthy.status == 200, "\(healthy.body)")
                _ = try await forwarder.stop(signal: SIGKILL)
                // Asked again and again, the pool soon answers only that its circuit breaker
                // tripped; every answer still names the refusal.
                for _ in 0..<3 {
                    let health = try await context.api.call("GET", "/health")
                    #expect(health.status == 503)
                    let cause = try #require(health.body["database"] as? String)
                    #expect(cause.contains("connection refused"), "\(cause)")
                }
                // Liveness does not ask the database: the process is alive, only not ready.
                #expect(try await context.api.call("GET", "/livez").status == 204)
            }
        }
    }

    @Test("a database that no longer exists: /health names SQLSTATE 3D000")
    func missingDatabase() async throws {
        try await PostgresTestDatabase.with { database in
            try await self.server.withServer(configure: { $0.database = database.url }) { context in
                #expect(try await context.api.call("GET", "/health").status == 200)
                await database.drop()
                let health = try await context.api.call("GET", "/health")
                #expect(health.status == 503)
                let cause = try #require(health.body["database"] as? String)
                #expect(cause.contains("3D000 the database does not exist"), "\(cause)")
            }
        }
    }
}

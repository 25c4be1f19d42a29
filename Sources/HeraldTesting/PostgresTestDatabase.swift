// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A fresh PostgreSQL database per test, on the server `HERALD_TEST_POSTGRES_URL` names (see
/// `scripts/postgres-test-server`). Without that variable PostgreSQL tests are skipped, unless
/// `HERALD_REQUIRE_POSTGRES=1` (CI), which makes them fail instead.
package struct PostgresTestDatabase: Sendable {
    /// The server's URL, or nil when none is configured.
    package static var serverURL: String? {
        ProcessInfo.processInfo.environment["HERALD_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// PostgreSQL tests run: a server is configured, or CI requires them (and they fail without one).
    package static var enabled: Bool { self.serverURL != nil || self.required }

    package static var required: Bool { ProcessInfo.processInfo.environment["HERALD_REQUIRE_POSTGRES"] == "1" }

    package static let skipMessage = """
        PostgreSQL tests skipped: start a server with `scripts/postgres-test-server start` and set \
        HERALD_TEST_POSTGRES_URL to the URL it prints
        """

    /// The script that starts, stops and restarts the test server.
    package static var controlScript: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/postgres-test-server").path
    }

    package let name: String
    /// The new database's URL.
    package let url: String
    let server: String

    /// Creates an empty database named `herald_test_<random>`.
    package init() async throws {
        guard let server = Self.serverURL else {
            throw PostgresTestError(message: "HERALD_REQUIRE_POSTGRES=1 but HERALD_TEST_POSTGRES_URL is not set")
        }
        self.server = server
        self.name = "herald_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        guard var components = URLComponents(string: server) else { throw PostgresTestError(message: "bad HERALD_TEST_POSTGRES_URL") }
        components.path = "/" + self.name
        self.url = components.string ?? server
        try await Self.psql(server, "CREATE DATABASE \(self.name)")
    }

    /// Runs `body` with a new database, dropped afterwards whatever happens.
    package static func with<Result: Sendable>(_ body: (PostgresTestDatabase) async throws -> Result) async throws -> Result {
        let database = try await PostgresTestDatabase()
        do {
            let result = try await body(database)
            await database.drop()
            return result
        } catch {
            await database.drop()
            throw error
        }
    }

    /// Drops the database, disconnecting whoever is still on it.
    package func drop() async {
        _ = try? await Self.psql(self.server, "DROP DATABASE IF EXISTS \(self.name) WITH (FORCE)")
    }

    /// Runs one SQL command with psql; returns its unaligned, tuples-only output.
    @discardableResult
    package static func psql(_ url: String, _ sql: String) async throws -> String {
        let result = try await ProcessRunner.run("psql", [url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], timeout: 120)
        guard result.exitCode == 0 else { throw PostgresTestError(message: "psql: \(result.standardError)") }
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    package func psql(_ sql: String) async throws -> String { try await Self.psql(self.url, sql) }
}

package struct PostgresTestError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { self.message }
}

/// A store driver a test runs on: SQLite always; PostgreSQL when a test server is configured
/// (or required, in CI).
package enum StoreDriver: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    package static var enabled: [StoreDriver] { PostgresTestDatabase.enabled ? [.sqlite, .postgres] : [.sqlite] }

    package var description: String { self.rawValue }
}

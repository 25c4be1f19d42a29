// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import Logging
import NIOCore
import PostgresNIO

/// Where a PostgreSQL database is, from a `postgres://user:password@host:port/database` URL.
/// `?sslmode=` as libpq reads it — `disable`, `prefer` (the default: TLS if the server offers
/// it), `require` (TLS, certificate not checked), `verify-full` (TLS, certificate and host name
/// checked against the system's CAs); `?host=/path` for a Unix socket folder.
package struct PostgresLocation: Sendable, Hashable {
    package var host: String
    package var port: Int
    package var socketPath: String?
    package var username: String
    package var password: String?
    package var database: String
    package var sslMode: String

    package init(url text: String) throws {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? "") else {
            throw HeraldError.invalid("a PostgreSQL database is given as postgres://user:password@host:port/database", code: "bad_database_url")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        self.host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        self.port = components.port ?? 5432
        self.socketPath = query["host"].flatMap { $0.hasPrefix("/") ? "\($0)/.s.PGSQL.\(components.port ?? 5432)" : nil }
        self.username =
            components.percentEncodedUser.flatMap { $0.removingPercentEncoding } ?? ProcessInfo.processInfo.environment["USER"] ?? "postgres"
        self.password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.database = path.isEmpty ? self.username : path
        self.sslMode = query["sslmode"] ?? "prefer"
        guard ["disable", "prefer", "require", "verify-full"].contains(self.sslMode) else {
            throw HeraldError.invalid("sslmode must be disable, prefer, require or verify-full", code: "bad_database_url")
        }
    }

    var clientConfiguration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketPath {
            configuration = .init(unixSocketPath: socketPath, username: self.username, password: self.password, database: self.database)
        } else {
            // Like libpq, prefer and require encrypt without checking the certificate; verify-full checks it.
            var unchecked = TLSConfiguration.makeClientConfiguration()
            unchecked.certificateVerification = .none
            let tls: PostgresClient.Configuration.TLS =
                switch self.sslMode {
                case "disable": .disable
                case "require": .require(unchecked)
                case "verify-full": .require(.makeClientConfiguration())
                default: .prefer(unchecked)
                }
            configuration = .init(
                host: self.host, port: self.port, username: self.username, password: self.password, database: self.database, tls: tls)
        }
        configuration.options.maximumConnections = 12
        configuration.options.connectTimeout = .seconds(5)
        // No keep-alive queries. postgres-nio (1.33) sends a statement on a channel without a
        // promise for the write: one that reaches a connection already closed is never answered.
        // Its keep-alive (every 30 s) lands on a connection its idle timeout (60 s) is closing
        // often enough that the pool's `run()` then never returns, and Herald never exits.
        // Idle connections are closed after a minute anyway, and a closed one is noticed at once.
        configuration.options.keepAliveBehavior = nil
        return configuration
    }
}

/// One row, read by column number; a value that is NULL or of another type reads as nil.
struct Row: StoredRow {
    let cells: PostgresRandomAccessRow

    init(_ row: PostgresRow) { self.cells = row.makeRandomAccess() }

    func int(_ index: Int) -> Int64? { (try? self.cells[index].decode(Int64?.self)) ?? nil }
    func string(_ index: Int) -> String? { (try? self.cells[index].decode(String?.self)) ?? nil }
    func bool(_ index: Int) -> Bool? { (try? self.cells[index].decode(Bool?.self)) ?? nil }
    func double(_ index: Int) -> Double? { (try? self.cells[index].decode(Double?.self)) ?? nil }
    func bytes(_ index: Int) -> [UInt8]? { ((try? self.cells[index].decode(ByteBuffer?.self)) ?? nil).map { Array($0.readableBytesView) } }
    func isNull(_ index: Int) -> Bool { self.cells[index].bytes == nil }
}

/// A value bound to a statement.
enum Value {
    case int(Int64?)
    case text(String?)
    case bytes([UInt8]?)
    case bool(Bool)
    case double(Double)
    case texts([String])
    case ints([Int64])
}

/// SQL put together piece by piece, each value bound as `$n` (never spliced into the text).
struct Query {
    var sql: String
    var binds = PostgresBindings()

    init(_ sql: String = "", _ values: [Value] = []) {
        self.sql = sql
        for value in values { _ = self.bind(value) }
    }

    /// Binds a value and returns its placeholder.
    mutating func bind(_ value: Value) -> String {
        switch value {
        case .int(let value): self.binds.append(value)
        case .text(let value): self.binds.append(value)
        case .bytes(let value): self.binds.append(value.map { ByteBuffer(bytes: $0) })
        case .bool(let value): self.binds.append(value)
        case .double(let value): self.binds.append(value)
        case .texts(let value): self.binds.append(value)
        case .ints(let value): self.binds.append(value)
        }
        return "$\(self.binds.count)"
    }

    var postgres: PostgresQuery { PostgresQuery(unsafeSQL: self.sql, binds: self.binds) }
}

/// A statement whose text never changes, run by name: PostgreSQL parses and plans it once per
/// connection instead of at every call (planning was about a seventh of its work in a broadcast).
protocol FixedStatement {
    static var sql: String { get }
}

/// `Statement` as postgres-nio prepares it: named after the type, rows handed back as they come.
private struct Prepared<Statement: FixedStatement>: PostgresPreparedStatement {
    static var name: String { "herald.\(Statement.self)" }
    static var sql: String { Statement.sql }
    let bindings: PostgresBindings
    func makeBindings() -> PostgresBindings { self.bindings }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

/// A connection lent for one unit of work.
struct Connection {
    let connection: PostgresConnection
    let logger: Logger
    /// The connection's event loop, where each statement is checked and written (see ``EventLoopTaskExecutor``).
    let loop: EventLoopTaskExecutor

    init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
        self.loop = EventLoopTaskExecutor(connection.eventLoop)
    }

    /// Runs `statement` on the connection's event loop once it is known to be open there. A
    /// connection the server closed is refused here, as 503 `database_unavailable`, instead of
    /// being written to; one still open has its statement written within the same turn of the
    /// loop (no suspension comes between this check and postgres-nio's write), so it is answered.
    private func onLoop<Result>(_ statement: () async throws -> Result) async throws -> Result {
        try await withTaskExecutorPreference(self.loop) {
            if self.connection.isClosed { throw PostgresStore.unavailable("the connection was closed") }
            return try await statement()
        }
    }

    @discardableResult
    func query(_ query: Query) async throws -> [Row] {
        try await self.onLoop {
            var rows: [Row] = []
            for try await row in try await self.connection.query(query.postgres, logger: self.logger) { rows.append(Row(row)) }
            return rows
        }
    }

    @discardableResult
    func query(_ sql: String, _ values: [Value] = []) async throws -> [Row] {
        try await self.query(Query(sql, values))
    }

    /// Runs a fixed statement, prepared on this connection the first time.
    @discardableResult
    func query<Statement: FixedStatement>(_ statement: Statement.Type, _ values: [Value] = []) async throws -> [Row] {
        try await self.onLoop {
            var rows: [Row] = []
            for try await row in try await self.connection.execute(Prepared<Statement>(bindings: Query("", values).binds), logger: self.logger) {
                rows.append(Row(row))
            }
            return rows
        }
    }

    func execute(_ sql: String) async throws {
        try await self.onLoop { _ = try await self.connection.query(PostgresQuery(unsafeSQL: sql), logger: self.logger) }
    }

    /// `COPY table (columns) FROM STDIN` of `text`, rows in COPY's text format. `table` and
    /// `columns` are Herald's own names, never input.
    func copy(into table: String, columns: [String], _ text: ByteBuffer) async throws {
        try await self.onLoop {
            try await self.connection.copyFrom(table: table, columns: columns, logger: self.logger) { writer in
                try await writer.write(text)
            }
        }
    }

    /// `begin` (a `BEGIN …` statement), `body`, then COMMIT; ROLLBACK and `body`'s own error if it throws.
    func transaction<Result>(_ begin: String, _ body: (Connection) async throws -> Result) async throws -> Result {
        try await self.execute(begin)
        do {
            let result = try await body(self)
            try await self.execute("COMMIT")
            return result
        } catch {
            try? await self.execute("ROLLBACK")
            throw error
        }
    }
}

extension PSQLError {
    /// The SQLSTATE the server reported, if it did.
    var sqlState: String? { self.serverInfo?[.sqlState] }
}

/// A database error as Herald reports it: the SQLSTATE and the server's message (never its
/// detail, which can quote row values such as tokens), or what went wrong with the connection.
package struct PostgresStoreError: Error, CustomStringConvertible, Sendable {
    package var sqlState: String?
    package var message: String

    init(_ error: PSQLError) {
        self.sqlState = error.sqlState
        if let message = error.serverInfo?[.message] {
            self.message = message
        } else {
            self.message = "PostgreSQL \(error.code)"
        }
    }

    package var description: String { self.sqlState.map { "PostgreSQL error \($0): \(self.message)" } ?? self.message }

    /// What the API and the logs see: the server's refusal as a `PostgresStoreError`; no server
    /// at all (connection refused, lost, timed out) as 503 `database_unavailable`.
    static func map(_ error: PSQLError) -> any Error {
        if error.serverInfo == nil { return PostgresStore.unavailable("\(error.code)") }
        return PostgresStoreError(error)
    }
}

extension Error {
    var postgresState: String? { (self as? PSQLError)?.sqlState ?? (self as? PostgresStoreError)?.sqlState }

    /// An error that could go away by itself (a lost connection, a timeout, a cancel, a deadlock,
    /// a lack of resources), as opposed to one the same statement would meet again.
    var isTransient: Bool {
        if self is CancellationError { return true }
        if let error = self as? HeraldError { return error.code == "database_unavailable" }
        guard let state = self.postgresState else { return self is PSQLError }
        return ["08", "40", "53", "55", "57", "58"].contains(String(state.prefix(2)))
    }
    /// A unique or primary-key constraint refused the write.
    var isUniqueViolation: Bool { self.postgresState == "23505" }
}

/// Whether an operation got its connection or was given up first: exactly one of the two wins.
final class LeaseState: @unchecked Sendable {
    private enum State { case waiting, started, abandoned }
    private let lock = NSLock()
    private var state = State.waiting

    /// The connection arrived: true unless the operation was already given up.
    func start() -> Bool { self.transition(to: .started) }
    /// The wait is over: true unless the connection arrived first.
    func abandon() -> Bool { self.transition(to: .abandoned) }
    var started: Bool { self.lock.withLock { self.state == .started } }

    private func transition(to next: State) -> Bool {
        self.lock.withLock {
            guard self.state == .waiting else { return false }
            self.state = next
            return true
        }
    }
}

/// Hands a non-escaping operation to the child task that runs it while its caller waits: the
/// closure runs on one task at a time, never after `withLease` returns.
struct UncheckedTransfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

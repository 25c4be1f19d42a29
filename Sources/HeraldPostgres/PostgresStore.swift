// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
package import HeraldCore
package import Logging
import NIOCore
import PostgresNIO

/// The shared store: one PostgreSQL database that several `herald serve` processes work from.
/// Deliveries are claimed with `FOR UPDATE SKIP LOCKED` under a lease, an audience is expanded
/// chunk by chunk by whichever process locks its notification next, and idempotency keys are a
/// unique constraint.
package final class PostgresStore: HeraldStore {
    let client: PostgresClient
    let logger: Logger
    /// Apps and keys as every request reads them: another process's change is seen within its lifetime.
    let lookups = LookupCache()
    /// Registrations arriving together, committed together.
    let registrations = RegistrationBatch()
    /// Where the pool connects, for ``check()`` to find out why it cannot.
    let location: PostgresLocation?

    init(client: PostgresClient, logger: Logger, location: PostgresLocation? = nil) {
        self.client = client
        self.logger = logger
        self.location = location
    }

    /// Connects to the database at `url`, applies pending migrations, and runs `body` with the
    /// store; the connection pool runs (and reconnects) until `body` returns.
    package static func withStore<Result: Sendable>(
        url: String, logger: Logger, _ body: (PostgresStore) async throws -> Result
    ) async throws -> Result {
        try await self.withStore(location: try PostgresLocation(url: url), logger: logger, body)
    }

    package static func withStore<Result: Sendable>(
        location: PostgresLocation, logger: Logger, _ body: (PostgresStore) async throws -> Result
    ) async throws -> Result {
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            do {
                let store = PostgresStore(client: client, logger: logger, location: location)
                try await store.migrate()
                let result = try await body(store)
                logger.debug("closing the PostgreSQL connection pool")
                group.cancelAll()
                try await group.waitForAll()
                logger.debug("PostgreSQL connection pool closed")
                return result
            } catch {
                group.cancelAll()
                throw error
            }
        }
    }

    // MARK: connections and transactions

    /// How long an operation waits for a connection before answering 503 `database_unavailable`
    /// (the pool itself would wait a minute before giving up on an unreachable server).
    static let leaseTimeout: Duration = .seconds(10)

    /// Runs `body` on a pooled connection. No connection within `leaseTimeout`, or none to be had
    /// at all, is `database_unavailable`; a connection lent after that is handed straight back.
    private func withLease<Result: Sendable>(_ body: (Connection) async throws -> Result) async throws -> Result {
        let lease = LeaseState()
        do {
            return try await withoutActuallyEscaping(body) { body in
                let work = UncheckedTransfer(body)
                return try await withThrowingTaskGroup(of: Result?.self) { group in
                    group.addTask {
                        try await self.client.withConnection { connection in
                            guard lease.start() else { throw Self.unavailable("no connection within \(Self.leaseTimeout)") }
                            return try await work.value(Connection(connection: connection, logger: self.logger))
                        }
                    }
                    group.addTask {
                        try? await Task.sleep(for: Self.leaseTimeout)
                        // Given up only if the connection has not arrived; else the body runs on.
                        if lease.abandon() { throw Self.unavailable("no connection within \(Self.leaseTimeout)") }
                        return nil
                    }
                    while let next = try await group.next() {
                        if let result = next {
                            group.cancelAll()
                            return result
                        }
                    }
                    throw Self.unavailable("the operation ended without a result")
                }
            }
        } catch let error as PSQLError {
            throw PostgresStoreError.map(error)
        } catch let error as HeraldError {
            throw error
        } catch let error as PostgresStoreError {
            throw error
        } catch  where !lease.started {
            // The pool could not connect at all (its circuit breaker, a refused connection).
            throw Self.unavailable("\(error)")
        }
    }

    static func unavailable(_ why: String) -> HeraldError {
        HeraldError(code: "database_unavailable", "the database cannot be reached (\(why))")
    }

    func read<Result: Sendable>(_ body: (Connection) async throws -> Result) async throws -> Result {
        try await self.withLease(body)
    }

    /// Several reads that must agree with each other, in one read-only snapshot.
    func snapshot<Result: Sendable>(_ body: (Connection) async throws -> Result) async throws -> Result {
        try await self.withLease { db in try await db.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body) }
    }

    /// Runs `body` in a transaction; its own errors come back as they were thrown. A deadlock or
    /// a serialization failure (which PostgreSQL resolves by aborting one side) is retried.
    @discardableResult
    func write<Result: Sendable>(_ body: (Connection) async throws -> Result) async throws -> Result {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await self.withLease { db in try await db.transaction("BEGIN", body) }
            } catch  where attempt < 4 && ["40001", "40P01"].contains(error.postgresState ?? "") {
                continue
            }
        }
    }

    package func schemaVersion() async throws -> Int {
        try await self.read { db in Int(try await db.query("SELECT coalesce(max(version), 0) FROM schema_version").first?.int(0) ?? 0) }
    }

    /// A round trip to the database, for `/health`. The pool, when it cannot connect, only
    /// keeps its callers waiting (up to `leaseTimeout`); so when it has not answered within a
    /// second, or fails with no more than that it cannot connect, a connection of the check's own
    /// finds out why — refused, authentication failed, no such database — and that is thrown as
    /// `database_unavailable` (the full error is logged).
    package func check() async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await self.read { db in _ = try await db.query("SELECT 1") }
                } catch let error as HeraldError where error.code == "database_unavailable" {
                    // The pool's own answer can be only that its circuit breaker tripped (on a
                    // busy machine it trips before the second below is over): find out why.
                    try await self.connectionFailure()
                    throw error
                }
                return true
            }
            group.addTask {
                try await Task.sleep(for: .seconds(1))
                try await self.connectionFailure()
                return false
            }
            // The first to answer decides, unless it is the diagnosis finding nothing wrong.
            while let answered = try await group.next() {
                if answered {
                    group.cancelAll()
                    return
                }
            }
        }
    }

    /// Throws why a new connection to the database fails, or returns when one can be made.
    func connectionFailure() async throws {
        guard let location = self.location else { return }
        let configuration: PostgresConnection.Configuration
        if let socketPath = location.socketPath {
            configuration = .init(unixSocketPath: socketPath, username: location.username, password: location.password, database: location.database)
        } else {
            // The same TLS as the pool's (see `PostgresLocation.clientConfiguration`).
            var unchecked = TLSConfiguration.makeClientConfiguration()
            unchecked.certificateVerification = .none
            let tls: PostgresConnection.Configuration.TLS =
                switch location.sslMode {
                case "disable": .disable
                case "require": .require(try NIOSSLContext(configuration: unchecked))
                case "verify-full": .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                default: .prefer(try NIOSSLContext(configuration: unchecked))
                }
            configuration = .init(
                host: location.host, port: location.port, username: location.username, password: location.password,
                database: location.database, tls: tls
            )
        }
        var connect = configuration
        connect.options.connectTimeout = .seconds(2)
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: connect, id: 0, logger: self.logger)
        } catch {
            let cause = Self.connectionCause(error)
            self.logger.warning(
                "health: cannot connect to PostgreSQL", metadata: ["herald.cause": "\(cause)", "error": "\(String(reflecting: error))"])
            throw Self.unavailable(cause)
        }
        try? await connection.close()
    }

    /// Why a connection failed, in words that name no host, user or database (`/health` is
    /// public): a network error's errno, or the server's SQLSTATE and its condition.
    static func connectionCause(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let state = error.serverInfo?[.sqlState] {
                let condition: String? =
                    switch state {
                    case "28P01", "28000": "authentication failed"
                    case "3D000": "the database does not exist"
                    case "53300": "too many connections"
                    case "57P03": "the server is starting up or shutting down"
                    case "57P01": "the server is shutting down"
                    default: nil
                    }
                return "PostgreSQL refused the connection: \(state)" + (condition.map { " \($0)" } ?? "")
            }
            if let underlying = error.underlying { return connectionCause(underlying) }
            return "PostgreSQL \(error.code)"
        }
        if let error = error as? NIOConnectionError {
            if let failure = error.connectionErrors.first { return connectionCause(failure.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "the host name does not resolve" }
        }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)).lowercased() }
        if let error = error as? ChannelError, case .connectTimeout = error { return "no connection within 2 s" }
        if error is NIOSSLError { return "TLS failed" }
        return "\(type(of: error))"
    }

    // MARK: migrations

    /// The same history as the SQLite store's (version 1: the registry and the outbox; 2:
    /// chunked expansion, history, revocation, end-to-end keys), in PostgreSQL's types. One
    /// difference: a delivery's notification is not a foreign key, whose per-row check cost a
    /// third of a broadcast's inserts; notifications are only deleted once they have no
    /// deliveries left (retention), so none is ever orphaned. Applied
    /// in one transaction under an advisory lock, so processes starting together apply each once.
    static let migrations: [[String]] = [
        [
            "CREATE TABLE apps (id TEXT PRIMARY KEY, bundle_id TEXT NOT NULL, created_at BIGINT NOT NULL)",
            """
            CREATE TABLE credentials (
                app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, environment TEXT NOT NULL,
                sealed BYTEA NOT NULL, updated_at BIGINT NOT NULL, PRIMARY KEY (app_id, environment))
            """,
            """
            CREATE TABLE api_keys (
                id TEXT PRIMARY KEY, hash BYTEA NOT NULL, scope TEXT NOT NULL,
                app_id TEXT REFERENCES apps(id) ON DELETE CASCADE, name TEXT, created_at BIGINT NOT NULL)
            """,
            """
            CREATE TABLE devices (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                token TEXT NOT NULL, kind TEXT NOT NULL, environment TEXT NOT NULL, user_id TEXT, locale TEXT,
                time_zone TEXT, app_version TEXT, platform TEXT, activity_id TEXT, attributes_type TEXT,
                active BOOLEAN NOT NULL DEFAULT TRUE, created_at BIGINT NOT NULL, last_registered_at BIGINT NOT NULL,
                invalidated_at BIGINT, invalidation_reason TEXT, UNIQUE (app_id, token))
            """,
            "CREATE INDEX devices_user ON devices (app_id, user_id)",
            """
            CREATE TABLE device_tags (
                device_id BIGINT NOT NULL REFERENCES devices(id) ON DELETE CASCADE, tag TEXT NOT NULL, PRIMARY KEY (device_id, tag))
            """,
            "CREATE INDEX device_tags_tag ON device_tags (tag, device_id)",
            """
            CREATE TABLE invalidations (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, app_id TEXT NOT NULL, device_id BIGINT NOT NULL,
                reason TEXT NOT NULL, apns_timestamp BIGINT, at BIGINT NOT NULL, applied BOOLEAN NOT NULL)
            """,
            "CREATE INDEX invalidations_device ON invalidations (device_id)",
            """
            CREATE TABLE notifications (
                id TEXT PRIMARY KEY, app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                priority BIGINT, expiration BIGINT, collapse_id TEXT, payload BYTEA NOT NULL,
                created_at BIGINT NOT NULL, scheduled_at BIGINT NOT NULL, idempotency_key TEXT,
                UNIQUE (app_id, idempotency_key))
            """,
            """
            CREATE TABLE deliveries (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                notification_id TEXT NOT NULL,
                device_id BIGINT NOT NULL, token TEXT NOT NULL, environment TEXT NOT NULL, push_type TEXT NOT NULL,
                topic TEXT NOT NULL, state TEXT NOT NULL, attempts BIGINT NOT NULL DEFAULT 0,
                next_attempt_at BIGINT NOT NULL, lease_until BIGINT, apns_id TEXT, status BIGINT, reason TEXT,
                latency_ms BIGINT, updated_at BIGINT NOT NULL)
            """,
            "CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE state = 'pending'",
            "CREATE INDEX deliveries_notification ON deliveries (notification_id)",
        ],
        [
            "ALTER TABLE notifications ADD COLUMN bundle_id TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE notifications ADD COLUMN targeting TEXT",
            "ALTER TABLE notifications ADD COLUMN device_ids BIGINT[]",
            "ALTER TABLE notifications ADD COLUMN push_type TEXT",
            "ALTER TABLE notifications ADD COLUMN local_time TEXT",
            "ALTER TABLE notifications ADD COLUMN audience_size BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE notifications ADD COLUMN expand_after BIGINT",
            "ALTER TABLE notifications ADD COLUMN expand_until BIGINT",
            "ALTER TABLE notifications ADD COLUMN cancelled_at BIGINT",
            "ALTER TABLE notifications ADD COLUMN placeholder BYTEA",
            "UPDATE notifications SET audience_size = (SELECT count(*) FROM deliveries x WHERE x.notification_id = notifications.id)",
            "CREATE INDEX notifications_expanding ON notifications (scheduled_at, id) WHERE expand_after IS NOT NULL",
            "CREATE INDEX notifications_recent ON notifications (app_id, created_at)",
            "CREATE INDEX devices_app ON devices (app_id, id)",
            "CREATE INDEX devices_activity ON devices (app_id, activity_id) WHERE activity_id IS NOT NULL",
            "DROP INDEX deliveries_notification",
            "CREATE INDEX deliveries_notification ON deliveries (notification_id, device_id)",
            "UPDATE deliveries SET next_attempt_at = lease_until WHERE state = 'pending' AND lease_until > next_attempt_at",
            "ALTER TABLE api_keys ADD COLUMN revoked_at BIGINT",
            "ALTER TABLE devices ADD COLUMN public_key BYTEA",
            "ALTER TABLE devices ADD COLUMN public_key_type TEXT",
        ],
        // 3: webhooks and their outbox, as in SQLite's.
        [
            """
            CREATE TABLE webhooks (
                id TEXT PRIMARY KEY, app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, url TEXT NOT NULL,
                secret BYTEA NOT NULL, types TEXT NOT NULL, created_at BIGINT NOT NULL)
            """,
            "CREATE INDEX webhooks_app ON webhooks (app_id)",
            """
            CREATE TABLE webhook_messages (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE, body BYTEA NOT NULL,
                events BIGINT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, attempts BIGINT NOT NULL DEFAULT 0,
                next_attempt_at BIGINT, delivered_at BIGINT, last_status BIGINT, last_error TEXT)
            """,
            "CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE next_attempt_at IS NOT NULL",
            "CREATE INDEX webhook_messages_webhook ON webhook_messages (webhook_id, id)",
        ],
        // 4: audience chunks leased as one row each, their deliveries written once, with their
        // outcome (so a delivery's notification and device are unique), as in SQLite's.
        [
            """
            CREATE TABLE delivery_chunks (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, notification_id TEXT NOT NULL, after_id BIGINT NOT NULL,
                through_id BIGINT NOT NULL, size BIGINT NOT NULL, attempts BIGINT NOT NULL, lease_until BIGINT NOT NULL)
            """,
            "CREATE INDEX delivery_chunks_notification ON delivery_chunks (notification_id)",
            "DROP INDEX deliveries_notification",
            "CREATE UNIQUE INDEX deliveries_notification ON deliveries (notification_id, device_id)",
        ],
        // 5: who may bind users and set tags, as in SQLite's.
        [
            "ALTER TABLE apps ADD COLUMN user_verification BOOLEAN NOT NULL DEFAULT TRUE",
            "ALTER TABLE apps ADD COLUMN protected_tags TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE apps ADD COLUMN user_secret BYTEA",
            "ALTER TABLE api_keys ADD COLUMN expires_at BIGINT",
            "ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT",
        ],
        // 6: notifications listed (and paged) by (created_at, id), as in SQLite's.
        [
            "CREATE INDEX notifications_page ON notifications (app_id, created_at, id)",
            "DROP INDEX notifications_recent",
        ],
        // 7: the audit trail of data governance, as in SQLite's.
        [
            """
            CREATE TABLE audit (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, at BIGINT NOT NULL, key_id TEXT, action TEXT NOT NULL,
                app_id TEXT, subject TEXT)
            """,
            "CREATE INDEX audit_app ON audit (app_id, id)",
        ],
        // 8: unknown outcomes per delivery, and what a notification wants done with one, as in SQLite's.
        [
            "ALTER TABLE notifications ADD COLUMN on_unknown_outcome TEXT",
            "ALTER TABLE deliveries ADD COLUMN unknown_outcomes BIGINT NOT NULL DEFAULT 0",
        ],
        // 9: rate-limit buckets shared by the processes (PostgreSQL only: on SQLite one process
        // holds them in memory). `full_at`: when the bucket is full again, and can be forgotten.
        [
            """
            CREATE TABLE rate_buckets (
                bucket TEXT PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL, granted DOUBLE PRECISION NOT NULL,
                updated_at BIGINT NOT NULL, full_at BIGINT NOT NULL)
            """,
            "CREATE INDEX rate_buckets_full ON rate_buckets (full_at)",
        ],
        // 10: receipts (received, opened, action per delivery; funnel counts per notification;
        // the app's switch), as in SQLite's 9.
        [
            "ALTER TABLE deliveries ADD COLUMN received_at BIGINT",
            "ALTER TABLE deliveries ADD COLUMN opened_at BIGINT",
            "ALTER TABLE deliveries ADD COLUMN action TEXT",
            "ALTER TABLE notifications ADD COLUMN received_count BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE notifications ADD COLUMN opened_count BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE apps ADD COLUMN receipts BOOLEAN NOT NULL DEFAULT TRUE",
        ],
        // 11: notification templates per app, as in SQLite's 10.
        [
            """
            CREATE TABLE templates (
                app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, id TEXT NOT NULL, name TEXT NOT NULL,
                variants TEXT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, PRIMARY KEY (app_id, id))
            """
        ],
        // 12: broadcast channels: Apple's id per app and environment, with its storage policy.
        [
            """
            CREATE TABLE channels (
                app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, environment TEXT NOT NULL,
                channel_id TEXT NOT NULL, storage_policy INTEGER NOT NULL, created_at BIGINT NOT NULL,
                PRIMARY KEY (app_id, environment, channel_id)
            )
            """
        ],
        // 13: a notification sent by template, as in SQLite's 12.
        ["ALTER TABLE notifications ADD COLUMN template TEXT"],
        // 14: delivery policies (an app's quiet hours, frequency cap and throttle, those a
        // notification took, each capped person's recent alerts, each throttled notification's
        // next slot), as in SQLite's 13.
        [
            "ALTER TABLE apps ADD COLUMN quiet_hours TEXT",
            "ALTER TABLE notifications ADD COLUMN quiet_hours TEXT",
            "ALTER TABLE apps ADD COLUMN frequency_cap TEXT",
            "ALTER TABLE notifications ADD COLUMN frequency_cap TEXT",
            """
            CREATE TABLE frequency_counts (
                app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, subject TEXT NOT NULL, category TEXT NOT NULL,
                times TEXT NOT NULL, PRIMARY KEY (app_id, subject, category))
            """,
            "ALTER TABLE apps ADD COLUMN throttle_per_minute BIGINT",
            "ALTER TABLE notifications ADD COLUMN throttle_per_minute BIGINT",
            """
            CREATE TABLE throttle_slots (
                notification_id TEXT PRIMARY KEY REFERENCES notifications(id) ON DELETE CASCADE, next_slot BIGINT NOT NULL)
            """,
        ],
        // 15: Live Activities started by push-to-start, as in SQLite's 14.
        [
            """
            CREATE TABLE live_activities (
                app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, id TEXT NOT NULL, attributes_type TEXT NOT NULL,
                audience TEXT NOT NULL, channel_id TEXT, environment TEXT, content_state TEXT NOT NULL,
                start_notification_id TEXT NOT NULL, started_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
                updates BIGINT NOT NULL DEFAULT 0, last_notification_id TEXT, ended_at BIGINT, end_reason TEXT,
                PRIMARY KEY (app_id, id))
            """,
            "CREATE INDEX live_activities_started ON live_activities (app_id, started_at)",
            "CREATE UNIQUE INDEX live_activities_channel ON live_activities (app_id, channel_id) WHERE ended_at IS NULL",
        ],
        // 16: frequency_counts without its foreign key to apps, as in SQLite's 15: checked row by
        // row, it cost more than half of the inserts of a capped broadcast's new rows. An app's
        // rows are deleted with the app, in its chunks (`appDeletionSteps`); a claim writing
        // rows locks their apps' rows once (see `applyPolicies`). The constraint is looked up
        // by what it is, whatever its name.
        [
            """
            DO $$
            DECLARE constraint_name text;
            BEGIN
                FOR constraint_name IN
                    SELECT conname FROM pg_constraint
                    WHERE conrelid = 'frequency_counts'::regclass AND contype = 'f' AND confrelid = 'apps'::regclass
                LOOP
                    EXECUTE format('ALTER TABLE frequency_counts DROP CONSTRAINT %I', constraint_name);
                END LOOP;
            END $$
            """
        ],
        // 17: frequency_counts' key compared byte by byte (`COLLATE "C"`): a capped broadcast
        // looks up and inserts one key per person, and under a database's language collation
        // (even C.UTF-8) each comparison in the index goes through strcoll. The key is an
        // identifier, never sorted for people. Rebuilds the primary key's index (the table is
        // locked meanwhile).
        [
            """
            ALTER TABLE frequency_counts ALTER COLUMN app_id TYPE text COLLATE "C", ALTER COLUMN subject TYPE text COLLATE "C",
                ALTER COLUMN category TYPE text COLLATE "C"
            """
        ],
        // 18: devices without a user share a frequency-count row per 64 consecutive ids, as in
        // SQLite's 17 (`FrequencyCap.row(of:)`): a capped broadcast's chunk locks, reads and
        // writes about 16 rows instead of 1,000. Each device's own row moves into its row-full's.
        [
            """
            INSERT INTO frequency_counts (app_id, subject, category, times)
                SELECT app_id, 'b:' || (substr(subject, 3)::bigint / 64), category,
                    string_agg(substr(subject, 3) || ':' || times, ';' ORDER BY substr(subject, 3)::bigint)
                FROM frequency_counts WHERE substr(subject, 1, 2) = 'd:'
                GROUP BY app_id, substr(subject, 3)::bigint / 64, category
            """,
            "DELETE FROM frequency_counts WHERE substr(subject, 1, 2) = 'd:'",
        ],
        // 19: user assertions bound to one device (a `tkh` claim), as in SQLite's 19: apps made
        // before keep accepting unbound ones until their admin turns it off.
        // And an app's own rate limits (`AppRateLimits`' stored form; NULL: the server's alone).
        [
            "ALTER TABLE apps ADD COLUMN IF NOT EXISTS unbound_assertions BOOLEAN NOT NULL DEFAULT TRUE",
            "ALTER TABLE apps ADD COLUMN IF NOT EXISTS rate_limits TEXT",
            "ALTER TABLE apps ADD COLUMN IF NOT EXISTS deleting_since BIGINT",
            "ALTER TABLE apps ADD COLUMN IF NOT EXISTS deleted_rows BIGINT NOT NULL DEFAULT 0",
        ],
        // 20: platforms beside APNs, as in SQLite's 20: routes and addresses in the devices'
        // `environment` and `token`, a notification's parts for other transports.
        ["ALTER TABLE notifications ADD COLUMN IF NOT EXISTS parts BYTEA"],
    ]

    /// The version the database is at after `migrate()`.
    package static var schemaVersion: Int { self.migrations.count }

    /// Applies the migrations not applied yet; returns the versions applied now.
    @discardableResult
    package func migrate() async throws -> [Int] {
        try await self.write { db in
            // One key for Herald's migrations ("HERALD" in ASCII), held until this transaction ends.
            try await db.query("SELECT pg_advisory_xact_lock(79462569954372)")
            try await db.execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
            let current = try await db.query("SELECT coalesce(max(version), 0) FROM schema_version").first?.int(0) ?? 0
            var applied: [Int] = []
            for (index, statements) in Self.migrations.enumerated() where index + 1 > current {
                for statement in statements { try await db.execute(statement) }
                try await db.query("INSERT INTO schema_version (version) VALUES ($1)", [.int(Int64(index + 1))])
                applied.append(index + 1)
            }
            return applied
        }
    }

    // MARK: apps and credentials

    package func createApp(_ app: App) async throws {
        do {
            try await self.write { db in
                try await db.query(
                    "INSERT INTO apps (id, bundle_id, created_at, user_verification, protected_tags, user_secret, unbound_assertions) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    [
                        .text(app.id), .text(app.bundleID), .int(app.createdAt), .bool(app.security.userVerification),
                        .text(StoredTags.encode(app.security.protectedTags)), .bytes(app.security.sealedUserSecret),
                        .bool(app.security.unboundAssertions),
                    ]
                )
            }
        } catch  where error.isUniqueViolation {
            throw HeraldError.conflict("an app with id '\(app.id)' exists", code: "app_exists")
        }
    }

    package func app(_ id: String) async throws -> App? {
        try await self.lookups.app(id: id) {
            try await self.read { db in try await db.query("SELECT \(Self.appColumns) FROM apps WHERE id = $1", [.text(id)]).first.map(Self.app) }
        }
    }

    package func apps() async throws -> [App] {
        try await self.read { db in try await db.query("SELECT \(Self.appColumns) FROM apps ORDER BY id COLLATE \"C\"").map(Self.app) }
    }

    static let appColumns =
        "id, bundle_id, created_at, user_verification, protected_tags, user_secret, receipts, quiet_hours, frequency_cap, throttle_per_minute, unbound_assertions, rate_limits, deleting_since, deleted_rows"

    static func app(_ row: Row) -> App {
        App(
            id: row.string(0) ?? "", bundleID: row.string(1) ?? "", createdAt: row.int(2) ?? 0,
            security: AppSecurity(
                userVerification: row.bool(3) ?? true, protectedTags: StoredTags.decode(row.string(4)), sealedUserSecret: row.bytes(5),
                receipts: row.bool(6) ?? true, quietHours: row.string(7).flatMap(QuietHours.init),
                frequencyCap: row.string(8).flatMap(FrequencyCap.init), throttlePerMinute: row.int(9).map { Int($0) },
                unboundAssertions: row.bool(10) ?? false, rateLimits: row.string(11).flatMap(AppRateLimits.init(stored:)) ?? AppRateLimits()
            ),
            deletion: row.int(12).map { AppDeletion(since: $0, deletedRows: row.int(13) ?? 0) }
        )
    }

    package func resealSecrets(_ reseal: @escaping @Sendable ([UInt8]) throws -> [UInt8]) async throws -> Int {
        defer { self.lookups.clear() }
        return try await self.write { db in
            var count = 0
            for (table, column) in [("credentials", "sealed"), ("webhooks", "secret"), ("apps", "user_secret")] {
                let rows = try await db.query("SELECT ctid::text, \(column) FROM \(table) WHERE \(column) IS NOT NULL FOR UPDATE")
                for row in rows {
                    guard let id = row.string(0), let sealed = row.bytes(1) else { continue }
                    try await db.query("UPDATE \(table) SET \(column) = $1 WHERE ctid = $2::tid", [.bytes(try reseal(sealed)), .text(id)])
                    count += 1
                }
            }
            return count
        }
    }

    package func setAppSecurity(appID: String, _ security: AppSecurity) async throws -> Bool {
        defer { self.lookups.clear() }
        return try await self.write { db in
            try await db.query(
                "UPDATE apps SET user_verification = $1, protected_tags = $2, user_secret = $3, receipts = $5, quiet_hours = $6, frequency_cap = $7, throttle_per_minute = $8, unbound_assertions = $9, rate_limits = $10 WHERE id = $4 RETURNING id",
                [
                    .bool(security.userVerification), .text(StoredTags.encode(security.protectedTags)), .bytes(security.sealedUserSecret),
                    .text(appID), .bool(security.receipts), .text(security.quietHours?.description), .text(security.frequencyCap?.description),
                    .int(security.throttlePerMinute.map { Int64($0) }), .bool(security.unboundAssertions),
                    .text(security.rateLimits.isEmpty ? nil : security.rateLimits.description),
                ]
            ).isEmpty == false
        }
    }

    package func setCredential(appID: String, environment: Route, sealed: [UInt8], now: Int64) async throws {
        try await self.write { db in
            try await db.query(
                """
                INSERT INTO credentials (app_id, environment, sealed, updated_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (app_id, environment) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at
                """,
                [.text(appID), .text(environment.stored), .bytes(sealed), .int(now)]
            )
        }
    }

    package func credentials(appID: String) async throws -> [Route: [UInt8]] {
        try await self.read { db in
            var result: [Route: [UInt8]] = [:]
            for row in try await db.query(Statements.Credentials.self, [.text(appID)]) {
                if let environment = row.string(0).flatMap(Route.init(stored:)), let sealed = row.bytes(1) {
                    result[environment] = sealed
                }
            }
            return result
        }
    }

    // MARK: API keys

    package func createAPIKey(id: String, hash: [UInt8], scope: APIScope, appID: String?, name: String?, expiresAt: Int64?, now: Int64) async throws {
        try await self.write { db in
            try await db.query(
                "INSERT INTO api_keys (id, hash, scope, app_id, name, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                [.text(id), .bytes(hash), .text(scope.rawValue), .text(appID), .text(name), .int(now), .int(expiresAt)]
            )
        }
    }

    package func rotateAPIKey(
        replacing: String, id: String, hash: [UInt8], expiresAt: Int64?, overlapUntil: Int64, now: Int64
    ) async throws -> StoredAPIKey? {
        defer { self.lookups.clear() }
        return try await self.write { db in
            let row = try await db.query(
                "SELECT \(Self.keyColumns) FROM api_keys WHERE id = $1 AND revoked_at IS NULL FOR UPDATE", [.text(replacing)]
            ).first
            guard var old = row.flatMap(Self.apiKey) else { return nil }
            old.expiresAt = min(old.expiresAt ?? overlapUntil, overlapUntil)
            try await db.query("UPDATE api_keys SET expires_at = $1 WHERE id = $2", [.int(old.expiresAt), .text(replacing)])
            try await db.query(
                "INSERT INTO api_keys (id, hash, scope, app_id, name, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                [.text(id), .bytes(hash), .text(old.scope.rawValue), .text(old.appID), .text(old.name), .int(now), .int(expiresAt)]
            )
            return old
        }
    }

    package func touchAPIKey(id: String, now: Int64) async throws {
        try await self.write { db in
            try await db.query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2", [.int(now), .text(id)])
        }
    }

    private static let keyColumns = "id, hash, scope, app_id, name, created_at, revoked_at, expires_at, last_used_at"

    private static func apiKey(_ row: Row) -> StoredAPIKey? {
        guard let scope = row.string(2).flatMap(APIScope.init(rawValue:)) else { return nil }
        return StoredAPIKey(
            id: row.string(0) ?? "", hash: row.bytes(1) ?? [], scope: scope, appID: row.string(3), name: row.string(4),
            createdAt: row.int(5) ?? 0, revokedAt: row.int(6), expiresAt: row.int(7), lastUsedAt: row.int(8)
        )
    }

    package func apiKey(id: String) async throws -> StoredAPIKey? {
        try await self.lookups.apiKey(id: id) {
            try await self.read { db in
                try await db.query("SELECT \(Self.keyColumns) FROM api_keys WHERE id = $1 AND revoked_at IS NULL", [.text(id)]).first.flatMap(
                    Self.apiKey)
            }
        }
    }

    package func apiKeys() async throws -> [StoredAPIKey] {
        try await self.read { db in
            try await db.query("SELECT \(Self.keyColumns) FROM api_keys ORDER BY created_at, id COLLATE \"C\"").compactMap(Self.apiKey)
        }
    }

    package func revokeAPIKey(id: String, now: Int64) async throws -> Bool {
        defer { self.lookups.clear() }
        return try await self.write { db in
            // Admin keys are counted under a lock, so two processes cannot revoke the last two at once.
            let admins = try await db.query(
                "SELECT \(Self.keyColumns) FROM api_keys WHERE scope = 'admin' AND revoked_at IS NULL ORDER BY id FOR UPDATE"
            ).compactMap(Self.apiKey)
            let key = try await db.query("SELECT \(Self.keyColumns) FROM api_keys WHERE id = $1 AND revoked_at IS NULL", [.text(id)]).first.flatMap(
                Self.apiKey)
            guard let key else { return false }
            try KeyAccess.requireAnotherGoverningKey(revoking: key, admins: admins, now: now)
            try await db.query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2", [.int(now), .text(id)])
            return true
        }
    }

    package func createFirstAPIKey(id: String, hash: [UInt8], name: String?, now: Int64) async throws -> Bool {
        try await self.write { db in
            // Serializes processes starting together (the same lock as migrations).
            try await db.query("SELECT pg_advisory_xact_lock(79462569954372)")
            guard try await db.query("SELECT 1 FROM api_keys LIMIT 1").isEmpty else { return false }
            try await db.query(
                "INSERT INTO api_keys (id, hash, scope, app_id, name, created_at) VALUES ($1, $2, 'admin', NULL, $3, $4)",
                [.text(id), .bytes(hash), .text(name), .int(now)]
            )
            return true
        }
    }

    package func hasAPIKeys() async throws -> Bool {
        try await self.read { db in try await db.query("SELECT 1 FROM api_keys LIMIT 1").isEmpty == false }
    }

    // MARK: devices

    static let deviceColumns = """
        id, app_id, token, kind, environment, user_id, locale, time_zone, app_version, platform, activity_id,
        attributes_type, active, created_at, last_registered_at, invalidated_at, invalidation_reason, public_key, public_key_type
        """

    /// The head of a registration's upsert (the columns it writes; the rows follow) and what it
    /// changes of a device already there: one registration's (``registerOne``) or a group's
    /// (``Statements/UpsertRegistered``).
    static let registrationInsert = """
        INSERT INTO devices (app_id, token, kind, environment, user_id, locale, time_zone, app_version, platform,
            activity_id, attributes_type, active, created_at, last_registered_at, public_key, public_key_type)
        """
    static let registrationConflict = """
        ON CONFLICT (app_id, token) DO UPDATE SET kind = excluded.kind, environment = excluded.environment,
            user_id = excluded.user_id, locale = excluded.locale, time_zone = excluded.time_zone,
            app_version = excluded.app_version, platform = excluded.platform, activity_id = excluded.activity_id,
            attributes_type = excluded.attributes_type, active = TRUE, public_key = excluded.public_key,
            public_key_type = excluded.public_key_type,
            last_registered_at = excluded.last_registered_at, invalidated_at = NULL, invalidation_reason = NULL
        """

    package func register(appID: String, _ asked: DeviceRegistration, authority: RegistrationAuthority, now: Int64) async throws -> Device {
        try await self.registrations.register(
            RegistrationBatch.Entry(appID: appID, asked: asked, authority: authority, now: now), store: self)
    }

    /// One registration alone, in the caller's transaction: what a group commit falls back to
    /// for a group whose statements failed as a whole.
    static func registerOne(
        _ db: Connection, appID: String, _ asked: DeviceRegistration, authority: RegistrationAuthority, now: Int64
    )
        async throws -> Device
    {
        // What the device holds now decides what this caller may change: read under a lock
        // on its row, so that a concurrent registration of the same token waits for this one.
        var existing: (userID: String?, tags: [String])?
        if authority.readsDevice,
            let current = try await db.query(
                "SELECT id, user_id FROM devices WHERE app_id = $1 AND token = $2 FOR UPDATE", [.text(appID), .text(asked.token)]
            ).first,
            let id = current.int(0)
        {
            let tags =
                authority.readsTags
                ? try await db.query("SELECT tag FROM device_tags WHERE device_id = $1", [.int(id)]).compactMap { $0.string(0) } : []
            existing = (current.string(1), tags)
        }
        let registration = try RegistrationPolicy.apply(asked, existing: existing, authority: authority)
        let rows = try await db.query(
            """
            \(Self.registrationInsert)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, TRUE, $12, $12, $13, $14)
            \(Self.registrationConflict)
            RETURNING \(Self.deviceColumns)
            """,
            [
                .text(appID), .text(registration.token), .text(registration.kind.rawValue), .text(registration.route.stored),
                .text(registration.userID), .text(registration.locale), .text(registration.timeZone), .text(registration.appVersion),
                .text(registration.platform), .text(registration.activityID), .text(registration.attributesType), .int(now),
                .bytes(registration.publicKey), .text(registration.publicKeyType),
            ]
        )
        guard let row = rows.first, let id = row.int(0) else { throw HeraldError(code: "internal", "the upsert returned nothing") }
        // A register key's device keeps its protected tags untouched, whatever the lock saw (a
        // device the backend inserted with them meanwhile), as in a group's round.
        let protected = authority.protectedTags.sorted()
        try await db.query(
            "DELETE FROM device_tags WHERE device_id = $1 AND NOT (tag = ANY($2::text[]))", [.int(id), .texts(protected)])
        let tags = Set(registration.tags).sorted()
        let written = tags.filter { !authority.protectedTags.contains($0) }
        if !written.isEmpty {
            try await db.query(
                "INSERT INTO device_tags (device_id, tag) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING", [.int(id), .texts(written)])
        }
        return Self.device(row, tags: tags)
    }

    package func unregister(appID: String, token: String) async throws -> Bool {
        try await self.write { db in
            try await db.query("DELETE FROM devices WHERE app_id = $1 AND token = $2 RETURNING id", [.text(appID), .text(token)]).isEmpty == false
        }
    }

    package func devices(appID: String, _ query: DeviceQuery) async throws -> [Device] {
        try await self.snapshot { db in
            var sql = Query("SELECT \(Self.deviceColumns) FROM devices d WHERE app_id = $1", [.text(appID)])
            if let userID = query.userID {
                sql.sql += " AND user_id = \(sql.bind(.text(userID)))"
            }
            if let tag = query.tag {
                sql.sql += " AND id IN (SELECT device_id FROM device_tags WHERE tag = \(sql.bind(.text(tag))))"
            }
            if let prefix = query.tokenPrefix {
                sql.sql += " AND starts_with(token, \(sql.bind(.text(prefix))))"
            }
            if let afterID = query.afterID {
                sql.sql += " AND id > \(sql.bind(.int(afterID)))"
            }
            sql.sql += " ORDER BY id LIMIT \(sql.bind(.int(Int64(max(1, query.limit)))))"
            let rows = try await db.query(sql)
            let tags = try await Self.tags(db, rows.map { $0.int(0) ?? 0 })
            return rows.map { row in Self.device(row, tags: tags[row.int(0) ?? 0] ?? []) }
        }
    }

    package func device(appID: String, token: String) async throws -> Device? {
        try await self.snapshot { db in
            guard
                let row = try await db.query(
                    "SELECT \(Self.deviceColumns) FROM devices WHERE app_id = $1 AND token = $2", [.text(appID), .text(token)]
                ).first
            else { return nil }
            return Self.device(row, tags: try await Self.tags(db, row.int(0) ?? 0))
        }
    }

    package func invalidations(appID: String, deviceID: Int64) async throws -> [Invalidation] {
        try await self.read { db in
            try await db.query(
                "SELECT device_id, reason, apns_timestamp, at, applied FROM invalidations WHERE app_id = $1 AND device_id = $2 ORDER BY id",
                [.text(appID), .int(deviceID)]
            ).map { row in
                Invalidation(
                    deviceID: row.int(0) ?? 0, reason: row.string(1) ?? "", apnsTimestamp: row.int(2), at: row.int(3) ?? 0,
                    applied: row.bool(4) ?? false)
            }
        }
    }

    private static func tags(_ db: Connection, _ id: Int64) async throws -> [String] {
        try await Self.tags(db, [id])[id] ?? []
    }

    /// The tags of each of `ids` (sorted), in one statement: a page of 1,000 devices is one
    /// round trip for its tags, not 1,000.
    private static func tags(_ db: Connection, _ ids: [Int64]) async throws -> [Int64: [String]] {
        guard !ids.isEmpty else { return [:] }
        var tags: [Int64: [String]] = [:]
        for row in try await db.query(
            "SELECT device_id, tag FROM device_tags WHERE device_id = ANY($1) ORDER BY device_id, tag COLLATE \"C\"", [.ints(ids)])
        {
            if let id = row.int(0), let tag = row.string(1) { tags[id, default: []].append(tag) }
        }
        return tags
    }

    static func device(_ row: Row, tags: [String]) -> Device {
        let registration = DeviceRegistration(
            address: PushAddress(stored: row.string(2) ?? "", route: row.string(4).flatMap(Route.init(stored:)) ?? .apns(.production)),
            kind: row.string(3).flatMap(DeviceKind.init(rawValue:)) ?? .device,
            userID: row.string(5), tags: tags, locale: row.string(6), timeZone: row.string(7), appVersion: row.string(8),
            platform: row.string(9), activityID: row.string(10), attributesType: row.string(11), publicKey: row.bytes(17),
            publicKeyType: row.string(18)
        )
        return Device(
            id: row.int(0) ?? 0, appID: row.string(1) ?? "", registration: registration, active: row.bool(12) ?? false,
            createdAt: row.int(13) ?? 0, lastRegisteredAt: row.int(14) ?? 0, invalidatedAt: row.int(15),
            invalidationReason: row.string(16)
        )
    }
}

extension Statements {
    /// App $1's sealed credentials by environment.
    enum Credentials: FixedStatement {
        static let sql = "SELECT environment, sealed FROM credentials WHERE app_id = $1"
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

extension SQLiteDatabase.Connection.Row: StoredRow {}

/// The embedded store: one SQLite file in WAL mode.
package final class SQLiteStore: HeraldStore {
    package let database: SQLiteDatabase
    /// Apps and keys as every request reads them (see ``LookupCache``); cleared by every write to them.
    package let lookups = LookupCache()

    /// Opens (creating and migrating if needed) the database at `path`.
    package init(path: String) async throws {
        self.database = try SQLiteDatabase(path: path)
        try await self.database.write { db in
            try db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            let version = try db.query("SELECT max(version) FROM schema_version").first?.first?.int ?? 0
            for (index, migration) in Self.migrations.enumerated() where index + 1 > version {
                try db.execute(migration)
                try db.query("INSERT INTO schema_version (version) VALUES (?)", [.integer(Int64(index + 1))])
            }
        }
    }

    static let migrations = [
        """
        CREATE TABLE apps (id TEXT PRIMARY KEY, bundle_id TEXT NOT NULL, created_at INTEGER NOT NULL);
        CREATE TABLE credentials (
            app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, environment TEXT NOT NULL,
            sealed BLOB NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (app_id, environment));
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY, hash BLOB NOT NULL, scope TEXT NOT NULL,
            app_id TEXT REFERENCES apps(id) ON DELETE CASCADE, name TEXT, created_at INTEGER NOT NULL);
        CREATE TABLE devices (
            id INTEGER PRIMARY KEY AUTOINCREMENT, app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
            token TEXT NOT NULL, kind TEXT NOT NULL, environment TEXT NOT NULL, user_id TEXT, locale TEXT,
            time_zone TEXT, app_version TEXT, platform TEXT, activity_id TEXT, attributes_type TEXT,
            active INTEGER NOT NULL DEFAULT 1, created_at INTEGER NOT NULL, last_registered_at INTEGER NOT NULL,
            invalidated_at INTEGER, invalidation_reason TEXT, UNIQUE (app_id, token));
        CREATE INDEX devices_user ON devices (app_id, user_id);
        CREATE TABLE device_tags (
            device_id INTEGER NOT NULL REFERENCES devices(id) ON DELETE CASCADE, tag TEXT NOT NULL,
            PRIMARY KEY (device_id, tag)) WITHOUT ROWID;
        CREATE INDEX device_tags_tag ON device_tags (tag, device_id);
        CREATE TABLE invalidations (
            id INTEGER PRIMARY KEY, app_id TEXT NOT NULL, device_id INTEGER NOT NULL, reason TEXT NOT NULL,
            apns_timestamp INTEGER, at INTEGER NOT NULL, applied INTEGER NOT NULL);
        CREATE INDEX invalidations_device ON invalidations (device_id);
        CREATE TABLE notifications (
            id TEXT PRIMARY KEY, app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
            priority INTEGER, expiration INTEGER, collapse_id TEXT, payload BLOB NOT NULL,
            created_at INTEGER NOT NULL, scheduled_at INTEGER NOT NULL, idempotency_key TEXT,
            UNIQUE (app_id, idempotency_key));
        CREATE TABLE deliveries (
            id INTEGER PRIMARY KEY, notification_id TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
            device_id INTEGER NOT NULL, token TEXT NOT NULL, environment TEXT NOT NULL, push_type TEXT NOT NULL,
            topic TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at INTEGER NOT NULL, lease_until INTEGER, apns_id TEXT, status INTEGER, reason TEXT,
            latency_ms INTEGER, updated_at INTEGER NOT NULL);
        CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
        CREATE INDEX deliveries_notification ON deliveries (notification_id);
        """,
        // 2: audiences expanded chunk by chunk after acceptance (the notification keeps its
        // targeting, the device ids of a list audience resolved at acceptance, and a cursor
        // over device ids); a lease is a delivery's next attempt moved past
        // the lease's end, so the due index holds only what is due; recent notifications; a
        // device's deliveries found through its notifications (notification, device) rather
        // than an index of their own, which every delivery would write at a random place;
        // revoked keys.
        """
        ALTER TABLE notifications ADD COLUMN bundle_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE notifications ADD COLUMN targeting TEXT;
        ALTER TABLE notifications ADD COLUMN device_ids TEXT;
        ALTER TABLE notifications ADD COLUMN push_type TEXT;
        ALTER TABLE notifications ADD COLUMN local_time TEXT;
        ALTER TABLE notifications ADD COLUMN audience_size INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE notifications ADD COLUMN expand_after INTEGER;
        ALTER TABLE notifications ADD COLUMN expand_until INTEGER;
        ALTER TABLE notifications ADD COLUMN cancelled_at INTEGER;
        UPDATE notifications SET audience_size = (SELECT count(*) FROM deliveries x WHERE x.notification_id = notifications.id);
        CREATE INDEX notifications_expanding ON notifications (scheduled_at) WHERE expand_after IS NOT NULL;
        CREATE INDEX notifications_recent ON notifications (app_id, created_at);
        CREATE INDEX devices_app ON devices (app_id);
        CREATE INDEX devices_activity ON devices (app_id, activity_id) WHERE activity_id IS NOT NULL;
        DROP INDEX deliveries_notification;
        CREATE INDEX deliveries_notification ON deliveries (notification_id, device_id);
        UPDATE deliveries SET next_attempt_at = lease_until WHERE state = 'pending' AND lease_until > next_attempt_at;
        ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;
        ALTER TABLE devices ADD COLUMN public_key BLOB;
        ALTER TABLE devices ADD COLUMN public_key_type TEXT;
        ALTER TABLE notifications ADD COLUMN placeholder BLOB;
        """,
        // 3: webhooks and their outbox (a message is a batch of events; next_attempt_at is NULL
        // once it is delivered or has expired, so the due index holds only what is left).
        """
        CREATE TABLE webhooks (
            id TEXT PRIMARY KEY, app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, url TEXT NOT NULL,
            secret BLOB NOT NULL, types TEXT NOT NULL, created_at INTEGER NOT NULL);
        CREATE INDEX webhooks_app ON webhooks (app_id);
        CREATE TABLE webhook_messages (
            id INTEGER PRIMARY KEY, webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE, body BLOB NOT NULL,
            events INTEGER NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at INTEGER, delivered_at INTEGER, last_status INTEGER, last_error TEXT);
        CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
        CREATE INDEX webhook_messages_webhook ON webhook_messages (webhook_id, id);
        """,
        // 4: an audience chunk is claimed as one leased row, and its deliveries are written once,
        // with their outcome, so a delivery's (notification, device) is unique; delivery ids come
        // from a counter, since a chunk's are handed out before their rows exist. A chunk's id is
        // never given again (AUTOINCREMENT): a late record names its chunk by id and attempt.
        """
        CREATE TABLE delivery_chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT, notification_id TEXT NOT NULL, after_id INTEGER NOT NULL, through_id INTEGER NOT NULL,
            size INTEGER NOT NULL, attempts INTEGER NOT NULL, lease_until INTEGER NOT NULL);
        CREATE INDEX delivery_chunks_notification ON delivery_chunks (notification_id);
        CREATE TABLE sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO sequences (name, value) SELECT 'deliveries', coalesce(max(id), 0) FROM deliveries;
        DROP INDEX deliveries_notification;
        CREATE UNIQUE INDEX deliveries_notification ON deliveries (notification_id, device_id);
        """,
        // 5: who may bind users and set tags: user verification (on for every app, existing ones
        // too: a register key must not bind users unchecked), protected tags, the sealed user secret.
        """
        ALTER TABLE apps ADD COLUMN user_verification INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE apps ADD COLUMN protected_tags TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE apps ADD COLUMN user_secret BLOB;
        ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
        ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
        """,
        // 6: notifications are listed (and paged) by (created_at, id), a total order; the index
        // holds it whole, so a page after a position is one range scan. It replaces
        // notifications_recent, its prefix.
        """
        CREATE INDEX notifications_page ON notifications (app_id, created_at, id);
        DROP INDEX notifications_recent;
        """,
        // 7: the audit trail of data governance (a user's data exported or erased, an app deleted).
        """
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY, at INTEGER NOT NULL, key_id TEXT, action TEXT NOT NULL, app_id TEXT, subject TEXT);
        CREATE INDEX audit_app ON audit (app_id, id);
        """,
        // 8: pushes APNs may or may not have delivered (written, unanswered): how many a delivery
        // had, and what its notification wants done with one (NULL: resend once).
        """
        ALTER TABLE notifications ADD COLUMN on_unknown_outcome TEXT;
        ALTER TABLE deliveries ADD COLUMN unknown_outcomes INTEGER NOT NULL DEFAULT 0;
        """,
        // 9: receipts: when the device reported each delivery received and opened (and the
        // action chosen); each notification's funnel counts, kept by each batch of receipts;
        // whether an app's pushes carry receipt ids (on by default).
        """
        ALTER TABLE deliveries ADD COLUMN received_at INTEGER;
        ALTER TABLE deliveries ADD COLUMN opened_at INTEGER;
        ALTER TABLE deliveries ADD COLUMN action TEXT;
        ALTER TABLE notifications ADD COLUMN received_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE notifications ADD COLUMN opened_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE apps ADD COLUMN receipts INTEGER NOT NULL DEFAULT 1;
        """,
        // 10: notification templates per app; `variants` is the JSON document of
        // `Template.storedVariants` (the default variant and one per locale).
        """
        CREATE TABLE templates (
            app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, id TEXT NOT NULL, name TEXT NOT NULL,
            variants TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (app_id, id));
        """,
        // 11: broadcast channels: Apple's id per app and environment, with its storage policy.
        """
        CREATE TABLE channels (
            app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, environment TEXT NOT NULL,
            channel_id TEXT NOT NULL, storage_policy INTEGER NOT NULL, created_at INTEGER NOT NULL,
            PRIMARY KEY (app_id, environment, channel_id)
        );
        """,
        // 12: a notification sent by template keeps the template as sent and its data
        // (`NotificationTemplate.stored`); each device's payload is rendered when claimed.
        "ALTER TABLE notifications ADD COLUMN template TEXT;",
        // 13: delivery policies: an app's quiet hours (`HH:MM-HH:MM`, NULL: none) and frequency cap
        // (`LIMIT/SECONDS[/category]`), those a notification took when accepted (NULL: none, or
        // exempt), each capped person's recent alerts (their times, comma-separated); an app's
        // default throttle and a notification's, and its next free slot.
        """
        ALTER TABLE apps ADD COLUMN quiet_hours TEXT;
        ALTER TABLE notifications ADD COLUMN quiet_hours TEXT;
        ALTER TABLE apps ADD COLUMN frequency_cap TEXT;
        ALTER TABLE notifications ADD COLUMN frequency_cap TEXT;
        CREATE TABLE frequency_counts (
            app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, subject TEXT NOT NULL, category TEXT NOT NULL,
            times TEXT NOT NULL, PRIMARY KEY (app_id, subject, category));
        ALTER TABLE apps ADD COLUMN throttle_per_minute INTEGER;
        ALTER TABLE notifications ADD COLUMN throttle_per_minute INTEGER;
        CREATE TABLE throttle_slots (
            notification_id TEXT PRIMARY KEY REFERENCES notifications(id) ON DELETE CASCADE, next_slot INTEGER NOT NULL);
        """,
        // 14: Live Activities started by push-to-start (`StoredLiveActivity`): the start's
        // audience, the channel its updates are broadcast on (NULL: its update tokens), the newest
        // content state, and when and why it ended (NULL: active). One active activity per channel
        // (a broadcast names no activity).
        """
        CREATE TABLE live_activities (
            app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE, id TEXT NOT NULL, attributes_type TEXT NOT NULL,
            audience TEXT NOT NULL, channel_id TEXT, environment TEXT, content_state TEXT NOT NULL,
            start_notification_id TEXT NOT NULL, started_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
            updates INTEGER NOT NULL DEFAULT 0, last_notification_id TEXT, ended_at INTEGER, end_reason TEXT,
            PRIMARY KEY (app_id, id));
        CREATE INDEX live_activities_started ON live_activities (app_id, started_at);
        CREATE UNIQUE INDEX live_activities_channel ON live_activities (app_id, channel_id) WHERE ended_at IS NULL;
        """,
        // 15: frequency_counts without its foreign key to apps, checked on every row a capped
        // broadcast inserts (in the one writer); an app's rows are deleted with the app, in its
        // chunks (`appDeletionSteps`). SQLite drops no constraint: the table is rebuilt, with the
        // same columns and primary key.
        """
        CREATE TABLE frequency_counts_new (
            app_id TEXT NOT NULL, subject TEXT NOT NULL, category TEXT NOT NULL, times TEXT NOT NULL,
            PRIMARY KEY (app_id, subject, category));
        INSERT INTO frequency_counts_new (app_id, subject, category, times) SELECT app_id, subject, category, times FROM frequency_counts;
        DROP TABLE frequency_counts;
        ALTER TABLE frequency_counts_new RENAME TO frequency_counts;
        """,
        // 16: frequency_counts as one b-tree (`WITHOUT ROWID`): a capped delivery's row is
        // looked up and written by its key, which a rowid table keeps twice (the table and its
        // primary-key index), each insert touching both.
        """
        CREATE TABLE frequency_counts_new (
            app_id TEXT NOT NULL, subject TEXT NOT NULL, category TEXT NOT NULL, times TEXT NOT NULL,
            PRIMARY KEY (app_id, subject, category)) WITHOUT ROWID;
        INSERT INTO frequency_counts_new (app_id, subject, category, times) SELECT app_id, subject, category, times FROM frequency_counts;
        DROP TABLE frequency_counts;
        ALTER TABLE frequency_counts_new RENAME TO frequency_counts;
        """,
        // 17: devices without a user share a frequency-count row per 64 consecutive ids
        // (`FrequencyCap.row(of:)`: `b:<id / 64>`, times `id:t,t;id:t`): a capped broadcast's
        // chunk writes about 16 rows instead of 1,000. Each device's own row (`d:<id>`) moves
        // into its row-full's (in any order: a row is read in any order and written sorted).
        """
        INSERT INTO frequency_counts (app_id, subject, category, times)
            SELECT app_id, 'b:' || (CAST(substr(subject, 3) AS INTEGER) / 64), category, group_concat(substr(subject, 3) || ':' || times, ';')
            FROM frequency_counts WHERE substr(subject, 1, 2) = 'd:'
            GROUP BY app_id, CAST(substr(subject, 3) AS INTEGER) / 64, category;
        DELETE FROM frequency_counts WHERE substr(subject, 1, 2) = 'd:';
        """,
        // 18: the inactive devices' tokens by themselves. A token list is looked up in the
        // (app_id, token) index alone, which holds each device's id but not whether it is
        // active: this small index answers that, where reading each device's row cost as much
        // again as the lookup. A device is in it only while inactive (an invalidation puts it
        // in, a registration takes it out), so registering a new device writes nothing more.
        "CREATE INDEX devices_inactive ON devices (app_id, token) WHERE active = 0;",
        // 19: user assertions bound to one device (a `tkh` claim). Apps made before keep
        // accepting unbound ones until their admin turns it off; new apps are made without.
        // And an app's own rate limits (`AppRateLimits`' stored form; NULL: the server's alone).
        """
        ALTER TABLE apps ADD COLUMN unbound_assertions INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE apps ADD COLUMN rate_limits TEXT;
        ALTER TABLE apps ADD COLUMN deleting_since INTEGER;
        ALTER TABLE apps ADD COLUMN deleted_rows INTEGER NOT NULL DEFAULT 0;
        """,
        // 20: platforms beside APNs. A device's `environment` is its route (`development`,
        // `production` or `fcm`) and its `token` its address (hex, `fcm:…`, `fid:…`); a
        // notification keeps what it sends through other transports (`NotificationParts`).
        "ALTER TABLE notifications ADD COLUMN parts BLOB;",
    ]

    package func schemaVersion() async throws -> Int {
        try await self.database.read { db in Int(try db.query("SELECT max(version) FROM schema_version").first?.first?.int ?? 0) }
    }

    package func check() async throws {
        try await self.database.read { db in _ = try db.query("SELECT 1") }
    }

    // MARK: apps and credentials

    package func createApp(_ app: App) async throws {
        do {
            try await self.database.write { db in
                try db.query(
                    "INSERT INTO apps (id, bundle_id, created_at, user_verification, protected_tags, user_secret, unbound_assertions) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        .text(app.id), .text(app.bundleID), .integer(app.createdAt), .integer(app.security.userVerification ? 1 : 0),
                        .text(StoredTags.encode(app.security.protectedTags)), app.security.sealedUserSecret.map(SQLValue.blob) ?? .null,
                        .integer(app.security.unboundAssertions ? 1 : 0),
                    ]
                )
            }
        } catch let error as SQLiteError where error.isConstraintViolation {
            throw HeraldError.conflict("an app with id '\(app.id)' exists", code: "app_exists")
        }
    }

    package func app(_ id: String) async throws -> App? {
        try await self.lookups.app(id: id) {
            try await self.database.read { db in
                try db.query("SELECT \(Self.appColumns) FROM apps WHERE id = ?", [.text(id)]).first.map(Self.app)
            }
        }
    }

    package func apps() async throws -> [App] {
        try await self.database.read { db in try db.query("SELECT \(Self.appColumns) FROM apps ORDER BY id").map(Self.app) }
    }

    static let appColumns =
        "id, bundle_id, created_at, user_verification, protected_tags, user_secret, receipts, quiet_hours, frequency_cap, throttle_per_minute, unbound_assertions, rate_limits, deleting_since, deleted_rows"

    static func app(_ row: [SQLValue]) -> App {
        App(
            id: row[0].string ?? "", bundleID: row[1].string ?? "", createdAt: row[2].int ?? 0,
            security: AppSecurity(
                userVerification: row[3].int != 0, protectedTags: StoredTags.decode(row[4].string), sealedUserSecret: row[5].bytes,
                receipts: row[6].int != 0, quietHours: row[7].string.flatMap(QuietHours.init),
                frequencyCap: row[8].string.flatMap(FrequencyCap.init), throttlePerMinute: row[9].int.map { Int($0) },
                unboundAssertions: row[10].int != 0, rateLimits: row[11].string.flatMap(AppRateLimits.init(stored:)) ?? AppRateLimits()
            ),
            deletion: row[12].int.map { AppDeletion(since: $0, deletedRows: row[13].int ?? 0) }
        )
    }

    package func resealSecrets(_ reseal: @escaping @Sendable ([UInt8]) throws -> [UInt8]) async throws -> Int {
        defer { self.lookups.clear() }
        return try await self.database.write { db in
            var count = 0
            for (table, column, key) in [("credentials", "sealed", "rowid"), ("webhooks", "secret", "rowid"), ("apps", "user_secret", "rowid")] {
                let rows = try db.query("SELECT \(key), \(column) FROM \(table) WHERE \(column) IS NOT NULL")
                for row in rows {
                    guard let id = row[0].int, let sealed = row[1].bytes else { continue }
                    try db.query("UPDATE \(table) SET \(column) = ? WHERE \(key) = ?", [.blob(try reseal(sealed)), .integer(id)])
                    count += 1
                }
            }
            return count
        }
    }

    package func setAppSecurity(appID: String, _ security: AppSecurity) async throws -> Bool {
        defer { self.lookups.clear() }
        return try await self.database.write { db in
            try db.query(
                "UPDATE apps SET user_verification = ?, protected_tags = ?, user_secret = ?, receipts = ?, quiet_hours = ?, frequency_cap = ?, throttle_per_minute = ?, unbound_assertions = ?, rate_limits = ? WHERE id = ?",
                [
                    .integer(security.userVerification ? 1 : 0), .text(StoredTags.encode(security.protectedTags)),
                    security.sealedUserSecret.map(SQLValue.blob) ?? .null, .integer(security.receipts ? 1 : 0),
                    security.quietHours.map { .text($0.description) } ?? .null, security.frequencyCap.map { .text($0.description) } ?? .null,
                    security.throttlePerMinute.map { .integer(Int64($0)) } ?? .null, .integer(security.unboundAssertions ? 1 : 0),
                    security.rateLimits.isEmpty ? .null : .text(security.rateLimits.description), .text(appID),
                ]
            )
            return db.changes > 0
        }
    }

    package func setCredential(appID: String, environment: Route, sealed: [UInt8], now: Int64) async throws {
        try await self.database.write { db in
            try db.query(
                """
                INSERT INTO credentials (app_id, environment, sealed, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, environment) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at
                """,
                [.text(appID), .text(environment.stored), .blob(sealed), .integer(now)]
            )
        }
    }

    package func credentials(appID: String) async throws -> [Route: [UInt8]] {
        try await self.database.read { db in
            var result: [Route: [UInt8]] = [:]
            for row in try db.query("SELECT environment, sealed FROM credentials WHERE app_id = ?", [.text(appID)]) {
                if let environment = row[0].string.flatMap(Route.init(stored:)), let sealed = row[1].bytes {
                    result[environment] = sealed
                }
            }
            return result
        }
    }

    // MARK: API keys

    package func createAPIKey(id: String, hash: [UInt8], scope: APIScope, appID: String?, name: String?, expiresAt: Int64?, now: Int64) async throws {
        try await self.database.write { db in
            try db.query(
                "INSERT INTO api_keys (id, hash, scope, app_id, name, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    .text(id), .blob(hash), .text(scope.rawValue), appID.map(SQLValue.text) ?? .null, name.map(SQLValue.text) ?? .null,
                    .integer(now), expiresAt.map(SQLValue.integer) ?? .null,
                ]
            )
        }
    }

    package func rotateAPIKey(
        replacing: String, id: String, hash: [UInt8], expiresAt: Int64?, overlapUntil: Int64, now: Int64
    ) async throws -> StoredAPIKey? {
        defer { self.lookups.clear() }
        return try await self.database.write { db in
            var old: StoredAPIKey?
            try db.each("SELECT \(Self.keyColumns) FROM api_keys WHERE id = ? AND revoked_at IS NULL", [.text(replacing)]) { old = Self.apiKey($0) }
            guard var old else { return nil }
            old.expiresAt = min(old.expiresAt ?? overlapUntil, overlapUntil)
            try db.query("UPDATE api_keys SET expires_at = ? WHERE id = ?", [.integer(old.expiresAt ?? overlapUntil), .text(replacing)])
            try db.query(
                "INSERT INTO api_keys (id, hash, scope, app_id, name, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    .text(id), .blob(hash), .text(old.scope.rawValue), old.appID.map(SQLValue.text) ?? .null, old.name.map(SQLValue.text) ?? .null,
                    .integer(now), expiresAt.map(SQLValue.integer) ?? .null,
                ]
            )
            return old
        }
    }

    package func touchAPIKey(id: String, now: Int64) async throws {
        try await self.database.write { db in
            try db.query("UPDATE api_keys SET last_used_at = ? WHERE id = ?", [.integer(now), .text(id)])
        }
    }

    private static let keyColumns = "id, hash, scope, app_id, name, created_at, revoked_at, expires_at, last_used_at"

    private static func apiKey(_ row: SQLiteDatabase.Connection.Row) -> StoredAPIKey? {
        guard let scope = row.string(2).flatMap(APIScope.init(rawValue:)) else { return nil }
        return StoredAPIKey(
            id: row.string(0) ?? "", hash: row.bytes(1) ?? [], scope: scope, appID: row.string(3), name: row.string(4),
            createdAt: row.int(5) ?? 0, revokedAt: row.int(6), expiresAt: row.int(7), lastUsedAt: row.int(8)
        )
    }

    package func apiKey(id: String) async throws -> StoredAPIKey? {
        try await self.lookups.apiKey(id: id) {
            try await self.database.read { db in
                var key: StoredAPIKey?
                try db.each("SELECT \(Self.keyColumns) FROM api_keys WHERE id = ? AND revoked_at IS NULL", [.text(id)]) { key = Self.apiKey($0) }
                return key
            }
        }
    }

    package func apiKeys() async throws -> [StoredAPIKey] {
        try await self.database.read { db in
            var keys: [StoredAPIKey] = []
            try db.each("SELECT \(Self.keyColumns) FROM api_keys ORDER BY created_at, id", []) { row in
                if let key = Self.apiKey(row) { keys.append(key) }
            }
            return keys
        }
    }

    package func revokeAPIKey(id: String, now: Int64) async throws -> Bool {
        defer { self.lookups.clear() }
        return try await self.database.write { db in
            var key: StoredAPIKey?
            try db.each("SELECT \(Self.keyColumns) FROM api_keys WHERE id = ? AND revoked_at IS NULL", [.text(id)]) { key = Self.apiKey($0) }
            guard let key else { return false }
            if key.scope == .admin {
                var admins: [StoredAPIKey] = []
                try db.each("SELECT \(Self.keyColumns) FROM api_keys WHERE scope = 'admin' AND revoked_at IS NULL", []) { row in
                    if let admin = Self.apiKey(row) { admins.append(admin) }
                }
                try KeyAccess.requireAnotherGoverningKey(revoking: key, admins: admins, now: now)
            }
            try db.query("UPDATE api_keys SET revoked_at = ? WHERE id = ?", [.integer(now), .text(id)])
            return true
        }
    }

    package func createFirstAPIKey(id: String, hash: [UInt8], name: String?, now: Int64) async throws -> Bool {
        try await self.database.write { db in
            guard try db.query("SELECT 1 FROM api_keys LIMIT 1").isEmpty else { return false }
            try db.query(
                "INSERT INTO api_keys (id, hash, scope, app_id, name, created_at) VALUES (?, ?, 'admin', NULL, ?, ?)",
                [.text(id), .blob(hash), name.map(SQLValue.text) ?? .null, .integer(now)]
            )
            return true
        }
    }

    package func hasAPIKeys() async throws -> Bool {
        try await self.database.read { db in try db.query("SELECT 1 FROM api_keys LIMIT 1").isEmpty == false }
    }

    // MARK: devices

    static let deviceColumns = """
        id, app_id, token, kind, environment, user_id, locale, time_zone, app_version, platform, activity_id,
        attributes_type, active, created_at, last_registered_at, invalidated_at, invalidation_reason, public_key, public_key_type
        """

    /// The registration's upsert, made once (not per registration: the statement cache looks it up by its text).
    private static let upsertDevice = """
        INSERT INTO devices (app_id, token, kind, environment, user_id, locale, time_zone, app_version, platform,
            activity_id, attributes_type, active, created_at, last_registered_at, public_key, public_key_type)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
        ON CONFLICT (app_id, token) DO UPDATE SET kind = excluded.kind, environment = excluded.environment,
            user_id = excluded.user_id, locale = excluded.locale, time_zone = excluded.time_zone,
            app_version = excluded.app_version, platform = excluded.platform, activity_id = excluded.activity_id,
            attributes_type = excluded.attributes_type, active = 1, public_key = excluded.public_key,
            public_key_type = excluded.public_key_type,
            last_registered_at = excluded.last_registered_at, invalidated_at = NULL, invalidation_reason = NULL
        RETURNING \(deviceColumns)
        """

    package func register(appID: String, _ asked: DeviceRegistration, authority: RegistrationAuthority, now: Int64) async throws -> Device {
        try await self.database.writeGrouped { db in
            // What the device holds now decides what this caller may change (read in this write).
            var existing: (userID: String?, tags: [String])?
            if authority.readsDevice,
                let current = try db.query(
                    "SELECT id, user_id FROM devices WHERE app_id = ? AND token = ?", [.text(appID), .text(asked.token)]
                ).first,
                let id = current[0].int
            {
                let tags =
                    authority.readsTags
                    ? try db.query("SELECT tag FROM device_tags WHERE device_id = ?", [.integer(id)]).compactMap { $0[0].string } : []
                existing = (current[1].string, tags)
            }
            let registration = try RegistrationPolicy.apply(asked, existing: existing, authority: authority)
            let rows = try db.query(
                Self.upsertDevice,
                [
                    .text(appID), .text(registration.token), .text(registration.kind.rawValue), .text(registration.route.stored),
                    Self.optional(registration.userID), Self.optional(registration.locale), Self.optional(registration.timeZone),
                    Self.optional(registration.appVersion), Self.optional(registration.platform), Self.optional(registration.activityID),
                    Self.optional(registration.attributesType), .integer(now), .integer(now),
                    registration.publicKey.map(SQLValue.blob) ?? .null, Self.optional(registration.publicKeyType),
                ]
            )
            guard let row = rows.first else { throw SQLiteError(code: 1, message: "upsert returned nothing") }
            let id = row[0].int ?? 0
            // A device read above and not found was inserted just now (this is the only writer): it has no tags yet.
            if !authority.readsDevice || existing != nil {
                try db.query("DELETE FROM device_tags WHERE device_id = ?", [.integer(id)])
            }
            for tag in Set(registration.tags) {
                try db.query("INSERT INTO device_tags (device_id, tag) VALUES (?, ?)", [.integer(id), .text(tag)])
            }
            return Self.device(row, tags: registration.tags.sorted())
        }
    }

    package func unregister(appID: String, token: String) async throws -> Bool {
        try await self.database.writeGrouped { db in
            try db.query("DELETE FROM devices WHERE app_id = ? AND token = ?", [.text(appID), .text(token)])
            return db.changes > 0
        }
    }

    package func devices(appID: String, _ query: DeviceQuery) async throws -> [Device] {
        try await self.database.read { db in
            var sql = "SELECT \(Self.deviceColumns) FROM devices d WHERE app_id = ?"
            var bindings: [SQLValue] = [.text(appID)]
            if let userID = query.userID {
                sql += " AND user_id = ?"
                bindings.append(.text(userID))
            }
            if let tag = query.tag {
                sql += " AND id IN (SELECT device_id FROM device_tags WHERE tag = ?)"
                bindings.append(.text(tag))
            }
            if let prefix = query.tokenPrefix {
                sql += " AND token >= ? AND token < ?"
                bindings.append(.text(prefix))
                bindings.append(.text(prefix + "\u{FFFF}"))
            }
            if let afterID = query.afterID {
                sql += " AND id > ?"
                bindings.append(.integer(afterID))
            }
            sql += " ORDER BY id LIMIT ?"
            bindings.append(.integer(Int64(max(1, query.limit))))
            let rows = try db.query(sql, bindings)
            let tags = try Self.tags(db, rows.map { $0[0].int ?? 0 })
            return rows.map { row in Self.device(row, tags: tags[row[0].int ?? 0] ?? []) }
        }
    }

    package func device(appID: String, token: String) async throws -> Device? {
        try await self.database.read { db in
            try db.query("SELECT \(Self.deviceColumns) FROM devices WHERE app_id = ? AND token = ?", [.text(appID), .text(token)])
                .first.map { row in Self.device(row, tags: try Self.tags(db, row[0].int ?? 0)) }
        }
    }

    package func invalidations(appID: String, deviceID: Int64) async throws -> [Invalidation] {
        try await self.database.read { db in
            try db.query(
                "SELECT device_id, reason, apns_timestamp, at, applied FROM invalidations WHERE app_id = ? AND device_id = ? ORDER BY id",
                [.text(appID), .integer(deviceID)]
            ).map { row in
                Invalidation(
                    deviceID: row[0].int ?? 0, reason: row[1].string ?? "", apnsTimestamp: row[2].int, at: row[3].int ?? 0, applied: row[4].int == 1)
            }
        }
    }

    private static func tags(_ db: borrowing SQLiteDatabase.Connection, _ id: Int64) throws -> [String] {
        try Self.tags(db, [id])[id] ?? []
    }

    /// The tags of each of `ids` (sorted), in one statement rather than one per device.
    private static func tags(_ db: borrowing SQLiteDatabase.Connection, _ ids: [Int64]) throws -> [Int64: [String]] {
        guard !ids.isEmpty else { return [:] }
        var tags: [Int64: [String]] = [:]
        try db.each(
            "SELECT device_id, tag FROM device_tags WHERE device_id IN (SELECT value FROM json_each(?)) ORDER BY device_id, tag",
            [.text(JSONValue.array(ids.map { .int($0) }).jsonString)]
        ) { row in
            if let id = row.int(0), let tag = row.string(1) { tags[id, default: []].append(tag) }
        }
        return tags
    }

    private static func device(_ row: [SQLValue], tags: [String]) -> Device {
        let registration = DeviceRegistration(
            address: PushAddress(stored: row[2].string ?? "", route: row[4].string.flatMap(Route.init(stored:)) ?? .apns(.production)),
            kind: row[3].string.flatMap(DeviceKind.init(rawValue:)) ?? .device,
            userID: row[5].string, tags: tags, locale: row[6].string, timeZone: row[7].string, appVersion: row[8].string,
            platform: row[9].string, activityID: row[10].string, attributesType: row[11].string, publicKey: row[17].bytes,
            publicKeyType: row[18].string
        )
        return Device(
            id: row[0].int ?? 0, appID: row[1].string ?? "", registration: registration, active: row[12].int == 1,
            createdAt: row[13].int ?? 0, lastRegisteredAt: row[14].int ?? 0, invalidatedAt: row[15].int,
            invalidationReason: row[16].string
        )
    }

    private static func optional(_ text: String?) -> SQLValue { text.map(SQLValue.text) ?? .null }
}

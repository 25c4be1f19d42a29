// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import HeraldSQLite
import HeraldTesting
import Testing

@testable import HeraldPostgres

/// Data governance, on every driver: an app deleted chunk by chunk, credentials as metadata, a
/// user's data exported and erased.
@Suite(.heavy) struct GovernanceStoreTests {
    let contract = StoreContractTests()

    func token(_ n: Int) throws -> DeviceToken { try self.contract.token(n) }

    /// Rows of `table` (every app's), straight from the database.
    func rows(_ store: any HeraldStore, _ table: String) async throws -> Int64 {
        if let store = store as? SQLiteStore {
            return try await store.database.read { db in try db.query("SELECT count(*) FROM \(table)").first?.first?.int ?? -1 }
        }
        let store = try #require(store as? PostgresStore)
        return try await store.read { db in try await db.query("SELECT count(*)::bigint FROM \(table)").first?.int(0) ?? -1 }
    }

    /// Every webhook message's body, as text.
    func webhookBodies(_ store: any HeraldStore) async throws -> [String] {
        if let store = store as? SQLiteStore {
            return try await store.database.read { db in
                try db.query("SELECT body FROM webhook_messages ORDER BY id").map { String(decoding: $0[0].bytes ?? [], as: UTF8.self) }
            }
        }
        let store = try #require(store as? PostgresStore)
        return try await store.read { db in
            try await db.query("SELECT body FROM webhook_messages ORDER BY id").map { String(decoding: $0.bytes(0) ?? [], as: UTF8.self) }
        }
    }

    /// Sends `id` to `audience` of `app` and records every claimed delivery as sent (or as told).
    func sendAndRecord(
        _ store: any HeraldStore, app: String = "demo", id: String, _ audience: Audience, payload: String = "{}",
        template: NotificationTemplate? = nil, cap: FrequencyCap? = nil, now: Int64,
        outcome: (ClaimedDelivery) -> DeliveryResult.Outcome = { _ in .sent(apnsID: nil) }
    ) async throws {
        var spec = NotificationSpec(audience: audience, payload: Array(payload.utf8))
        spec.template = template
        spec.adoptFrequencyCap(cap)
        _ = try await store.createNotification(appID: app, id: id, bundleID: "com.example.app", spec, now: now)
        while true {
            let claimed = try await store.claimDeliveries(limit: 5000, now: now, leaseMilliseconds: 60_000)
            if claimed.isEmpty { return }
            try await store.record(claimed.map { DeliveryResult($0, outcome: outcome($0), latencyMilliseconds: 1) }, now: now)
        }
    }

    @Test(
        "erasing a user: devices gone, tokens scrubbed from deliveries (counts kept) and webhook messages, plaintext only they got emptied; audited",
        arguments: Driver.enabled)
    func erase(driver: Driver) async throws {
        try await driver.withStore { store in
            let ann = [try self.token(0xA1), try self.token(0xA2)].map(\.hex)
            let bob = try self.token(0xB1).hex
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(0xA1), userID: "ann", tags: ["x"]), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(0xA2), userID: "ann"), now: 1)
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(0xB1), userID: "bob"), now: 1)
            // Both sent by template: its data ("Ann's code") is as personal as a payload.
            let greeting = Template(
                id: "greet", appID: "demo", name: "Greeting", defaultVariant: TemplateVariant(body: "Hello {{code}}"), createdAt: 1, updatedAt: 1)
            func templated(_ code: String) -> NotificationTemplate {
                NotificationTemplate(template: greeting, data: .object([("code", .string(code))]))
            }
            // Capped (with room for all): ann's and bob's frequency-cap history, a row each.
            try await self.sendAndRecord(
                store, id: "all", .all, payload: #"{"aps":{}}"#, template: templated("for everyone"),
                cap: FrequencyCap(limit: 100, windowSeconds: 86_400), now: 10)
            let annOnly = templated("ann-4711")
            try await self.sendAndRecord(store, id: "mine", .users(["ann"]), payload: #"{"aps":{}}"#, template: annOnly, now: 20) { claimed in
                claimed.token == ann[1] ? .failed(status: 410, reason: "Unregistered", invalidate: true, timestamp: nil) : .sent(apnsID: nil)
            }
            try await store.createWebhook(
                Webhook(id: "wh", appID: "demo", url: "https://example.com/h", sealedSecret: [1], types: [.sent], createdAt: 5))
            try await store.enqueueWebhookMessages(
                [WebhookMessage(webhookID: "wh", body: Array(#"[{"token":"\#(ann[0])"},{"token":"\#(bob)"}]"#.utf8), events: 2)], now: 30,
                expiresAt: 10_000
            )

            let before = try await store.userData(appID: "demo", userID: "ann")
            #expect(before.devices.map(\.registration.token) == ann)
            #expect(before.deliveries.count == 4 && Set(before.deliveries.map(\.token)) == Set(ann))
            #expect(before.invalidations.count == 1 && before.invalidations.first?.reason == "Unregistered")

            #expect(try await self.rows(store, "frequency_counts") == 2)

            let erased = try await store.eraseUser(
                appID: "demo", userID: "ann", audit: AuditRecord(at: 40, keyID: "hk_admin", action: "user.erase", appID: "demo", subject: "ann")
            )
            #expect(try await self.rows(store, "frequency_counts") == 1, "ann's frequency-cap history is gone, bob's stays")
            #expect(erased == UserErasure(devices: 2, deliveries: 4, notifications: 1, webhookMessages: 1))

            let after = try await store.userData(appID: "demo", userID: "ann")
            #expect(after.devices.isEmpty && after.deliveries.isEmpty && after.invalidations.isEmpty)
            #expect(try await store.device(appID: "demo", token: bob) != nil, "another user's device stays")
            let all = try #require(try await store.notification(appID: "demo", id: "all", deliveryLimit: 10))
            #expect(all.counts[.sent] == 3, "counts are kept")
            #expect(all.deliveries.filter { $0.token.isEmpty }.count == 2 && all.deliveries.contains { $0.token == bob })
            let mine = try #require(try await store.notification(appID: "demo", id: "mine", deliveryLimit: 10))
            #expect(mine.counts[.sent] == 1 && mine.counts[.failed] == 1)
            #expect(try await self.contract.payloadLength(store, notificationID: "mine") == 0, "only ann was to receive it")
            #expect(try await self.contract.payloadLength(store, notificationID: "all") ?? 0 > 0, "bob received it too")
            #expect(try await self.contract.storedTemplate(store, notificationID: "mine") == nil, "its template and data go with the payload")
            #expect(try await self.contract.storedTemplate(store, notificationID: "all")?.contains("for everyone") == true)
            let body = try await self.webhookBodies(store).joined()
            #expect(!body.contains(ann[0]) && body.contains(bob))
            #expect(try await self.rows(store, "invalidations") == 0)

            let audit = try await store.auditRecords(appID: "demo", limit: 10)
            #expect(
                audit.map(\.action) == ["user.erase"] && audit.first?.keyID == "hk_admin" && audit.first?.subject == "ann" && audit.first?.at == 40)
            #expect(try await store.auditRecords(appID: "other", limit: 10).isEmpty)
            #expect(
                try await store.eraseUser(
                    appID: "demo", userID: "ann", audit: AuditRecord(at: 50, keyID: nil, action: "user.erase", appID: "demo", subject: "ann"))
                    == UserErasure())
        }
    }

    @Test("credentials listed with when they were set, and deleted per environment", arguments: Driver.enabled)
    func credentials(driver: Driver) async throws {
        try await driver.withStore { store in
            try await store.setCredential(appID: "demo", environment: .development, sealed: [1], now: 5)
            try await store.setCredential(appID: "demo", environment: .production, sealed: [2], now: 6)
            let listed = try await store.credentialRecords(appID: "demo")
            #expect(
                listed == [
                    CredentialRecord(environment: .development, sealed: [1], updatedAt: 5),
                    CredentialRecord(environment: .production, sealed: [2], updatedAt: 6),
                ])
            #expect(try await store.deleteCredential(appID: "demo", environment: .development))
            #expect(try await !store.deleteCredential(appID: "demo", environment: .development))
            #expect(try await store.credentials(appID: "demo").keys.sorted { $0.stored < $1.stored } == [.production])
        }
    }

    @Test("an app is deleted in bounded chunks, every row of it, while another app's notification is sent and recorded", arguments: Driver.enabled)
    func deleteApp(driver: Driver) async throws {
        try await driver.withStore { store in
            try await store.createApp(App(id: "other", bundleID: "com.example.other", createdAt: 1))
            _ = try await store.register(appID: "other", DeviceRegistration(token: try self.token(1)), now: 1)
            let tables = [
                "devices", "device_tags", "notifications", "deliveries", "delivery_chunks", "invalidations", "credentials", "api_keys", "webhooks",
                "webhook_messages", "frequency_counts",
            ]
            var otherRows: [String: Int64] = [:]
            for table in tables { otherRows[table] = try await self.rows(store, table) }

            let devices = 600
            for n in 1...devices {
                _ = try await store.register(
                    appID: "demo", DeviceRegistration(token: try self.token(1000 + n), userID: "u\(n % 50)", tags: ["t\(n % 3)", "all"]), now: 2)
            }
            // Capped (with room for all): the frequency-cap history of its 50 users and 100
            // devices of no user (in rows of 64), rows with no foreign key, deleted in the chunks too.
            var rowFulls = Set<Int64>()
            for n in 1...100 {
                let device = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(5000 + n)), now: 2)
                rowFulls.insert(device.id / FrequencyCap.devicesPerRow)
            }
            try await self.sendAndRecord(store, id: "big", .all, cap: FrequencyCap(limit: 100, windowSeconds: 86_400), now: 10) { claimed in
                claimed.token.hasSuffix("7") ? .failed(status: 410, reason: "Unregistered", invalidate: true, timestamp: nil) : .sent(apnsID: nil)
            }
            try await store.setCredential(appID: "demo", environment: .production, sealed: [9], now: 3)
            try await store.createAPIKey(id: "hk_demo", hash: [1], scope: .send, appID: "demo", name: nil, now: 3)
            try await store.createWebhook(
                Webhook(id: "wh", appID: "demo", url: "https://example.com/h", sealedSecret: [1], types: [.sent], createdAt: 5))
            try await store.enqueueWebhookMessages(
                (0..<20).map { _ in WebhookMessage(webhookID: "wh", body: [0x7B, 0x7D], events: 1) }, now: 30, expiresAt: 10_000)
            #expect(try await self.rows(store, "deliveries") == Int64(devices + 100))
            #expect(try await self.rows(store, "frequency_counts") == Int64(50 + rowFulls.count), "a row per user, and per 64 devices of none")
            #expect(try await self.rows(store, "invalidations") > 0)

            // The deletion and another app's send, at once: each chunk is a short transaction of its own.
            let chunk = 100
            let (chunks, sent) = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                group.addTask {
                    var chunks = 0
                    while true {
                        let deleted = try await store.deleteAppRows(appID: "demo", limit: chunk, now: 40)
                        if deleted == 0 { return (chunks, 0) }
                        #expect(deleted <= chunk)
                        chunks += 1
                    }
                }
                group.addTask {
                    try await self.sendAndRecord(store, app: "other", id: "other-1", .all, now: 50)
                    let status = try await store.notification(appID: "other", id: "other-1", deliveryLimit: 5)
                    return (0, status?.counts[.sent] ?? 0)
                }
                var chunks = 0
                var sent = 0
                for try await (c, s) in group {
                    chunks += c
                    sent += s
                }
                return (chunks, sent)
            }
            #expect(sent == 1, "the other app's notification went out")
            #expect(chunks >= 3 * devices / chunk, "deliveries, tags, devices, … went chunk by chunk")
            #expect(try await store.app("demo") == nil)
            for table in tables {
                let expected = (otherRows[table] ?? 0) + (["notifications", "deliveries", "delivery_chunks"].contains(table) ? 1 : 0)
                let found = try await self.rows(store, table)
                #expect(found == expected || (table == "delivery_chunks" && found <= expected), "\(table): \(found) rows")
            }
            #expect(try await store.app("other") != nil)
        }
    }

    @Test(
        "an app's deletion begins at once (keys revoked, credentials gone, marked) and counts its progress chunk by chunk", arguments: Driver.enabled)
    func deletionProgress(driver: Driver) async throws {
        try await driver.withStore { store in
            for n in 1...30 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n), tags: ["t"]), now: 2) }
            try await store.setCredential(appID: "demo", environment: .production, sealed: [9], now: 3)
            try await store.createAPIKey(id: "hk_demo", hash: [1], scope: .send, appID: "demo", name: nil, now: 3)
            #expect(try await store.appsBeingDeleted().isEmpty)
            let begun = try #require(try await store.beginAppDeletion(appID: "demo", now: 40))
            #expect(begun.deletion == AppDeletion(since: 40, deletedRows: 0))
            #expect(try await store.apiKey(id: "hk_demo") == nil, "its keys are revoked at once")
            #expect(try await store.credentials(appID: "demo").isEmpty, "its credentials are gone at once")
            #expect(try await store.appsBeingDeleted() == ["demo"])
            // Begun again (a second DELETE): the first time is kept.
            #expect(try await store.beginAppDeletion(appID: "demo", now: 50)?.deletion?.since == 40)
            #expect(try await store.beginAppDeletion(appID: "nobody", now: 50) == nil)
            let first = try await store.deleteAppRows(appID: "demo", limit: 10, now: 60)
            #expect(first == 10)
            #expect(try await store.app("demo")?.deletion?.deletedRows == 10)
            while try await store.deleteAppRows(appID: "demo", limit: 10, now: 60) > 0 {}
            #expect(try await store.app("demo") == nil)
            #expect(try await store.appsBeingDeleted().isEmpty)
        }
    }

    @Test("SQLite: after an erasure and a checkpoint, no token of the user is in the database file or its WAL")
    func erasureLeavesNoBytes() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-erasure")
        defer { directory.remove() }
        let path = directory.path + "/herald.sqlite"
        let store = try await SQLiteStore(path: path)
        try await store.createApp(App(id: "demo", bundleID: "com.example.app", createdAt: 1))
        // Enough of ann's devices side by side that whole pages hold only hers and are freed by the erasure.
        let ann = try (0..<120).map { try self.token(0xA11CE000 + $0).hex }
        for (n, token) in ann.enumerated() {
            _ = try await store.register(
                appID: "demo", DeviceRegistration(token: try DeviceToken(hex: token), userID: "ann", tags: ["t\(n)"]), now: 1)
        }
        // Neighbours on the same pages, so that the erased rows sit among rows that stay.
        for n in 1...200 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n), userID: "u\(n)"), now: 1) }
        for round in 0..<3 {
            try await self.sendAndRecord(store, id: "all-\(round)", .all, now: 10 + Int64(round))
        }
        try await self.sendAndRecord(store, id: "ann", .users(["ann"]), payload: #"{"aps":{"alert":"secret for ann"}}"#, now: 20)
        try await store.createWebhook(Webhook(id: "wh", appID: "demo", url: "https://example.com/h", sealedSecret: [1], types: [.sent], createdAt: 5))
        try await store.enqueueWebhookMessages(
            [WebhookMessage(webhookID: "wh", body: Array(#"[{"token":"\#(ann[0])"}]"#.utf8), events: 1)], now: 30, expiresAt: 10_000)

        func found() throws -> [String] {
            var hits: [String] = []
            for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
                for token in ann where bytes.range(of: Data(token.utf8)) != nil { hits.append("\(file): \(token.prefix(8))…") }
                if bytes.range(of: Data("secret for ann".utf8)) != nil { hits.append("\(file): the plaintext") }
            }
            return hits
        }
        try await store.database.checkpoint()
        #expect(try found().count == ann.count + 1, "the check sees the tokens and the plaintext while they are there")

        _ = try await store.eraseUser(
            appID: "demo", userID: "ann", audit: AuditRecord(at: 40, keyID: nil, action: "user.erase", appID: "demo", subject: "ann"))
        #expect(try found() == [], "the erasure checkpoints by itself")
        #expect(try await store.database.checkpoint(), "no reader held the checkpoint back")
        #expect(try found() == [])
        #expect(try await store.devices(appID: "demo", DeviceQuery(limit: 500)).count == 200)
    }
}

extension GovernanceStoreTests {
    /// A store opened on a file that `schema` wrote (as an older version left it), migrated to
    /// now. Unless the schema has one, the file gets the columns of `devices` that later
    /// migrations index.
    func migrated(from schema: String) async throws -> (SQLiteStore, TemporaryDirectory) {
        let directory = try TemporaryDirectory(prefix: "herald-counts")
        let path = directory.path + "/herald.sqlite"
        let devices =
            schema.contains("CREATE TABLE devices")
            ? "" : "CREATE TABLE devices (id INTEGER PRIMARY KEY, app_id TEXT NOT NULL, token TEXT NOT NULL, active INTEGER NOT NULL DEFAULT 1);"
        // Migration 19 adds a column to apps, 20 one to notifications: every older file has the tables.
        let apps =
            schema.contains("CREATE TABLE apps")
            ? "" : "CREATE TABLE apps (id TEXT PRIMARY KEY, bundle_id TEXT NOT NULL, created_at INTEGER NOT NULL);"
        let notifications = schema.contains("CREATE TABLE notifications") ? "" : "CREATE TABLE notifications (id TEXT PRIMARY KEY);"
        do {
            let old = try SQLiteDatabase(path: path)
            try await old.write { db in try db.execute(apps + devices + notifications + schema) }
        }
        return (try await SQLiteStore(path: path), directory)
    }

    @Test("SQLite migration 16: a schema-15 file's frequency counts are kept in a table without rowids")
    func sqliteCountsWithoutRowid() async throws {
        // A file as schema 15 left it: the counts table with its rowid, one person's row in it.
        let (store, directory) = try await self.migrated(
            from: """
                CREATE TABLE schema_version (version INTEGER NOT NULL);
                INSERT INTO schema_version (version) VALUES (15);
                CREATE TABLE frequency_counts (
                    app_id TEXT NOT NULL, subject TEXT NOT NULL, category TEXT NOT NULL, times TEXT NOT NULL,
                    PRIMARY KEY (app_id, subject, category));
                INSERT INTO frequency_counts VALUES ('demo', 'u:ann', '', '1000,2000');
                """)
        defer { directory.remove() }
        #expect(try await store.schemaVersion() >= 16)
        let (sql, rows) = try await store.database.read { db in
            (
                try db.query("SELECT sql FROM sqlite_master WHERE name = 'frequency_counts'").first?.first?.string ?? "",
                try db.query("SELECT app_id, subject, category, times FROM frequency_counts")
            )
        }
        #expect(sql.hasSuffix("WITHOUT ROWID"))
        #expect(rows == [[.text("demo"), .text("u:ann"), .text(""), .text("1000,2000")]])
    }

    @Test("SQLite migration 17: each device's own frequency-count row moves into its row-full's, with its times")
    func sqliteCountsByRowFull() async throws {
        // A file as schema 16 left it: a user's row, three devices' rows (two of them in the same
        // row-full), one of them in a category.
        let (store, directory) = try await self.migrated(
            from: """
                CREATE TABLE schema_version (version INTEGER NOT NULL);
                INSERT INTO schema_version (version) VALUES (16);
                CREATE TABLE frequency_counts (
                    app_id TEXT NOT NULL, subject TEXT NOT NULL, category TEXT NOT NULL, times TEXT NOT NULL,
                    PRIMARY KEY (app_id, subject, category)) WITHOUT ROWID;
                INSERT INTO frequency_counts VALUES ('demo', 'u:ann', '', '1000,2000');
                INSERT INTO frequency_counts VALUES ('demo', 'd:70', '', '3000');
                INSERT INTO frequency_counts VALUES ('demo', 'd:65', '', '1000,4000');
                INSERT INTO frequency_counts VALUES ('demo', 'd:7', 'news', '5000');
                """)
        defer { directory.remove() }
        #expect(try await store.schemaVersion() >= 17)
        let rows = try await store.database.read { db in
            try db.query("SELECT app_id, subject, category, times FROM frequency_counts ORDER BY subject, category")
        }
        var stored: [FrequencyCap.Key: String] = [:]
        for row in rows {
            guard case .text(let app) = row[0], case .text(let subject) = row[1], case .text(let category) = row[2], case .text(let times) = row[3]
            else { continue }
            stored[FrequencyCap.Key(appID: app, subject: subject, category: category)] = times
        }
        #expect(stored.keys.map(\.subject).sorted() == ["b:0", "b:1", "u:ann"], "devices 65 and 70 share row-full 1")
        #expect(
            FrequencyCap.history(stored: stored) == [
                .init(appID: "demo", subject: "u:ann", category: ""): [1000, 2000],
                .init(appID: "demo", subject: "d:65", category: ""): [1000, 4000],
                .init(appID: "demo", subject: "d:70", category: ""): [3000],
                .init(appID: "demo", subject: "d:7", category: "news"): [5000],
            ])
    }

    @Test("SQLite migration 18: a schema-17 file's inactive devices are in devices_inactive, its active ones are not")
    func sqliteInactiveIndex() async throws {
        let (store, directory) = try await self.migrated(
            from: """
                CREATE TABLE schema_version (version INTEGER NOT NULL);
                INSERT INTO schema_version (version) VALUES (17);
                CREATE TABLE devices (id INTEGER PRIMARY KEY, app_id TEXT NOT NULL, token TEXT NOT NULL, active INTEGER NOT NULL DEFAULT 1);
                INSERT INTO devices VALUES (1, 'demo', 'aa', 1), (2, 'demo', 'bb', 0), (3, 'other', 'aa', 0);
                """)
        defer { directory.remove() }
        #expect(try await store.schemaVersion() == 20)
        let (inactive, entries) = try await store.database.read { db in
            (
                try db.query("SELECT app_id, token FROM devices INDEXED BY devices_inactive WHERE active = 0 ORDER BY app_id, token"),
                // What the index holds, whatever a query asks: a full index would hold all three.
                try db.query("SELECT count(*) FROM devices INDEXED BY devices_inactive WHERE active = 0 AND app_id IS NOT NULL").first?.first
            )
        }
        #expect(inactive == [[.text("demo"), .text("bb")], [.text("other"), .text("aa")]])
        #expect(entries == .integer(2))
        let partial = try await store.database.read { db in
            try db.query("SELECT \"partial\" FROM pragma_index_list('devices') WHERE name = 'devices_inactive'").first?.first
        }
        #expect(partial == .integer(1), "an index of the inactive devices only")
    }

    @Test("SQLite migration 19: a schema-18 file's apps keep accepting unbound user assertions; a new app does not")
    func sqliteUnboundAssertions() async throws {
        let (store, directory) = try await self.migrated(
            from: """
                CREATE TABLE apps (id TEXT PRIMARY KEY, bundle_id TEXT NOT NULL, created_at INTEGER NOT NULL);
                INSERT INTO apps VALUES ('old', 'com.example.old', 1);
                CREATE TABLE schema_version (version INTEGER NOT NULL);
                INSERT INTO schema_version (version) VALUES (18);
                """)
        defer { directory.remove() }
        #expect(try await store.schemaVersion() == 20)
        let old = try await store.database.read { db in try db.query("SELECT unbound_assertions FROM apps WHERE id = 'old'").first?.first }
        #expect(old == .integer(1), "an app made before bound assertions keeps taking unbound ones")
        // A new app, in a file made by this version, takes bound assertions only.
        let fresh = try TemporaryDirectory(prefix: "herald-fresh")
        defer { fresh.remove() }
        let current = try await SQLiteStore(path: fresh.path + "/herald.sqlite")
        try await current.createApp(App(id: "new", bundleID: "com.example.new", createdAt: 2))
        #expect(try await current.app("new")?.security.unboundAssertions == false)
    }
}

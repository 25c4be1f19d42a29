// SPDX-License-Identifier: Apache-2.0
import APNSModels
public import HeraldCore

extension SQLiteDatabase.Connection.Row: StoredRow {}

extension SQLiteStore {
    /// The conditions (after `d.app_id = ? AND d.active = 1`) that pick a targeting's devices
    /// from `devices d`, with their bindings numbered from `first`; and how to name the device id
    /// in range conditions: for lists of tokens, users or one activity, `+d.id`, which keeps
    /// SQLite from walking the whole id range instead of the index on those columns.
    static func audienceFilter(_ targeting: Targeting, first: Int) -> (sql: String, bindings: [SQLValue], id: String) {
        var sql = ""
        var bindings: [SQLValue] = []
        func next(_ value: SQLValue) -> String {
            bindings.append(value)
            return "?\(first + bindings.count - 1)"
        }
        func list(_ values: [String]) -> SQLValue { .text(JSONValue.array(values.map(JSONValue.string)).jsonString) }
        switch targeting.audience {
        case .all:
            break
        case .tokens(let tokens):
            sql += " AND d.token IN (SELECT value FROM json_each(\(next(list(tokens)))))"
        case .users(let users):
            sql += " AND d.user_id IN (SELECT value FROM json_each(\(next(list(users)))))"
        case .activity(let activityID):
            sql += " AND d.kind = 'liveactivity' AND d.activity_id = \(next(.text(activityID)))"
        case .tags(let tags, let matchAll):
            let parameter = next(list(tags))
            if matchAll {
                sql += """
                     AND (SELECT count(*) FROM device_tags t WHERE t.device_id = d.id
                        AND t.tag IN (SELECT value FROM json_each(\(parameter)))) = \(next(.integer(Int64(Set(tags).count))))
                    """
            } else {
                sql += " AND EXISTS (SELECT 1 FROM device_tags t WHERE t.device_id = d.id AND t.tag IN (SELECT value FROM json_each(\(parameter))))"
            }
        }
        let kinds = targeting.eligibleKinds
        if !kinds.isEmpty {
            // Herald's own names, spelled into the statement: no JSON to parse per statement.
            sql += " AND d.kind IN (" + kinds.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ") + ")"
        }
        if let environment = targeting.environment {
            sql += " AND d.environment = \(next(.text(environment.rawValue)))"
        }
        if targeting.encrypted {
            sql += " AND d.public_key IS NOT NULL"
        }
        switch targeting.audience {
        case .tokens, .users, .activity: return (sql, bindings, "+d.id")
        case .all, .tags: return (sql, bindings, "d.id")
        }
    }

    public func createNotification(appID: String, id: String, bundleID: String, _ spec: NotificationSpec, now: Int64) async throws
        -> (id: String, deliveries: Int, existing: Bool)
    {
        // The audience is every matching device that exists now (ids up to the newest). A list
        // (tokens, users, one activity) is resolved to device ids, once; "all" and tags are
        // counted, and walked by id range when expanded. Both on a reader connection, beside the
        // writer: a device that goes away before its chunk is expanded is skipped then.
        let targeting = spec.targeting
        let filter = Self.audienceFilter(targeting, first: 3)
        let (until, size, deviceIDs) = try await self.database.read { db -> (Int64, Int64, String?) in
            let until = try db.query("SELECT coalesce(max(id), 0) FROM devices").first?[0].int ?? 0
            let head = "FROM devices d WHERE d.app_id = ?1 AND d.active = 1 AND \(filter.id) <= ?2" + filter.sql
            let bindings: [SQLValue] = [.text(appID), .integer(until)] + filter.bindings
            switch targeting.audience {
            case .tokens, .users, .activity:
                // No ORDER BY: it would tempt SQLite to walk every device of the app in id order
                // instead of looking each token (or user) up in its index.
                var ids: [Int64] = []
                try db.each("SELECT d.id " + head, bindings) { row in ids.append(row.int(0) ?? 0) }
                ids.sort()
                var text: [UInt8] = [UInt8(ascii: "[")]
                for (index, deviceID) in ids.enumerated() {
                    if index > 0 { text.append(UInt8(ascii: ",")) }
                    text += String(deviceID).utf8
                }
                text.append(UInt8(ascii: "]"))
                return (until, Int64(ids.count), String(decoding: text, as: UTF8.self))
            case .all, .tags:
                return (until, try db.query("SELECT count(*) " + head, bindings).first?[0].int ?? 0, nil)
            }
        }
        // A resolved list is kept as its device ids; the targeting then records only its length.
        let targetingText = targeting.jsonString(listsAsCounts: deviceIDs != nil)
        return try await self.database.write { db in
            if let key = spec.idempotencyKey,
                let existing = try db.query("SELECT id, audience_size FROM notifications WHERE app_id = ? AND idempotency_key = ?", [.text(appID), .text(key)]).first,
                let existingID = existing[0].string
            {
                return (existingID, Int(existing[1].int ?? 0), true)
            }
            try db.query(
                """
                INSERT INTO notifications (id, app_id, bundle_id, priority, expiration, collapse_id, payload, created_at, scheduled_at,
                    idempotency_key, targeting, device_ids, audience_size, expand_after, expand_until, push_type, local_time, placeholder)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(id), .text(appID), .text(bundleID), spec.priority.map { .integer(Int64($0.rawValue)) } ?? .null,
                    spec.expiration.map(SQLValue.integer) ?? .null, spec.collapseID.map(SQLValue.text) ?? .null,
                    // An encrypted notification with nobody to send to keeps no plaintext at all.
                    .blob(spec.placeholder != nil && size == 0 ? [] : spec.payload), .integer(now), .integer(spec.scheduledAt ?? now),
                    spec.idempotencyKey.map(SQLValue.text) ?? .null,
                    .text(targetingText), deviceIDs.map(SQLValue.text) ?? .null, .integer(size), size > 0 ? .integer(0) : .null,
                    .integer(until), targeting.pushType.map { .text($0.rawValue) } ?? .null,
                    targeting.localTime.map { .text($0.description) } ?? .null, spec.placeholder.map(SQLValue.blob) ?? .null,
                ]
            )
            return (id, Int(size), false)
        }
    }

    public func notification(appID: String, id: String, deliveryLimit: Int) async throws -> NotificationStatus? {
        try await self.database.read { db in
            var found: NotificationSummary?
            try db.each("SELECT \(StoreSQL.summaryColumns) FROM notifications WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]) {
                found = NotificationSummary(row: $0)
            }
            guard let summary = found else { return nil }
            var counts: [DeliveryState: Int] = [:]
            var created = 0
            try db.each("SELECT state, count(*) FROM deliveries WHERE notification_id = ? GROUP BY state", [.text(id)]) { row in
                let count = Int(row.int(1) ?? 0)
                created += count
                if let state = row.string(0).flatMap(DeliveryState.init(rawValue:)) { counts[state] = count }
            }
            // Not expanded yet, or in flight in a chunk (a chunk's deliveries get rows when recorded).
            let inFlight = try db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = ?", [.text(id)]).first?[0].int ?? 0
            if summary.expanding || inFlight > 0 { counts[.pending, default: 0] += max(0, summary.audienceSize - created) }
            var deliveries: [DeliveryRecord] = []
            try db.each(
                "SELECT \(StoreSQL.deliveryColumns) FROM deliveries x LEFT JOIN devices d ON d.id = x.device_id WHERE x.notification_id = ? ORDER BY x.id LIMIT ?",
                [.text(id), .integer(Int64(deliveryLimit))]
            ) { deliveries.append(DeliveryRecord(row: $0)) }
            return NotificationStatus(summary: summary, counts: counts, deliveries: deliveries)
        }
    }

    public func notifications(appID: String, limit: Int, before: Int64?) async throws -> [NotificationSummary] {
        try await self.database.read { db in
            var result: [NotificationSummary] = []
            try db.each(
                "SELECT \(StoreSQL.summaryColumns) FROM notifications WHERE app_id = ? AND created_at < ? ORDER BY created_at DESC, id DESC LIMIT ?",
                [.text(appID), .integer(before ?? Int64.max), .integer(Int64(limit))]
            ) { result.append(NotificationSummary(row: $0)) }
            return result
        }
    }

    /// How many of an app's newest notifications a device's delivery history looks through.
    static let historyDepth = 1000

    public func deliveries(appID: String, token: String, limit: Int) async throws -> [DeliveryRecord] {
        try await self.database.read { db in
            var result: [DeliveryRecord] = []
            // Through the app's most recent notifications: one (notification, device) lookup each.
            try db.each(
                """
                SELECT \(StoreSQL.deliveryColumns) FROM devices d
                JOIN (SELECT id FROM notifications WHERE app_id = ?1 ORDER BY created_at DESC LIMIT ?3) n
                JOIN deliveries x ON x.notification_id = n.id AND x.device_id = d.id
                WHERE d.app_id = ?1 AND d.token = ?2 ORDER BY x.id DESC LIMIT ?4
                """,
                [.text(appID), .text(token), .integer(Int64(Self.historyDepth)), .integer(Int64(limit))]
            ) { result.append(DeliveryRecord(row: $0)) }
            return result
        }
    }

    public func cancelNotification(appID: String, id: String, now: Int64) async throws -> Bool {
        try await self.database.write { db in
            guard let found = try db.query("SELECT cancelled_at FROM notifications WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]).first else {
                return false
            }
            let alreadyCancelled = found[0] != .null
            try db.query(
                "UPDATE notifications SET expand_after = NULL, cancelled_at = ?1 WHERE app_id = ?2 AND id = ?3 AND expand_after IS NOT NULL",
                [.integer(now), .text(appID), .text(id)]
            )
            let stoppedExpansion = db.changes > 0
            try db.query(
                """
                UPDATE deliveries SET state = 'failed', reason = 'Cancelled', updated_at = ?
                WHERE state = 'pending' AND notification_id = (SELECT id FROM notifications WHERE app_id = ? AND id = ?)
                """,
                [.integer(now), .text(appID), .text(id)]
            )
            let cancelledPending = db.changes > 0
            // Chunks in flight finish; one whose lease runs out is recorded as cancelled, not sent again.
            let inFlight = try db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = ?", [.text(id)]).first?[0].int ?? 0
            let cancelled = stoppedExpansion || cancelledPending || (inFlight > 0 && !alreadyCancelled)
            if cancelled {
                try db.query("UPDATE notifications SET cancelled_at = ?1 WHERE id = ?2 AND cancelled_at IS NULL", [.integer(now), .text(id)])
                // Nothing is left to send: an encrypted notification's plaintext goes now.
                try db.query("UPDATE notifications SET payload = X'' WHERE id = ? AND placeholder IS NOT NULL", [.text(id)])
            }
            return cancelled
        }
    }

    public func claimDeliveries(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedDelivery] {
        try await self.database.write { db in
            let leaseEnd = now + leaseMilliseconds
            var result: [ClaimedDelivery] = []
            result.reserveCapacity(limit)
            var shared: [String: NotificationShared] = [:]
            // 1. Deliveries that exist and are due. A lease moves the next attempt to the lease's
            // end: if the process dies, the delivery is simply due again then. Half the batch at
            // most here, so a backlog of retries cannot starve new notifications; the rest after.
            for round in 0..<2 {
                let room = round == 0 ? max(1, limit / 2) : limit - result.count
                guard room > 0 else { break }
                if round == 1 {
                    // 2. The next chunks of due notifications' audiences (below), between the rounds.
                    try Self.expand(db, into: &result, limit: limit, now: now, leaseEnd: leaseEnd)
                    guard limit > result.count else { break }
                }
                try db.each(
                    """
                    UPDATE deliveries SET next_attempt_at = ?1, attempts = attempts + 1, updated_at = ?2
                    WHERE id IN (SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= ?2 ORDER BY next_attempt_at, id LIMIT ?3)
                    RETURNING id, notification_id, device_id, token, environment, push_type, topic, attempts
                    """,
                    [.integer(leaseEnd), .integer(now), .integer(Int64(round == 0 ? room : limit - result.count))]
                ) { row in
                    let notificationID = row.string(1) ?? ""
                    if shared[notificationID] == nil {
                        try db.each("SELECT \(NotificationShared.columns) FROM notifications WHERE id = ?", [.text(notificationID)]) {
                            shared[notificationID] = NotificationShared(row: $0, from: 0)
                        }
                    }
                    guard let common = shared[notificationID] else { return }
                    result.append(ClaimedDelivery(row: row, shared: common, notificationID: notificationID))
                }
            }
            // Encrypted notifications: each device's public key, read as it is now.
            let sealed = result.indices.filter { result[$0].placeholder != nil }
            if !sealed.isEmpty {
                var keys: [Int64: DevicePublicKey] = [:]
                let ids = JSONValue.array(sealed.map { .int(result[$0].deviceID) }).jsonString
                try db.each(
                    "SELECT id, public_key_type, public_key FROM devices WHERE id IN (SELECT value FROM json_each(?)) AND public_key IS NOT NULL",
                    [.text(ids)]
                ) { row in
                    if let id = row.int(0), let type = row.string(1), let key = row.bytes(2) { keys[id] = DevicePublicKey(type: type, key: key) }
                }
                for index in sealed { result[index].publicKey = keys[result[index].deviceID] }
            }
            return result
        }
    }

    /// A notification's audience as SQL over `devices d`: the conditions after `<app> = ?2`, with
    /// bindings from `?first`; nil for a targeting Herald did not write.
    private static func chunkFilter(targeting: String?, deviceIDs: String?, first: Int) -> (sql: String, bindings: [SQLValue], id: String, app: String)? {
        // A resolved list is walked through its ids (devices unregistered or made inactive
        // since are skipped); "all" and tags by id range with their filter. For the ids, `+`
        // keeps SQLite on rowid lookups of the list (in id order, so the ORDER BY costs
        // nothing) instead of a walk over the app's id range.
        if let deviceIDs {
            return (" AND d.id IN (SELECT value FROM json_each(?\(first)))", [.text(deviceIDs)], "+d.id", "+d.app_id")
        }
        guard let targeting = targeting.flatMap(Targeting.init(jsonString:)) else { return nil }
        let filter = Self.audienceFilter(targeting, first: first)
        return (filter.sql, filter.bindings, filter.id, "d.app_id")
    }

    /// Up to `limit` active devices of an audience with ids in `after…through`, in id order; with
    /// `without`, only those that have no delivery of that notification yet.
    private static func chunkDevices(
        _ db: borrowing SQLiteDatabase.Connection, bundleID: String, appID: String, pushType: PushType?, targeting: String?, deviceIDs: String?,
        after: Int64, through: Int64, limit: Int, without notificationID: String?
    ) throws -> [ChunkDevice]? {
        guard let filter = Self.chunkFilter(targeting: targeting, deviceIDs: deviceIDs, first: 7) else { return nil }
        let (pushTypeSQL, topicSQL) = StoreSQL.pushTypeAndTopic(fixed: pushType, bundle: "?1")
        let sql = """
            SELECT d.id, d.token, d.environment, \(pushTypeSQL), \(topicSQL) FROM devices d
            WHERE \(filter.app) = ?2 AND d.active = 1 AND \(filter.id) > ?3 AND \(filter.id) <= ?4\(filter.sql)
                AND (?6 IS NULL OR NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = ?6 AND x.device_id = d.id))
            ORDER BY d.id LIMIT ?5
            """
        var devices: [ChunkDevice] = []
        devices.reserveCapacity(min(limit, 1000))
        try db.each(
            sql,
            [.text(bundleID), .text(appID), .integer(after), .integer(through), .integer(Int64(limit)), notificationID.map(SQLValue.text) ?? .null]
                + filter.bindings
        ) { row in devices.append(ChunkDevice(row: row)) }
        return devices
    }

    /// Hands out `count` delivery ids (a chunk's are known before their rows exist); the first.
    private static func reserveDeliveryIDs(_ db: borrowing SQLiteDatabase.Connection, _ count: Int) throws -> Int64 {
        let last = try db.query("UPDATE sequences SET value = value + ? WHERE name = 'deliveries' RETURNING value", [.integer(Int64(count))]).first?[0].int ?? 0
        return last - Int64(count) + 1
    }

    /// Claims `devices` as chunk `chunk` (its attempt `attempts`), with ids from the counter.
    private static func claimChunk(
        _ db: borrowing SQLiteDatabase.Connection, _ devices: [ChunkDevice], chunk: Int64, attempts: Int, notificationID: String, shared: NotificationShared,
        into result: inout [ClaimedDelivery]
    ) throws {
        let first = try Self.reserveDeliveryIDs(db, devices.count)
        for (offset, device) in devices.enumerated() {
            result.append(
                ClaimedDelivery(id: first + Int64(offset), device: device, notificationID: notificationID, shared: shared, attempts: attempts, chunk: chunk)
            )
        }
    }

    /// Creates rows (``NewRows``); with `fenced`, only rows whose chunk is still leased at that
    /// attempt. A row whose (notification, device) exists already is skipped. Returns the ids
    /// created.
    private static func insertDeliveries(_ db: borrowing SQLiteDatabase.Connection, _ rows: [[SQLValue]], fenced: Bool) throws -> Set<Int64> {
        var admitted = rows
        if fenced {
            // Each chunk's attempt, read once per chunk rather than once per row.
            let chunks = Set(rows.compactMap { $0[15].int })
            var leased: Set<[Int64]> = []
            try db.each(
                "SELECT id, attempts FROM delivery_chunks WHERE id IN (SELECT value FROM json_each(?))",
                [.text(JSONValue.array(chunks.map { .int($0) }).jsonString)]
            ) { row in leased.insert([row.int(0) ?? 0, row.int(1) ?? 0]) }
            admitted = rows.filter { row in leased.contains([row[15].int ?? 0, row[8].int ?? 0]) }
        }
        // Many rows per statement (its overhead, and RETURNING's temporary table, shared by
        // them), each row's values bound, none parsed from text.
        var created: Set<Int64> = []
        var start = 0
        while start < admitted.count {
            let part = admitted[start..<min(start + Self.rowsPerInsert, admitted.count)]
            start += part.count
            var bindings: [SQLValue] = []
            bindings.reserveCapacity(part.count * 15)
            for row in part { bindings += row.prefix(15) }
            try db.each(part.count == Self.rowsPerInsert ? Self.fullInsert : Self.insertSQL(rows: part.count), bindings) { row in
                if let id = row.int(0) { created.insert(id) }
            }
        }
        return created
    }

    /// Rows per INSERT: 64 × 15 values, well under SQLite's 32,766.
    static let rowsPerInsert = 64
    private static let fullInsert = insertSQL(rows: rowsPerInsert)

    /// An INSERT of `rows` rows of 15 values each, returning the ids it created.
    private static func insertSQL(rows: Int) -> String {
        let values = (0..<rows).map { row in "(" + (1...15).map { "?\(row * 15 + $0)" }.joined(separator: ", ") + ")" }
        return """
            INSERT OR IGNORE INTO deliveries (id, notification_id, device_id, token, environment, push_type, topic, state, attempts,
                next_attempt_at, apns_id, status, reason, latency_ms, updated_at)
            VALUES \(values.joined(separator: ", "))
            RETURNING id
            """
    }

    /// Deletes a chunk with nothing of it left to send; an encrypted notification may lose its
    /// plaintext now.
    private static func endChunk(_ db: borrowing SQLiteDatabase.Connection, _ chunk: Int64, notificationID: String) throws {
        try db.query("DELETE FROM delivery_chunks WHERE id = ?", [.integer(chunk)])
        try Self.forgetPlaintext(db, notificationIDs: [notificationID])
    }

    /// Claims again the devices of chunks whose lease ran out and that got no delivery yet (the
    /// process that held them died, or is too late), as a new attempt of the same chunk. A
    /// cancelled notification's are recorded as failed ("Cancelled") instead of sent.
    private static func reclaimChunks(
        _ db: borrowing SQLiteDatabase.Connection, into result: inout [ClaimedDelivery], limit: Int, now: Int64, leaseEnd: Int64
    ) throws {
        while result.count < limit {
            var next: (chunk: Int64, notificationID: String, after: Int64, through: Int64, attempts: Int)?
            var notification: (bundleID: String, targeting: String?, deviceIDs: String?, pushType: PushType?, cancelled: Bool, shared: NotificationShared)?
            try db.each(
                """
                SELECT c.id, c.notification_id, c.after_id, c.through_id, c.attempts, n.id, n.bundle_id,
                    CASE WHEN n.device_ids IS NULL THEN n.targeting END, n.device_ids, n.push_type, n.cancelled_at, \(NotificationShared.columns)
                FROM delivery_chunks c LEFT JOIN notifications n ON n.id = c.notification_id
                WHERE c.lease_until <= ? ORDER BY c.lease_until, c.id LIMIT 1
                """,
                [.integer(now)]
            ) { row in
                next = (row.int(0) ?? 0, row.string(1) ?? "", row.int(2) ?? 0, row.int(3) ?? 0, Int(row.int(4) ?? 0))
                if !row.isNull(5) {
                    notification = (
                        row.string(6) ?? "", row.string(7), row.string(8), row.string(9).flatMap(PushType.init(rawValue:)), !row.isNull(10),
                        NotificationShared(row: row, from: 11)
                    )
                }
            }
            guard let chunk = next else { return }
            let room = limit - result.count
            guard let notification,
                let devices = try Self.chunkDevices(
                    db, bundleID: notification.bundleID, appID: notification.shared.appID, pushType: notification.pushType,
                    targeting: notification.targeting, deviceIDs: notification.deviceIDs, after: chunk.after, through: chunk.through,
                    limit: notification.cancelled ? Int(Int32.max) : room, without: chunk.notificationID
                )
            else {
                try Self.endChunk(db, chunk.chunk, notificationID: chunk.notificationID)
                continue
            }
            let attempts = chunk.attempts + 1
            if notification.cancelled || devices.isEmpty {
                if !devices.isEmpty {
                    let first = try Self.reserveDeliveryIDs(db, devices.count)
                    var rows = NewRows(updatedAt: now)
                    for (offset, device) in devices.enumerated() {
                        rows.add(
                            id: first + Int64(offset), device: device, notificationID: chunk.notificationID, state: .failed, attempts: attempts,
                            nextAttemptAt: now, reason: "Cancelled"
                        )
                    }
                    _ = try Self.insertDeliveries(db, rows.rows, fenced: false)
                }
                try Self.endChunk(db, chunk.chunk, notificationID: chunk.notificationID)
                continue
            }
            // More than there is room for: the rest becomes a chunk of its own, due now.
            let through = devices.count < room ? chunk.through : devices[devices.count - 1].id
            if through < chunk.through {
                try db.query(
                    "INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES (?, ?, ?, 0, ?, ?)",
                    [.text(chunk.notificationID), .integer(through), .integer(chunk.through), .integer(Int64(chunk.attempts)), .integer(now)]
                )
            }
            try db.query(
                "UPDATE delivery_chunks SET through_id = ?, size = ?, attempts = ?, lease_until = ? WHERE id = ?",
                [.integer(through), .integer(Int64(devices.count)), .integer(Int64(attempts)), .integer(leaseEnd), .integer(chunk.chunk)]
            )
            try Self.claimChunk(db, devices, chunk: chunk.chunk, attempts: attempts, notificationID: chunk.notificationID, shared: notification.shared, into: &result)
        }
    }

    /// Chunks whose lease ran out first, then the next chunks of due notifications' audiences,
    /// until `limit` are claimed. A chunk is leased as one row; its deliveries are written once,
    /// with their outcome. Each chunk is its own savepoint: a notification that cannot be
    /// expanded is stopped (cancelled) instead of failing every claim after it.
    private static func expand(
        _ db: borrowing SQLiteDatabase.Connection, into result: inout [ClaimedDelivery], limit: Int, now: Int64, leaseEnd: Int64
    ) throws {
        try Self.reclaimChunks(db, into: &result, limit: limit, now: now, leaseEnd: leaseEnd)
        var expanded = 0
        while result.count < limit, expanded < limit {
            var next: (id: String, bundleID: String, targeting: String?, deviceIDs: String?, after: Int64, until: Int64, scheduledAt: Int64, shared: NotificationShared)?
            var pushType: PushType?
            var localTime: LocalTime?
            try db.each(
                """
                SELECT id, bundle_id, CASE WHEN device_ids IS NULL THEN targeting END, device_ids, expand_after, expand_until, scheduled_at, push_type, local_time, \(NotificationShared.columns)
                FROM notifications WHERE expand_after IS NOT NULL AND scheduled_at <= ? ORDER BY scheduled_at, id LIMIT 1
                """,
                [.integer(now)]
            ) { row in
                next = (
                    row.string(0) ?? "", row.string(1) ?? "", row.string(2), row.string(3),
                    row.int(4) ?? 0, row.int(5) ?? 0, row.int(6) ?? 0, NotificationShared(row: row, from: 9)
                )
                pushType = row.string(7).flatMap(PushType.init(rawValue:))
                localTime = row.string(8).flatMap(LocalTime.init)
            }
            guard let notification = next else { break }
            let chunk = limit - result.count
            let claimedBefore = result.count
            try db.execute("SAVEPOINT expand")
            do {
                guard
                    let devices = try Self.chunkDevices(
                        db, bundleID: notification.bundleID, appID: notification.shared.appID, pushType: pushType, targeting: notification.targeting,
                        deviceIDs: notification.deviceIDs, after: notification.after, through: notification.until, limit: chunk, without: nil
                    )
                else {
                    // Not something Herald wrote: stop expanding it rather than loop on it.
                    try db.query("UPDATE notifications SET expand_after = NULL WHERE id = ?", [.text(notification.id)])
                    try db.execute("RELEASE expand")
                    continue
                }
                let last = devices.last?.id ?? notification.after
                expanded += devices.count
                if !devices.isEmpty {
                    if let localTime {
                        // A local-time notification's deliveries are created pending, each due at its
                        // device's own time.
                        let first = try Self.reserveDeliveryIDs(db, devices.count)
                        var rows = NewRows(updatedAt: now)
                        for (offset, device) in devices.enumerated() {
                            rows.add(
                                id: first + Int64(offset), device: device, notificationID: notification.id, state: .pending, attempts: 0,
                                nextAttemptAt: notification.scheduledAt, reason: nil
                            )
                        }
                        _ = try Self.insertDeliveries(db, rows.rows, fenced: false)
                        try Self.scheduleLocalTime(
                            db, localTime, notificationID: notification.id, appID: notification.shared.appID, scheduledAt: notification.scheduledAt,
                            after: notification.after, through: last
                        )
                    } else {
                        let chunkID =
                            try db.query(
                                "INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES (?, ?, ?, ?, 1, ?) RETURNING id",
                                [.text(notification.id), .integer(notification.after), .integer(last), .integer(Int64(devices.count)), .integer(leaseEnd)]
                            ).first?[0].int ?? 0
                        try Self.claimChunk(db, devices, chunk: chunkID, attempts: 1, notificationID: notification.id, shared: notification.shared, into: &result)
                    }
                }
                // Fewer than asked for: the audience is exhausted.
                try db.query(
                    "UPDATE notifications SET expand_after = ? WHERE id = ?",
                    [devices.count < chunk ? .null : .integer(last), .text(notification.id)]
                )
                if devices.count < chunk, notification.shared.placeholder != nil {
                    // Expanded and nothing left in flight: an encrypted notification's plaintext goes.
                    try Self.forgetPlaintext(db, notificationIDs: [notification.id])
                }
                try db.execute("RELEASE expand")
            } catch {
                // This notification cannot be expanded (a failing statement): undo its chunk,
                // stop it as cancelled, and go on with the others.
                try db.execute("ROLLBACK TO expand")
                try db.execute("RELEASE expand")
                result.removeSubrange(claimedBefore...)
                try db.query(
                    "UPDATE notifications SET expand_after = NULL, cancelled_at = ? WHERE id = ?", [.integer(now), .text(notification.id)]
                )
            }
        }
    }

    /// Moves each delivery of the chunk (device ids in `after…through`) to its device's local time.
    private static func scheduleLocalTime(
        _ db: borrowing SQLiteDatabase.Connection, _ localTime: LocalTime, notificationID: String, appID: String, scheduledAt: Int64, after: Int64,
        through: Int64
    ) throws {
        var zones: [String?] = []
        try db.each(
            "SELECT DISTINCT time_zone FROM devices WHERE app_id = ?1 AND id > ?2 AND id <= ?3",
            [.text(appID), .integer(after), .integer(through)]
        ) { zones.append($0.string(0)) }
        for zone in zones {
            let due = max(scheduledAt, localTime.instant(timeZone: zone))
            try db.query(
                """
                UPDATE deliveries SET next_attempt_at = ?1, updated_at = ?1 WHERE notification_id = ?2 AND device_id > ?3 AND device_id <= ?4
                    AND device_id IN (SELECT id FROM devices WHERE app_id = ?6 AND id > ?3 AND id <= ?4 AND time_zone IS ?5)
                """,
                [.integer(due), .text(notificationID), .integer(after), .integer(through), zone.map(SQLValue.text) ?? .null, .text(appID)]
            )
        }
    }

    @discardableResult
    public func record(_ results: [DeliveryResult], now: Int64) async throws -> RecordedOutcomes {
        guard !results.isEmpty else { return RecordedOutcomes() }
        // A chunk's deliveries (the bulk of a broadcast) are created with their outcome, their
        // values bound, fenced by their chunk's attempt. Of the others, those accepted in one
        // statement over a JSON array of [id, apns-id, latency, attempt], written straight as
        // text outside the writer; the rest one by one.
        var created = NewRows(updatedAt: now)
        let chunks = created.addCreated(results, now: now)
        let retriedChunkDeliveries = results.retriedChunkDeliveries
        var sentText: [UInt8] = [UInt8(ascii: "[")]
        var anySent = false
        for result in results {
            guard result.created == nil else { continue }
            guard case .sent(let apnsID) = result.outcome else { continue }
            if anySent { sentText.append(UInt8(ascii: ",")) }
            anySent = true
            sentText.append(UInt8(ascii: "["))
            sentText += String(result.deliveryID).utf8
            sentText.append(UInt8(ascii: ","))
            // An apns-id is a UUID the client checked; quoted through the serializer anyway.
            (apnsID.map(JSONValue.string) ?? .null).serialize(into: &sentText)
            sentText.append(UInt8(ascii: ","))
            sentText += String(result.latencyMilliseconds).utf8
            sentText.append(UInt8(ascii: ","))
            sentText += (result.attempt.map { String($0) } ?? "null").utf8
            sentText.append(UInt8(ascii: "]"))
        }
        sentText.append(UInt8(ascii: "]"))
        let sentList = anySent ? String(decoding: sentText, as: UTF8.self) : nil
        let createdRows = created.rows
                return try await self.database.write { db in
            var outcomes = RecordedOutcomes()
            if !createdRows.isEmpty {
                outcomes.applied = try Self.insertDeliveries(db, createdRows, fenced: true)
                if !retriedChunkDeliveries.isEmpty {
                    // A notification cancelled while its chunk was in flight is not retried.
                    try db.query(
                        """
                        UPDATE deliveries SET state = 'failed', reason = 'Cancelled' WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
                            AND notification_id IN (SELECT id FROM notifications WHERE cancelled_at IS NOT NULL)
                        """,
                        [.text(JSONValue.array(retriedChunkDeliveries.map { .int($0) }).jsonString)]
                    )
                }
                // A chunk whose every delivery is recorded (created now, or by an earlier attempt)
                // is done; a chunk claimed again since is left to its newer claim.
                for (chunk, recorded) in chunks {
                    try db.query(
                        "DELETE FROM delivery_chunks WHERE id = ? AND attempts = ? AND size <= ?",
                        [.integer(chunk), .integer(Int64(recorded.attempt)), .integer(Int64(recorded.count))]
                    )
                }
            }
            if let sentList {
                try db.each(
                    """
                    UPDATE deliveries SET state = 'sent', apns_id = v.apns_id, status = 200, reason = NULL, latency_ms = v.latency,
                        updated_at = ?1
                    FROM (SELECT value ->> 0 AS id, value ->> 1 AS apns_id, value ->> 2 AS latency, value ->> 3 AS attempt FROM json_each(?2)) AS v
                    WHERE deliveries.id = v.id AND (v.attempt IS NULL OR deliveries.attempts = v.attempt)
                    RETURNING deliveries.id
                    """,
                    [.integer(now), .text(sentList)]
                ) { row in
                    if let id = row.int(0) { outcomes.applied.insert(id) }
                }
            }
            for result in results {
                let id = SQLValue.integer(result.deliveryID)
                let latency = SQLValue.integer(result.latencyMilliseconds)
                let attempt = result.attempt.map { SQLValue.integer(Int64($0)) } ?? .null
                switch result.outcome {
                case .sent:
                    continue
                case .retry(let status, let reason, let retryAt):
                    guard result.created == nil else { continue }
                    try db.query(
                        """
                        UPDATE deliveries SET status = ?1, reason = ?2, latency_ms = ?3, next_attempt_at = ?4, updated_at = ?5
                        WHERE id = ?6 AND (?7 IS NULL OR attempts = ?7)
                        """,
                        [status.map { .integer(Int64($0)) } ?? .null, .text(reason), latency, .integer(retryAt), .integer(now), id, attempt]
                    )
                    if db.changes > 0 { outcomes.applied.insert(result.deliveryID) }
                case .failed(let status, let reason, let invalidate, let timestamp):
                    if result.created == nil {
                        try db.query(
                            "UPDATE deliveries SET state = 'failed', status = ?1, reason = ?2, latency_ms = ?3, updated_at = ?4 WHERE id = ?5 AND (?6 IS NULL OR attempts = ?6)",
                            [status.map { .integer(Int64($0)) } ?? .null, .text(reason), latency, .integer(now), id, attempt]
                        )
                        if db.changes > 0 { outcomes.applied.insert(result.deliveryID) }
                    }
                    // Fenced out: a newer claim answers for this delivery, and its device.
                    guard invalidate, outcomes.applied.contains(result.deliveryID) else { continue }
                    // Only if the token was not registered again after APNs learned it was dead.
                    try db.query(
                        """
                        UPDATE devices SET active = 0, invalidated_at = ?1, invalidation_reason = ?2
                        WHERE id = (SELECT device_id FROM deliveries WHERE id = ?3) AND active = 1
                            AND (?4 IS NULL OR last_registered_at < ?4)
                        """,
                        [.integer(now), .text(reason), id, timestamp.map(SQLValue.integer) ?? .null]
                    )
                    let applied = db.changes > 0
                    if applied { outcomes.invalidated.insert(result.deliveryID) }
                    try db.query(
                        """
                        INSERT INTO invalidations (app_id, device_id, reason, apns_timestamp, at, applied)
                        SELECT n.app_id, x.device_id, ?, ?, ?, ? FROM deliveries x JOIN notifications n ON n.id = x.notification_id WHERE x.id = ?
                        """,
                        [.text(reason), timestamp.map(SQLValue.integer) ?? .null, .integer(now), .integer(applied ? 1 : 0), id]
                    )
                }
            }
            return outcomes
        }
    }

    public func forgetPlaintext(notificationIDs: [String]) async throws {
        guard !notificationIDs.isEmpty else { return }
        try await self.database.write { db in try Self.forgetPlaintext(db, notificationIDs: notificationIDs) }
    }

    /// Empties the plaintext of those encrypted notifications with nothing left to send: fully
    /// expanded, no delivery pending, no chunk in flight.
    private static func forgetPlaintext(_ db: borrowing SQLiteDatabase.Connection, notificationIDs: [String]) throws {
        try db.query(
            """
            UPDATE notifications SET payload = X'' WHERE id IN (SELECT value FROM json_each(?1)) AND placeholder IS NOT NULL
                AND expand_after IS NULL AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id AND x.state = 'pending')
                AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
            """,
            [.text(JSONValue.array(notificationIDs.map(JSONValue.string)).jsonString)]
        )
    }

    public func prune(before: Int64, limit: Int) async throws -> Int {
        try await self.database.write { db in
            try db.query(
                """
                DELETE FROM deliveries WHERE id IN (
                    SELECT id FROM deliveries WHERE state != 'pending' AND updated_at < ?1
                        AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = deliveries.notification_id)
                    ORDER BY id LIMIT ?2)
                """,
                [.integer(before), .integer(Int64(limit))]
            )
            let deleted = db.changes
            try db.query(
                """
                DELETE FROM notifications WHERE created_at < ?1 AND expand_after IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id)
                    AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
                """,
                [.integer(before)]
            )
            return deleted
        }
    }

    public func pendingDeliveries() async throws -> Int {
        try await self.database.read { db in
            // `next_attempt_at >= 0` makes the partial due index (pending only) answer it.
            // Chunks in flight count their deliveries too.
            Int(
                try db.query(
                    """
                    SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending' AND next_attempt_at >= 0)
                        + (SELECT coalesce(sum(size), 0) FROM delivery_chunks)
                    """
                ).first?[0].int ?? 0
            )
        }
    }

    public func deliveryCounts() async throws -> [DeliveryState: Int] {
        try await self.database.read { db in
            var counts: [DeliveryState: Int] = [:]
            for row in try db.query("SELECT state, count(*) FROM deliveries GROUP BY state") {
                if let state = row[0].string.flatMap(DeliveryState.init(rawValue:)) { counts[state] = Int(row[1].int ?? 0) }
            }
            return counts
        }
    }
}

/// Delivery rows, each the bindings of ``SQLiteStore/insertDeliveries``: id, notification_id,
/// device_id, token, environment, push_type, topic, state, attempts, next_attempt_at, apns_id,
/// status, reason, latency_ms, updated_at (the 15 columns of the INSERT), then the chunk.
struct NewRows: NewDeliveryRows {
    private(set) var rows: [[SQLValue]] = []
    /// When they are written.
    let updatedAt: Int64

    init(updatedAt: Int64) { self.updatedAt = updatedAt }

    mutating func add(
        id: Int64, notificationID: String, deviceID: Int64, token: String, environment: String, pushType: String, topic: String,
        state: DeliveryState, attempts: Int, nextAttemptAt: Int64, apnsID: String?, status: Int?, reason: String?, latency: Int64?, chunk: Int64?
    ) {
        self.rows.append([
            .integer(id), .text(notificationID), .integer(deviceID), .text(token), .text(environment), .text(pushType), .text(topic),
            .text(state.rawValue), .integer(Int64(attempts)), .integer(nextAttemptAt), apnsID.map(SQLValue.text) ?? .null,
            status.map { .integer(Int64($0)) } ?? .null, reason.map(SQLValue.text) ?? .null, latency.map(SQLValue.integer) ?? .null,
            .integer(self.updatedAt), chunk.map(SQLValue.integer) ?? .null,
        ])
    }
}

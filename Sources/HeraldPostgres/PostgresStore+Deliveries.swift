// SPDX-License-Identifier: Apache-2.0
import APNSModels
public import HeraldCore
import NIOCore
import PostgresNIO

extension PostgresStore {
    /// Appends the conditions (after `d.app_id = … AND d.active`) that pick a targeting's devices
    /// from `devices d`.
    static func audienceFilter(_ targeting: Targeting, into query: inout Query) {
        switch targeting.audience {
        case .all:
            break
        case .tokens(let tokens):
            query.sql += " AND d.token = ANY(\(query.bind(.texts(tokens))))"
        case .users(let users):
            query.sql += " AND d.user_id = ANY(\(query.bind(.texts(users))))"
        case .activity(let activityID):
            query.sql += " AND d.kind = 'liveactivity' AND d.activity_id = \(query.bind(.text(activityID)))"
        case .tags(let tags, let matchAll):
            let parameter = query.bind(.texts(tags))
            if matchAll {
                query.sql += """
                     AND (SELECT count(*) FROM device_tags t WHERE t.device_id = d.id AND t.tag = ANY(\(parameter)))
                        = \(query.bind(.int(Int64(Set(tags).count))))
                    """
            } else {
                query.sql += " AND EXISTS (SELECT 1 FROM device_tags t WHERE t.device_id = d.id AND t.tag = ANY(\(parameter)))"
            }
        }
        let kinds = targeting.eligibleKinds
        if !kinds.isEmpty {
            query.sql += " AND d.kind = ANY(\(query.bind(.texts(kinds.map(\.rawValue).sorted()))))"
        }
        if let environment = targeting.environment {
            query.sql += " AND d.environment = \(query.bind(.text(environment.rawValue)))"
        }
        if targeting.encrypted {
            query.sql += " AND d.public_key IS NOT NULL"
        }
    }

    public func createNotification(appID: String, id: String, bundleID: String, _ spec: NotificationSpec, now: Int64) async throws
        -> (id: String, deliveries: Int, existing: Bool)
    {
        // The audience is every matching device that exists now (ids up to the newest). A list
        // (tokens, users, one activity) is resolved to device ids once; "all" and tags are
        // counted, and walked by id range when expanded.
        let targeting = spec.targeting
        let (until, size, deviceIDs) = try await self.read { db -> (Int64, Int64, [Int64]?) in
            let until = try await db.query("SELECT coalesce(max(id), 0) FROM devices").first?.int(0) ?? 0
            var query = Query()
            let head = " FROM devices d WHERE d.app_id = \(query.bind(.text(appID))) AND d.active AND d.id <= \(query.bind(.int(until)))"
            switch targeting.audience {
            case .tokens, .users, .activity:
                query.sql = "SELECT d.id" + head
                Self.audienceFilter(targeting, into: &query)
                query.sql += " ORDER BY d.id"
                let ids = try await db.query(query).compactMap { $0.int(0) }
                return (until, Int64(ids.count), ids)
            case .all, .tags:
                query.sql = "SELECT count(*)" + head
                Self.audienceFilter(targeting, into: &query)
                return (until, try await db.query(query).first?.int(0) ?? 0, nil)
            }
        }
        let targetingText = targeting.jsonString(listsAsCounts: deviceIDs != nil)
        // The unique (app, idempotency key) decides between processes racing with one key. The
        // first notification could be deleted (retention) between the insert and the lookup: then
        // the insert is tried again.
        for _ in 0..<3 {
            let outcome = try await self.write { db -> (id: String, deliveries: Int, existing: Bool)? in
                let inserted = try await db.query(
                    """
                    INSERT INTO notifications (id, app_id, bundle_id, priority, expiration, collapse_id, payload, created_at, scheduled_at,
                        idempotency_key, targeting, device_ids, audience_size, expand_after, expand_until, push_type, local_time, placeholder)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
                    ON CONFLICT (app_id, idempotency_key) DO NOTHING
                    RETURNING id
                    """,
                    [
                        .text(id), .text(appID), .text(bundleID), .int(spec.priority.map { Int64($0.rawValue) }), .int(spec.expiration),
                        .text(spec.collapseID),
                        // An encrypted notification with nobody to send to keeps no plaintext at all.
                        .bytes(spec.placeholder != nil && size == 0 ? [] : spec.payload), .int(now), .int(spec.scheduledAt ?? now),
                        .text(spec.idempotencyKey), .text(targetingText), deviceIDs.map(Value.ints) ?? .int(nil), .int(size),
                        .int(size > 0 ? 0 : nil), .int(until), .text(targeting.pushType?.rawValue), .text(targeting.localTime?.description),
                        .bytes(spec.placeholder),
                    ]
                )
                guard inserted.isEmpty else { return (id, Int(size), false) }
                guard let key = spec.idempotencyKey,
                    let existing = try await db.query(
                        "SELECT id, audience_size FROM notifications WHERE app_id = $1 AND idempotency_key = $2", [.text(appID), .text(key)]
                    ).first, let existingID = existing.string(0)
                else { return nil }
                return (existingID, Int(existing.int(1) ?? 0), true)
            }
            if let outcome { return outcome }
        }
        throw HeraldError(code: "database_unavailable", "the notification could not be stored; try again")
    }

    public func notification(appID: String, id: String, deliveryLimit: Int) async throws -> NotificationStatus? {
        try await self.snapshot { db in
            guard let row = try await db.query("SELECT \(StoreSQL.summaryColumns) FROM notifications WHERE app_id = $1 AND id = $2", [.text(appID), .text(id)]).first
            else { return nil }
            let summary = NotificationSummary(row: row)
            var counts: [DeliveryState: Int] = [:]
            var created = 0
            for row in try await db.query("SELECT state, count(*) FROM deliveries WHERE notification_id = $1 GROUP BY state", [.text(id)]) {
                let count = Int(row.int(1) ?? 0)
                created += count
                if let state = row.string(0).flatMap(DeliveryState.init(rawValue:)) { counts[state] = count }
            }
            // Not expanded yet, or in flight in a chunk (a chunk's deliveries get rows when recorded).
            let inFlight = try await db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = $1", [.text(id)]).first?.int(0) ?? 0
            if summary.expanding || inFlight > 0 { counts[.pending, default: 0] += max(0, summary.audienceSize - created) }
            let deliveries = try await db.query(
                "SELECT \(StoreSQL.deliveryColumns) FROM deliveries x LEFT JOIN devices d ON d.id = x.device_id WHERE x.notification_id = $1 ORDER BY x.id LIMIT $2",
                [.text(id), .int(Int64(deliveryLimit))]
            ).map(DeliveryRecord.init(row:))
            return NotificationStatus(summary: summary, counts: counts, deliveries: deliveries)
        }
    }

    public func notifications(appID: String, limit: Int, before: Int64?) async throws -> [NotificationSummary] {
        try await self.read { db in
            try await db.query(
                "SELECT \(StoreSQL.summaryColumns) FROM notifications WHERE app_id = $1 AND created_at < $2 ORDER BY created_at DESC, id DESC LIMIT $3",
                [.text(appID), .int(before ?? Int64.max), .int(Int64(limit))]
            ).map(NotificationSummary.init(row:))
        }
    }

    /// How many of an app's newest notifications a device's delivery history looks through.
    static let historyDepth = 1000

    public func deliveries(appID: String, token: String, limit: Int) async throws -> [DeliveryRecord] {
        try await self.read { db in
            try await db.query(
                """
                SELECT \(StoreSQL.deliveryColumns) FROM devices d
                JOIN (SELECT id FROM notifications WHERE app_id = $1 ORDER BY created_at DESC LIMIT $3) n ON TRUE
                JOIN deliveries x ON x.notification_id = n.id AND x.device_id = d.id
                WHERE d.app_id = $1 AND d.token = $2 ORDER BY x.id DESC LIMIT $4
                """,
                [.text(appID), .text(token), .int(Int64(Self.historyDepth)), .int(Int64(limit))]
            ).map(DeliveryRecord.init(row:))
        }
    }

    public func cancelNotification(appID: String, id: String, now: Int64) async throws -> Bool {
        try await self.write { db in
            // Locks the notification: a process expanding it finishes its chunk first.
            guard let found = try await db.query("SELECT cancelled_at FROM notifications WHERE app_id = $1 AND id = $2 FOR UPDATE", [.text(appID), .text(id)]).first
            else { return false }
            let alreadyCancelled = found.int(0) != nil
            let stoppedExpansion = try await db.query(
                "UPDATE notifications SET expand_after = NULL, cancelled_at = $1 WHERE app_id = $2 AND id = $3 AND expand_after IS NOT NULL RETURNING id",
                [.int(now), .text(appID), .text(id)]
            ).isEmpty == false
            let failedPending = try await db.query(
                """
                UPDATE deliveries SET state = 'failed', reason = 'Cancelled', updated_at = $1
                WHERE state = 'pending' AND notification_id = (SELECT id FROM notifications WHERE app_id = $2 AND id = $3) RETURNING id
                """,
                [.int(now), .text(appID), .text(id)]
            ).isEmpty == false
            // Chunks in flight finish; one whose lease runs out is recorded as cancelled, not sent again.
            let inFlight = try await db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = $1", [.text(id)]).first?.int(0) ?? 0
            let cancelled = stoppedExpansion || failedPending || (inFlight > 0 && !alreadyCancelled)
            if cancelled {
                try await db.query("UPDATE notifications SET cancelled_at = $1 WHERE id = $2 AND cancelled_at IS NULL", [.int(now), .text(id)])
                // Nothing is left to send: an encrypted notification's plaintext goes now.
                try await db.query("UPDATE notifications SET payload = ''::bytea WHERE id = $1 AND placeholder IS NOT NULL", [.text(id)])
            }
            return cancelled
        }
    }

    private static let claimedColumns = "id, notification_id, device_id, token, environment, push_type, topic, attempts"

    public func claimDeliveries(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedDelivery] {
        try await self.write { db in
            let leaseEnd = now + leaseMilliseconds
            var result: [ClaimedDelivery] = []
            result.reserveCapacity(limit)
            // 1. Deliveries that exist and are due, skipping rows another process is claiming. A
            // lease moves the next attempt to the lease's end: if the process dies, the delivery
            // is due again then. Half the batch at most, so retries cannot starve new notifications.
            for round in 0..<2 {
                let room = round == 0 ? max(1, limit / 2) : limit - result.count
                guard room > 0 else { break }
                if round == 1 {
                    // 2. The next chunks of due notifications' audiences, between the rounds.
                    try await Self.expand(db, into: &result, limit: limit, now: now, leaseEnd: leaseEnd)
                    guard limit > result.count else { break }
                }
                // Planned at every call, for its values: a generic plan made while the table was
                // small scans it all once it is not (it did, 72 ms a call at 100,000 rows).
                let rows = try await db.query(
                    """
                    UPDATE deliveries x SET next_attempt_at = $1, attempts = x.attempts + 1, updated_at = $2
                    FROM (SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= $2
                        ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) due
                    WHERE x.id = due.id
                    RETURNING x.id, x.notification_id, x.device_id, x.token, x.environment, x.push_type, x.topic, x.attempts
                    """,
                    [.int(leaseEnd), .int(now), .int(Int64(round == 0 ? room : limit - result.count))]
                )
                guard !rows.isEmpty else { continue }
                let notificationIDs = Array(Set(rows.compactMap { $0.string(1) }))
                var shared: [String: NotificationShared] = [:]
                for row in try await db.query(Statements.SharedColumns.self, [.texts(notificationIDs)]) {
                    shared[row.string(0) ?? ""] = NotificationShared(row: row, from: 1)
                }
                for row in rows {
                    let notificationID = row.string(1) ?? ""
                    guard let common = shared[notificationID] else { continue }
                    result.append(ClaimedDelivery(row: row, shared: common, notificationID: notificationID))
                }
            }
            // Encrypted notifications: each device's public key, read as it is now.
            let sealed = result.indices.filter { result[$0].placeholder != nil }
            if !sealed.isEmpty {
                var keys: [Int64: DevicePublicKey] = [:]
                for row in try await db.query(
                    "SELECT id, public_key_type, public_key FROM devices WHERE id = ANY($1) AND public_key IS NOT NULL",
                    [.ints(sealed.map { result[$0].deviceID })]
                ) {
                    if let id = row.int(0), let type = row.string(1), let key = row.bytes(2) { keys[id] = DevicePublicKey(type: type, key: key) }
                }
                for index in sealed { result[index].publicKey = keys[result[index].deviceID] }
            }
            return result
        }
    }

    /// The `FROM … WHERE …` over `devices d` of a notification's audience with ids in
    /// `after…through`; nil for a targeting Herald did not write.
    private static func audienceSource(
        _ query: inout Query, notificationID: String, appID: String, targeting: Targeting?, byList: Bool, after: Int64, through: Int64
    ) -> Bool {
        let app = query.bind(.text(appID))
        let range = "> \(query.bind(.int(after))) AND d.id <= \(query.bind(.int(through)))"
        if byList {
            // A resolved list is walked through its ids (devices removed or made inactive since are skipped).
            query.sql += """
                 FROM notifications n CROSS JOIN LATERAL unnest(n.device_ids) AS u(id) JOIN devices d ON d.id = u.id
                WHERE n.id = \(query.bind(.text(notificationID))) AND d.app_id = \(app) AND d.active AND d.id \(range)
                """
        } else if let targeting {
            query.sql += " FROM devices d WHERE d.app_id = \(app) AND d.active AND d.id \(range)"
            Self.audienceFilter(targeting, into: &query)
        } else {
            return false
        }
        return true
    }

    /// Up to `limit` active devices of an audience with ids in `after…through`, in id order; with
    /// `excludingRecorded`, only those with no delivery of the notification yet.
    private static func chunkDevices(
        _ db: Connection, notificationID: String, bundleID: String, appID: String, pushType: PushType?, targeting: Targeting?, byList: Bool,
        after: Int64, through: Int64, limit: Int, excludingRecorded: Bool
    ) async throws -> [(deliveryID: Int64, device: ChunkDevice)]? {
        var query = Query()
        let (pushTypeSQL, topicSQL) = StoreSQL.pushTypeAndTopic(fixed: pushType, bundle: query.bind(.text(bundleID)))
        // Each device's delivery id from the table's sequence (a chunk's are handed out before
        // their rows exist), drawn outside the LIMIT so that only the chosen devices draw one.
        query.sql = "SELECT nextval('deliveries_id_seq'), c.* FROM (SELECT d.id, d.token, d.environment, \(pushTypeSQL), \(topicSQL)"
        guard Self.audienceSource(&query, notificationID: notificationID, appID: appID, targeting: targeting, byList: byList, after: after, through: through)
        else { return nil }
        if excludingRecorded {
            query.sql += " AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = \(query.bind(.text(notificationID))) AND x.device_id = d.id)"
        }
        query.sql += " ORDER BY d.id LIMIT \(query.bind(.int(Int64(limit))))) c"
        return try await db.query(query).map { row in
            (row.int(0) ?? 0, ChunkDevice(row: row, from: 1))
        }
    }

    /// Claims `devices` as chunk `chunk` (its attempt `attempts`).
    private static func claimChunk(
        _ devices: [(deliveryID: Int64, device: ChunkDevice)], chunk: Int64, attempts: Int, notificationID: String, shared: NotificationShared,
        into result: inout [ClaimedDelivery]
    ) {
        for (deliveryID, device) in devices {
            result.append(ClaimedDelivery(id: deliveryID, device: device, notificationID: notificationID, shared: shared, attempts: attempts, chunk: chunk))
        }
    }

    /// Deletes a chunk with nothing of it left to send; an encrypted notification may lose its
    /// plaintext now.
    private static func endChunk(_ db: Connection, _ chunk: Int64, notificationID: String) async throws {
        try await db.query("DELETE FROM delivery_chunks WHERE id = $1", [.int(chunk)])
        try await Self.forgetPlaintext(db, notificationIDs: [notificationID])
    }

    /// Claims again the devices of chunks whose lease ran out and that got no delivery yet (the
    /// process that held them died, or is too late), as a new attempt of the same chunk; another
    /// process's chunks being claimed are skipped. A cancelled notification's are recorded as
    /// failed ("Cancelled") instead of sent.
    private static func reclaimChunks(_ db: Connection, into result: inout [ClaimedDelivery], limit: Int, now: Int64, leaseEnd: Int64) async throws {
        while result.count < limit {
            guard
                let row = try await db.query(Statements.ExpiredChunk.self, [.int(now)]).first
            else { return }
            let chunk = row.int(0) ?? 0
            let notificationID = row.string(1) ?? ""
            let after = row.int(2) ?? 0
            let through = row.int(3) ?? 0
            let attempts = Int(row.int(4) ?? 0) + 1
            let cancelled = row.int(10) != nil
            let shared = NotificationShared(row: row, from: 11)
            let room = limit - result.count
            guard row.string(5) != nil,
                let devices = try await Self.chunkDevices(
                    db, notificationID: notificationID, bundleID: row.string(6) ?? "", appID: shared.appID,
                    pushType: row.string(9).flatMap(PushType.init(rawValue:)), targeting: row.string(7).flatMap(Targeting.init(jsonString:)),
                    byList: row.bool(8) ?? false, after: after, through: through, limit: cancelled ? Int(Int32.max) : room, excludingRecorded: true
                )
            else {
                try await Self.endChunk(db, chunk, notificationID: notificationID)
                continue
            }
            if cancelled || devices.isEmpty {
                if !devices.isEmpty {
                    var rows = NewRows()
                    for (deliveryID, device) in devices {
                        rows.add(id: deliveryID, device: device, notificationID: notificationID, state: .failed, attempts: attempts, nextAttemptAt: now, reason: "Cancelled")
                    }
                    _ = try await Self.insertDeliveries(db, rows, fenced: false, now: now)
                }
                try await Self.endChunk(db, chunk, notificationID: notificationID)
                continue
            }
            // More than there is room for: the rest becomes a chunk of its own, due now.
            let end = devices.count < room ? through : devices[devices.count - 1].device.id
            if end < through {
                try await db.query(
                    "INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES ($1, $2, $3, 0, $4, $5)",
                    [.text(notificationID), .int(end), .int(through), .int(Int64(attempts - 1)), .int(now)]
                )
            }
            try await db.query(
                "UPDATE delivery_chunks SET through_id = $1, size = $2, attempts = $3, lease_until = $4 WHERE id = $5",
                [.int(end), .int(Int64(devices.count)), .int(Int64(attempts)), .int(leaseEnd), .int(chunk)]
            )
            Self.claimChunk(devices, chunk: chunk, attempts: attempts, notificationID: notificationID, shared: shared, into: &result)
        }
    }

    /// Creates the rows of `rows`; with `fenced`, only those whose chunk is still leased at that
    /// attempt. The chunks are locked first (a chunk being claimed again waits, or is skipped by
    /// the claim), so no two attempts of a chunk record a device. Returns the ids created.
    private static func insertDeliveries(_ db: Connection, _ rows: NewRows, fenced: Bool, now: Int64) async throws -> Set<Int64> {
        var rows = rows
        if fenced {
            var leased: Set<[Int64]> = []
            for row in try await db.query(Statements.LockChunks.self, [.ints(Array(Set(rows.rows.map(\.chunk))))]) {
                leased.insert([row.int(0) ?? 0, row.int(1) ?? 0])
            }
            rows.rows.removeAll { !leased.contains([$0.chunk, Int64($0.attempts)]) }
        }
        guard !rows.rows.isEmpty else { return [] }
        try await db.copy(into: "deliveries", columns: NewRows.columns, rows.copyText(updatedAt: now))
        return Set(rows.rows.map(\.id))
    }

    /// The first notification due by `now` with audience left to expand, locked; skipping those
    /// another claim holds, or waiting for the first. Planned at every call, like the claim of due
    /// deliveries: the notifications table grows.
    private static func nextToExpand(now: Int64, skipLocked: Bool) -> Query {
        var pick = Query("SELECT id, bundle_id, targeting, device_ids IS NOT NULL, expand_after, expand_until, scheduled_at, push_type, local_time, \(NotificationShared.columns)")
        pick.sql += " FROM notifications WHERE expand_after IS NOT NULL AND scheduled_at <= \(pick.bind(.int(now)))"
        pick.sql += " ORDER BY scheduled_at, id LIMIT 1 FOR UPDATE" + (skipLocked ? " SKIP LOCKED" : "")
        return pick
    }

    /// A claim that found nothing while every due notification is held by another claim expanding
    /// it (one broadcast, several workers or processes) waits up to 250 ms for the first one's
    /// claim to commit, then takes the next chunk; before, it came back empty and slept for the
    /// poll. Nil when nothing is left to expand or the wait runs out.
    private static func waitToExpand(_ db: Connection, now: Int64) async throws -> Row? {
        guard
            try await db.query(
                "SELECT EXISTS (SELECT 1 FROM notifications WHERE expand_after IS NOT NULL AND scheduled_at <= $1)", [.int(now)]
            ).first?.bool(0) == true
        else { return nil }
        try await db.execute("SAVEPOINT wait_to_expand")
        do {
            try await db.execute("SET LOCAL lock_timeout = '250ms'")
            let row = try await db.query(Self.nextToExpand(now: now, skipLocked: false)).first
            try await db.execute("SET LOCAL lock_timeout TO DEFAULT")
            try await db.execute("RELEASE SAVEPOINT wait_to_expand")
            return row
        } catch where error.postgresState == "55P03" {
            // lock_not_available: the other claim is slow; come back with the poll.
            try await db.execute("ROLLBACK TO SAVEPOINT wait_to_expand")
            return nil
        }
    }

    /// Chunks whose lease ran out first, then the next chunks of due notifications' audiences,
    /// until `limit` are claimed. A chunk is leased as one row; its deliveries are written once,
    /// with their outcome. A notification being expanded is locked (`FOR UPDATE SKIP LOCKED`):
    /// another process takes the next notification, or the same one's next chunk once this
    /// commits. Each chunk is its own savepoint: a notification that cannot be expanded is stopped.
    private static func expand(_ db: Connection, into result: inout [ClaimedDelivery], limit: Int, now: Int64, leaseEnd: Int64) async throws {
        try await Self.reclaimChunks(db, into: &result, limit: limit, now: now, leaseEnd: leaseEnd)
        var expanded = 0
        while result.count < limit, expanded < limit {
            var next = try await db.query(Self.nextToExpand(now: now, skipLocked: true)).first
            if next == nil, result.isEmpty {
                next = try await Self.waitToExpand(db, now: now)
            }
            guard let row = next else { break }
            let id = row.string(0) ?? ""
            let bundleID = row.string(1) ?? ""
            let byList = row.bool(3) ?? false
            let after = row.int(4) ?? 0
            let until = row.int(5) ?? 0
            let scheduledAt = row.int(6) ?? 0
            let pushType = row.string(7).flatMap(PushType.init(rawValue:))
            let localTime = row.string(8).flatMap(LocalTime.init)
            let shared = NotificationShared(row: row, from: 9)
            let targeting = row.string(2).flatMap(Targeting.init(jsonString:))
            if !byList, targeting == nil {
                // Not something Herald wrote: stop expanding it rather than loop on it.
                try await db.query("UPDATE notifications SET expand_after = NULL WHERE id = $1", [.text(id)])
                continue
            }
            let chunk = limit - result.count
            var count = 0
            var last = after
            let claimedBefore = result.count
            try await db.execute("SAVEPOINT expand")
            do {
                if let localTime {
                    // A local-time notification's deliveries are created pending, each due at its
                    // device's own time.
                    var insert = Query()
                    let bundle = insert.bind(.text(bundleID))
                    let (pushTypeSQL, topicSQL) = StoreSQL.pushTypeAndTopic(fixed: pushType, bundle: bundle)
                    insert.sql = """
                        INSERT INTO deliveries (notification_id, device_id, token, environment, push_type, topic, state, attempts, next_attempt_at, updated_at)
                        SELECT \(insert.bind(.text(id))), d.id, d.token, d.environment, \(pushTypeSQL), \(topicSQL), 'pending', 0,
                            \(insert.bind(.int(scheduledAt))), \(insert.bind(.int(now)))
                        """
                    _ = Self.audienceSource(&insert, notificationID: id, appID: shared.appID, targeting: targeting, byList: byList, after: after, through: until)
                    insert.sql += " ORDER BY d.id LIMIT \(insert.bind(.int(Int64(chunk)))) RETURNING device_id"
                    for row in try await db.query(insert) {
                        count += 1
                        last = max(last, row.int(0) ?? last)
                    }
                    if count > 0 {
                        try await Self.scheduleLocalTime(db, localTime, notificationID: id, appID: shared.appID, scheduledAt: scheduledAt, after: after, through: last)
                    }
                } else if let devices = try await Self.chunkDevices(
                    db, notificationID: id, bundleID: bundleID, appID: shared.appID, pushType: pushType, targeting: targeting, byList: byList,
                    after: after, through: until, limit: chunk, excludingRecorded: false
                ), !devices.isEmpty {
                    count = devices.count
                    last = devices[devices.count - 1].device.id
                    let chunkID =
                        try await db.query(Statements.NewChunk.self, [.text(id), .int(after), .int(last), .int(Int64(count)), .int(leaseEnd)]).first?.int(0) ?? 0
                    Self.claimChunk(devices, chunk: chunkID, attempts: 1, notificationID: id, shared: shared, into: &result)
                }
                expanded += count
                // Fewer than asked for: the audience is exhausted.
                try await db.query(Statements.ExpandAfter.self, [.int(count < chunk ? nil : last), .text(id)])
                if count < chunk, shared.placeholder != nil {
                    // Expanded and nothing left in flight: an encrypted notification's plaintext goes.
                    try await Self.forgetPlaintext(db, notificationIDs: [id])
                }
                try await db.execute("RELEASE SAVEPOINT expand")
            } catch where !error.isTransient {
                // This notification cannot be expanded (the same statement would fail again): undo
                // its chunk, stop it as cancelled, go on. A passing failure (a lost connection, a
                // timeout, a cancel) instead fails the whole claim, and the next one tries again.
                try await db.execute("ROLLBACK TO SAVEPOINT expand")
                try await db.execute("RELEASE SAVEPOINT expand")
                result.removeSubrange(claimedBefore...)
                try await db.query("UPDATE notifications SET expand_after = NULL, cancelled_at = $1 WHERE id = $2", [.int(now), .text(id)])
            }
        }
    }

    /// Moves each delivery of the chunk (device ids in `after…through`) to its device's local time.
    private static func scheduleLocalTime(
        _ db: Connection, _ localTime: LocalTime, notificationID: String, appID: String, scheduledAt: Int64, after: Int64, through: Int64
    ) async throws {
        // The chunk's devices are locked (FOR SHARE) until the claim commits, so none can move to
        // another time zone between reading the zones and scheduling by them.
        var zones: [String?] = []
        for row in try await db.query(
            "SELECT time_zone FROM devices WHERE app_id = $1 AND id > $2 AND id <= $3 FOR SHARE", [.text(appID), .int(after), .int(through)]
        ) where !zones.contains(row.string(0)) {
            zones.append(row.string(0))
        }
        for zone in zones {
            let due = max(scheduledAt, localTime.instant(timeZone: zone))
            try await db.query(
                """
                UPDATE deliveries SET next_attempt_at = $1, updated_at = $1 WHERE notification_id = $2 AND device_id > $3 AND device_id <= $4
                    AND device_id IN (SELECT id FROM devices WHERE app_id = $6 AND id > $3 AND id <= $4 AND time_zone IS NOT DISTINCT FROM $5)
                """,
                [.int(due), .text(notificationID), .int(after), .int(through), .text(zone), .text(appID)]
            )
        }
    }

    @discardableResult
    public func record(_ results: [DeliveryResult], now: Int64) async throws -> RecordedOutcomes {
        guard !results.isEmpty else { return RecordedOutcomes() }
        // Accepted ones, the bulk of every batch, in one statement over arrays; the rest one by one.
        // A chunk's deliveries (the bulk of a broadcast) are created with their outcome, in one
        // statement over arrays, fenced by their chunk's attempt.
        var created = NewRows()
        let chunks = created.addCreated(results, now: now)
        let retriedChunkDeliveries = results.retriedChunkDeliveries
        var sentIDs: [Int64] = []
        var apnsIDs: [String] = []
        var latencies: [Int64] = []
        var attempts: [Int64] = []
        for result in results {
            guard result.created == nil else { continue }
            guard case .sent(let apnsID) = result.outcome else { continue }
            sentIDs.append(result.deliveryID)
            apnsIDs.append(apnsID ?? "")
            latencies.append(result.latencyMilliseconds)
            attempts.append(result.attempt.map(Int64.init) ?? -1)
        }
        return try await self.write { db in
            var outcomes = RecordedOutcomes()
            if !created.rows.isEmpty {
                outcomes.applied = try await Self.insertDeliveries(db, created, fenced: true, now: now)
                if !retriedChunkDeliveries.isEmpty {
                    // A notification cancelled while its chunk was in flight is not retried.
                    try await db.query(
                        """
                        UPDATE deliveries SET state = 'failed', reason = 'Cancelled' WHERE id = ANY($1) AND state = 'pending'
                            AND notification_id IN (SELECT id FROM notifications WHERE cancelled_at IS NOT NULL)
                        """,
                        [.ints(retriedChunkDeliveries)]
                    )
                }
                // A chunk whose every delivery is recorded (created now, or by an earlier attempt)
                // is done; a chunk claimed again since is left to its newer claim.
                for (chunk, recorded) in chunks {
                    try await db.query(Statements.EndRecordedChunk.self, [.int(chunk), .int(Int64(recorded.attempt)), .int(Int64(recorded.count))])
                }
            }
            if !sentIDs.isEmpty {
                for row in try await db.query(
                    """
                    UPDATE deliveries x SET state = 'sent', apns_id = nullif(v.apns_id, ''), status = 200, reason = NULL,
                        latency_ms = v.latency, updated_at = $1
                    FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) AS v(id, apns_id, latency, attempt)
                    WHERE x.id = v.id AND (v.attempt < 0 OR x.attempts = v.attempt)
                    RETURNING x.id
                    """,
                    [.int(now), .ints(sentIDs), .texts(apnsIDs), .ints(latencies), .ints(attempts)]
                ) {
                    if let id = row.int(0) { outcomes.applied.insert(id) }
                }
            }
            for result in results {
                let id = Value.int(result.deliveryID)
                let latency = Value.int(result.latencyMilliseconds)
                let attempt = Value.int(result.attempt.map(Int64.init))
                switch result.outcome {
                case .sent:
                    continue
                case .retry(let status, let reason, let retryAt):
                    guard result.created == nil else { continue }
                    let written = try await db.query(
                        """
                        UPDATE deliveries SET status = $1, reason = $2, latency_ms = $3, next_attempt_at = $4, updated_at = $5
                        WHERE id = $6 AND ($7::bigint IS NULL OR attempts = $7::bigint) RETURNING id
                        """,
                        [.int(status.map(Int64.init)), .text(reason), latency, .int(retryAt), .int(now), id, attempt]
                    )
                    if !written.isEmpty { outcomes.applied.insert(result.deliveryID) }
                case .failed(let status, let reason, let invalidate, let timestamp):
                    if result.created == nil {
                        let written = try await db.query(
                            """
                            UPDATE deliveries SET state = 'failed', status = $1, reason = $2, latency_ms = $3, updated_at = $4
                            WHERE id = $5 AND ($6::bigint IS NULL OR attempts = $6::bigint) RETURNING id
                            """,
                            [.int(status.map(Int64.init)), .text(reason), latency, .int(now), id, attempt]
                        )
                        if !written.isEmpty { outcomes.applied.insert(result.deliveryID) }
                    }
                    // Fenced out: a newer claim answers for this delivery, and its device.
                    guard outcomes.applied.contains(result.deliveryID) else { continue }
                    if invalidate {
                        // Only if the token was not registered again after APNs learned it was dead.
                        let applied = try await db.query(
                            """
                            UPDATE devices SET active = FALSE, invalidated_at = $1, invalidation_reason = $2
                            WHERE id = (SELECT device_id FROM deliveries WHERE id = $3) AND active
                                AND ($4::bigint IS NULL OR last_registered_at < $4::bigint)
                            RETURNING id
                            """,
                            [.int(now), .text(reason), id, .int(timestamp)]
                        ).isEmpty == false
                        if applied { outcomes.invalidated.insert(result.deliveryID) }
                        try await db.query(
                            """
                            INSERT INTO invalidations (app_id, device_id, reason, apns_timestamp, at, applied)
                            SELECT n.app_id, x.device_id, $1, $2, $3, $4 FROM deliveries x JOIN notifications n ON n.id = x.notification_id WHERE x.id = $5
                            """,
                            [.text(reason), .int(timestamp), .int(now), .bool(applied), id]
                        )
                    }
                }
            }
            return outcomes
        }
    }

    public func forgetPlaintext(notificationIDs: [String]) async throws {
        guard !notificationIDs.isEmpty else { return }
        try await self.write { db in try await Self.forgetPlaintext(db, notificationIDs: notificationIDs) }
    }

    /// Empties the plaintext of those encrypted notifications with nothing left to send: fully
    /// expanded, no delivery pending, no chunk in flight.
    private static func forgetPlaintext(_ db: Connection, notificationIDs: [String]) async throws {
        try await db.query(
            """
            UPDATE notifications SET payload = ''::bytea WHERE id = ANY($1) AND placeholder IS NOT NULL AND expand_after IS NULL
                AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id AND x.state = 'pending')
                AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
            """,
            [.texts(notificationIDs)]
        )
    }

    public func prune(before: Int64, limit: Int) async throws -> Int {
        try await self.write { db in
            let deleted = try await db.query(
                """
                DELETE FROM deliveries WHERE id IN (
                    SELECT id FROM deliveries WHERE state != 'pending' AND updated_at < $1
                        AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = deliveries.notification_id)
                    ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
                RETURNING id
                """,
                [.int(before), .int(Int64(limit))]
            ).count
            try await db.query(
                """
                DELETE FROM notifications WHERE created_at < $1 AND expand_after IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id)
                    AND NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.notification_id = notifications.id)
                """,
                [.int(before)]
            )
            return deleted
        }
    }

    public func pendingDeliveries() async throws -> Int {
        // Chunks in flight count their deliveries too.
        try await self.read { db in
            Int(
                try await db.query(
                    "SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending') + (SELECT coalesce(sum(size), 0) FROM delivery_chunks)"
                ).first?.int(0) ?? 0
            )
        }
    }

    public func deliveryCounts() async throws -> [DeliveryState: Int] {
        try await self.read { db in
            var counts: [DeliveryState: Int] = [:]
            for row in try await db.query("SELECT state, count(*) FROM deliveries GROUP BY state") {
                if let state = row.string(0).flatMap(DeliveryState.init(rawValue:)) { counts[state] = Int(row.int(1) ?? 0) }
            }
            return counts
        }
    }
}

/// Delivery rows to create, written to PostgreSQL as one `COPY … FROM STDIN` in its text
/// format: about half the server's work of an `INSERT` over arrays.
struct NewRows: NewDeliveryRows {
    struct Row {
        var id: Int64
        var notificationID: String
        var deviceID: Int64
        var token: String
        var environment: String
        var pushType: String
        var topic: String
        var state: DeliveryState
        var attempts: Int
        var nextAttemptAt: Int64
        var apnsID: String?
        var status: Int?
        var reason: String?
        var latency: Int64?
        var chunk: Int64
    }

    var rows: [Row] = []

    /// The columns `copyText` writes, in its order.
    static let columns = [
        "id", "notification_id", "device_id", "token", "environment", "push_type", "topic", "state", "attempts", "next_attempt_at",
        "apns_id", "status", "reason", "latency_ms", "updated_at",
    ]

    mutating func add(
        id: Int64, notificationID: String, deviceID: Int64, token: String, environment: String, pushType: String, topic: String,
        state: DeliveryState, attempts: Int, nextAttemptAt: Int64, apnsID: String?, status: Int?, reason: String?, latency: Int64?, chunk: Int64?
    ) {
        self.rows.append(
            Row(
                id: id, notificationID: notificationID, deviceID: deviceID, token: token, environment: environment, pushType: pushType,
                topic: topic, state: state, attempts: attempts, nextAttemptAt: nextAttemptAt, apnsID: apnsID, status: status, reason: reason,
                latency: latency, chunk: chunk ?? 0
            )
        )
    }

    /// The rows in `COPY`'s text format: a line per row, tab-separated `columns`, `\N` for NULL.
    func copyText(updatedAt: Int64) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(self.rows.count * 256)
        for index in self.rows.indices {
            buffer.writeCopyField(self.rows[index].id)
            buffer.writeCopyField(self.rows[index].notificationID)
            buffer.writeCopyField(self.rows[index].deviceID)
            buffer.writeCopyField(self.rows[index].token)
            buffer.writeCopyField(self.rows[index].environment)
            buffer.writeCopyField(self.rows[index].pushType)
            buffer.writeCopyField(self.rows[index].topic)
            buffer.writeCopyField(self.rows[index].state.rawValue)
            buffer.writeCopyField(Int64(self.rows[index].attempts))
            buffer.writeCopyField(self.rows[index].nextAttemptAt)
            buffer.writeCopyField(self.rows[index].apnsID)
            buffer.writeCopyField(self.rows[index].status.map(Int64.init))
            buffer.writeCopyField(self.rows[index].reason)
            buffer.writeCopyField(self.rows[index].latency)
            buffer.writeCopyField(updatedAt, last: true)
        }
        return buffer
    }
}

extension ByteBuffer {
    /// Writes a field of `COPY`'s text format and its separator (a tab, or the line's end).
    fileprivate mutating func writeCopyField(_ value: Int64?, last: Bool = false) {
        if let value {
            // Its decimal digits, written without making a String.
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
                var magnitude = value.magnitude
                var start = digits.count
                repeat {
                    start -= 1
                    digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                    magnitude /= 10
                } while magnitude > 0
                if value < 0 { self.writeInteger(UInt8(ascii: "-")) }
                self.writeBytes(UnsafeMutableBufferPointer(rebasing: digits[start...]))
            }
        } else {
            self.writeStaticString("\\N")
        }
        self.writeInteger(last ? UInt8(ascii: "\n") : UInt8(ascii: "\t"))
    }

    /// A text field with its backslashes, tabs and line breaks escaped; a NUL, which no
    /// PostgreSQL text can hold, is dropped.
    fileprivate mutating func writeCopyField(_ value: String?, last: Bool = false) {
        guard var value else { return self.writeCopyField(Int64?.none, last: last) }
        // NUL, tab, line feed and carriage return are all at most 13; then the backslash.
        let plain = value.withUTF8 { bytes in
            for byte in bytes where byte <= 13 || byte == UInt8(ascii: "\\") { return false }
            self.writeBytes(bytes)
            return true
        }
        if !plain {
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): self.writeStaticString("\\\\")
                case UInt8(ascii: "\t"): self.writeStaticString("\\t")
                case UInt8(ascii: "\n"): self.writeStaticString("\\n")
                case UInt8(ascii: "\r"): self.writeStaticString("\\r")
                case 0: break
                default: self.writeInteger(byte)
                }
            }
        }
        self.writeInteger(last ? UInt8(ascii: "\n") : UInt8(ascii: "\t"))
    }
}

/// The statements a batch runs every time, prepared once per connection (`FixedStatement`):
/// lookups by key, whose plan does not depend on how many rows a table holds. A statement that
/// picks by range (the due deliveries, the next notification to expand) is planned at each call.
enum Statements {
    /// What the deliveries of notifications $1 share.
    enum SharedColumns: FixedStatement {
        static let sql = "SELECT id, \(NotificationShared.columns) FROM notifications WHERE id = ANY($1)"
    }

    /// The chunk whose lease ran out first by $1, with its notification.
    enum ExpiredChunk: FixedStatement {
        static let sql = """
            SELECT c.id, c.notification_id, c.after_id, c.through_id, c.attempts, n.id, n.bundle_id, n.targeting, n.device_ids IS NOT NULL,
                n.push_type, n.cancelled_at, \(NotificationShared.columns)
            FROM delivery_chunks c LEFT JOIN notifications n ON n.id = c.notification_id
            WHERE c.lease_until <= $1 ORDER BY c.lease_until, c.id LIMIT 1 FOR UPDATE OF c SKIP LOCKED
            """
    }

    /// A new chunk: notification $1, devices after $2 through $3, $4 of them, leased until $5.
    enum NewChunk: FixedStatement {
        static let sql = """
            INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES ($1, $2, $3, $4, 1, $5) RETURNING id
            """
    }

    /// Where notification $2's expansion goes on: after device $1 (NULL: done).
    enum ExpandAfter: FixedStatement {
        static let sql = "UPDATE notifications SET expand_after = $1 WHERE id = $2"
    }

    /// Chunks $1 locked, with their attempts.
    enum LockChunks: FixedStatement {
        static let sql = "SELECT id, attempts FROM delivery_chunks WHERE id = ANY($1) ORDER BY id FOR UPDATE"
    }

    /// Chunk $1 ends if still at attempt $2 and $3 of its deliveries are recorded.
    enum EndRecordedChunk: FixedStatement {
        static let sql = "DELETE FROM delivery_chunks WHERE id = $1 AND attempts = $2 AND size <= $3"
    }
}

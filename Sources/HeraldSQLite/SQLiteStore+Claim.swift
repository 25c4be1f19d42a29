// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

extension SQLiteStore {
    package func claimDeliveries(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedDelivery] {
        try await ClaimPolicy.claimPastSetAside {
            try await self.claimBatch(limit: limit, now: now, leaseMilliseconds: leaseMilliseconds)
        }
    }

    /// One batch, in one transaction: how many deliveries it claimed, and those the delivery policies kept.
    private func claimBatch(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> (claimed: Int, kept: [ClaimedDelivery]) {
        try await self.database.write { db in
            let leaseEnd = now + leaseMilliseconds
            var result: [ClaimedDelivery] = []
            result.reserveCapacity(limit)
            var shared: [String: NotificationShared] = [:]
            var known: [Int64: PolicyDevice] = [:]
            var policy = ClaimPolicy(limit: limit)
            while let step = policy.nextStep(claimed: result.count) {
                switch step {
                case .claimDue(let room):
                    try Self.claimDue(db, into: &result, shared: &shared, room: room, now: now, leaseEnd: leaseEnd)
                case .expand:
                    try Self.expand(db, into: &result, known: &known, policy: policy, now: now, leaseEnd: leaseEnd)
                }
            }
            let claimed = result.count
            try Self.applyPolicies(db, to: &result, known: known, now: now)
            let sealed = ClaimPolicy.sealedDevices(result)
            if !sealed.isEmpty {
                ClaimPolicy.attach(try Self.publicKeys(db, devices: sealed), to: &result)
            }
            let templated = ClaimPolicy.templatedDevices(result)
            if !templated.isEmpty {
                ClaimPolicy.render(try Self.templateDevices(db, devices: templated), into: &result)
            }
            return (claimed, result)
        }
    }

    /// Claims up to `room` deliveries that exist and are due. A lease moves the next attempt to
    /// the lease's end: if the process dies, the delivery is simply due again then.
    private static func claimDue(
        _ db: borrowing SQLiteDatabase.Connection, into result: inout [ClaimedDelivery], shared: inout [String: NotificationShared], room: Int,
        now: Int64, leaseEnd: Int64
    ) throws {
        try db.each(
            """
            UPDATE deliveries SET next_attempt_at = ?1, attempts = attempts + 1, updated_at = ?2
            WHERE id IN (SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= ?2 ORDER BY next_attempt_at, id LIMIT ?3)
            RETURNING id, notification_id, device_id, token, environment, push_type, topic, attempts, unknown_outcomes, reason
            """,
            [.integer(leaseEnd), .integer(now), .integer(Int64(room))]
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

    /// The public keys of `devices` (those of encrypted notifications), read as they are now.
    private static func publicKeys(_ db: borrowing SQLiteDatabase.Connection, devices: [Int64]) throws -> [Int64: DevicePublicKey] {
        var keys: [Int64: DevicePublicKey] = [:]
        try db.each(
            "SELECT id, public_key_type, public_key FROM devices WHERE id IN (SELECT value FROM json_each(?)) AND public_key IS NOT NULL",
            [.text(JSONValue.array(devices.map { .int($0) }).jsonString)]
        ) { row in
            if let id = row.int(0), let type = row.string(1), let key = row.bytes(2) { keys[id] = DevicePublicKey(type: type, key: key) }
        }
        return keys
    }

    /// The attributes templates use of `devices` (those of templated notifications), as they are now.
    private static func templateDevices(_ db: borrowing SQLiteDatabase.Connection, devices: [Int64]) throws -> [Int64: TemplateDevice] {
        var found: [Int64: TemplateDevice] = [:]
        try db.each(
            "SELECT \(TemplateDevice.columns) FROM devices WHERE id IN (SELECT value FROM json_each(?))",
            [.text(JSONValue.array(devices.map { .int($0) }).jsonString)]
        ) { row in
            if let id = row.int(0) { found[id] = TemplateDevice(row: row, from: 1) }
        }
        return found
    }

    /// Claims again the devices of chunks whose lease ran out and that got no delivery yet (the
    /// process that held them died, or is too late), as a new attempt of the same chunk. A
    /// cancelled notification's are recorded as failed ("Cancelled") instead of sent.
    private static func reclaimChunks(
        _ db: borrowing SQLiteDatabase.Connection, into result: inout [ClaimedDelivery], policy: ClaimPolicy, now: Int64, leaseEnd: Int64
    ) throws {
        while policy.hasRoom(claimed: result.count) {
            var next: (chunk: Int64, notificationID: String, after: Int64, through: Int64, attempts: Int)?
            var notification:
                (bundleID: String, targeting: Targeting?, deviceIDs: String?, pushType: PushType?, cancelled: Bool, shared: NotificationShared)?
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
                notification =
                    row.isNull(5)
                    ? nil
                    : (
                        row.string(6) ?? "", row.string(7).flatMap(Targeting.init(jsonString:)), row.string(8),
                        row.string(9).flatMap(PushType.init(rawValue:)), !row.isNull(10), NotificationShared(row: row, from: 11)
                    )
            }
            guard let chunk = next else { return }
            let cancelled = notification?.cancelled ?? false
            let devices = try notification.flatMap { notification in
                try Self.chunkDevices(
                    db, notificationID: chunk.notificationID, bundleID: notification.bundleID, appID: notification.shared.appID,
                    pushType: notification.pushType, targeting: notification.targeting, deviceIDs: notification.deviceIDs, after: chunk.after,
                    through: chunk.through, limit: policy.reclaimLimit(claimed: result.count, cancelled: cancelled), excludingRecorded: true
                )
            }
            switch policy.reclaim(
                found: devices?.count, lastFound: devices?.last?.id, through: chunk.through, attempts: chunk.attempts, cancelled: cancelled,
                claimed: result.count
            ) {
            case .end(let recordCancelled):
                if recordCancelled, let devices {
                    let first = try Self.reserveDeliveryIDs(db, devices.count)
                    var rows = NewRows(updatedAt: now)
                    for (offset, device) in devices.enumerated() {
                        rows.add(
                            id: first + Int64(offset), device: device, notificationID: chunk.notificationID, state: .failed,
                            attempts: chunk.attempts + 1, nextAttemptAt: now, reason: "Cancelled"
                        )
                    }
                    _ = try Self.insertDeliveries(db, rows, fenced: false)
                }
                try Self.endChunk(db, chunk.chunk, notificationID: chunk.notificationID)
            case .claim(let through, let attempts, let split):
                guard let notification, let devices else { return }
                if split {
                    try db.query(
                        "INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES (?, ?, ?, 0, ?, ?)",
                        [.text(chunk.notificationID), .integer(through), .integer(chunk.through), .integer(Int64(chunk.attempts)), .integer(now)]
                    )
                }
                try db.query(
                    "UPDATE delivery_chunks SET through_id = ?, size = ?, attempts = ?, lease_until = ? WHERE id = ?",
                    [.integer(through), .integer(Int64(devices.count)), .integer(Int64(attempts)), .integer(leaseEnd), .integer(chunk.chunk)]
                )
                try Self.claimChunk(
                    db, devices, chunk: chunk.chunk, attempts: attempts, notificationID: chunk.notificationID, shared: notification.shared,
                    into: &result
                )
            }
        }
    }

    /// Chunks whose lease ran out first, then the next chunks of due notifications' audiences,
    /// until the batch is full. A chunk is leased as one row; its deliveries are written once,
    /// with their outcome. Each chunk is its own savepoint: a notification that cannot be
    /// expanded is stopped (cancelled) instead of failing every claim after it. The devices of a
    /// notification with policies come with what the policies read of them (`known`).
    private static func expand(
        _ db: borrowing SQLiteDatabase.Connection, into result: inout [ClaimedDelivery], known: inout [Int64: PolicyDevice], policy: ClaimPolicy,
        now: Int64, leaseEnd: Int64
    ) throws {
        try Self.reclaimChunks(db, into: &result, policy: policy, now: now, leaseEnd: leaseEnd)
        var expanded = 0
        while policy.mayExpand(claimed: result.count, expanded: expanded) {
            var next:
                (
                    id: String, bundleID: String, targeting: Targeting?, deviceIDs: String?, after: Int64, until: Int64, scheduledAt: Int64,
                    pushType: PushType?, localTime: LocalTime?, shared: NotificationShared
                )?
            try db.each(
                """
                SELECT id, bundle_id, CASE WHEN device_ids IS NULL THEN targeting END, device_ids, expand_after, expand_until, scheduled_at, push_type, local_time, \(NotificationShared.columns)
                FROM notifications WHERE expand_after IS NOT NULL AND scheduled_at <= ? ORDER BY scheduled_at, id LIMIT 1
                """,
                [.integer(now)]
            ) { row in
                next = (
                    row.string(0) ?? "", row.string(1) ?? "", row.string(2).flatMap(Targeting.init(jsonString:)), row.string(3), row.int(4) ?? 0,
                    row.int(5) ?? 0, row.int(6) ?? 0, row.string(7).flatMap(PushType.init(rawValue:)), row.string(8).flatMap(LocalTime.init),
                    NotificationShared(row: row, from: 9)
                )
            }
            guard let notification = next else { break }
            if notification.deviceIDs == nil, notification.targeting == nil {
                // Not something Herald wrote: stop expanding it rather than loop on it.
                try db.query("UPDATE notifications SET expand_after = NULL WHERE id = ?", [.text(notification.id)])
                continue
            }
            let chunk = policy.room(claimed: result.count)
            var count = 0
            var last = notification.after
            let claimedBefore = result.count
            try db.execute("SAVEPOINT expand")
            do {
                let devices =
                    try Self.chunkDevices(
                        db, notificationID: notification.id, bundleID: notification.bundleID, appID: notification.shared.appID,
                        pushType: notification.pushType, targeting: notification.targeting, deviceIDs: notification.deviceIDs,
                        after: notification.after,
                        through: notification.until, limit: chunk, excludingRecorded: false, policy: PolicyDevice.wanted(by: notification.shared)
                    ) ?? []
                if let localTime = notification.localTime, !devices.isEmpty {
                    // A local-time notification's deliveries are created pending, each due at its
                    // device's own time.
                    count = devices.count
                    last = devices[devices.count - 1].id
                    let first = try Self.reserveDeliveryIDs(db, devices.count)
                    var rows = NewRows(updatedAt: now)
                    for (offset, device) in devices.enumerated() {
                        rows.add(
                            id: first + Int64(offset), device: device, notificationID: notification.id, state: .pending, attempts: 0,
                            nextAttemptAt: notification.scheduledAt, reason: nil
                        )
                    }
                    _ = try Self.insertDeliveries(db, rows, fenced: false)
                    try Self.scheduleLocalTime(
                        db, localTime, notificationID: notification.id, appID: notification.shared.appID, scheduledAt: notification.scheduledAt,
                        after: notification.after, through: last
                    )
                } else if !devices.isEmpty {
                    count = devices.count
                    last = devices[devices.count - 1].id
                    let chunkID =
                        try db.query(
                            "INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                            [
                                .text(notification.id), .integer(notification.after), .integer(last), .integer(Int64(count)),
                                .integer(Int64(ClaimPolicy.firstAttempt)), .integer(leaseEnd),
                            ]
                        ).first?[0].int ?? 0
                    try Self.claimChunk(
                        db, devices, chunk: chunkID, attempts: ClaimPolicy.firstAttempt, notificationID: notification.id, shared: notification.shared,
                        into: &result
                    )
                    for device in devices { if let read = device.policy { known[device.id] = read } }
                }
                expanded += count
                try db.query(
                    "UPDATE notifications SET expand_after = ? WHERE id = ?",
                    [ClaimPolicy.expandAfter(found: count, asked: chunk, last: last).map(SQLValue.integer) ?? .null, .text(notification.id)]
                )
                let exhausted = ClaimPolicy.isExhausted(found: count, asked: chunk)
                if NotificationPolicy.forgetsPlaintext(exhausted: exhausted, encrypted: notification.shared.placeholder != nil) {
                    try Self.forgetPlaintext(db, notificationIDs: [notification.id])
                }
                try db.execute("RELEASE expand")
            } catch {
                // This notification cannot be expanded (a failing statement): undo its chunk,
                // stop it as cancelled, and go on with the others.
                try db.execute("ROLLBACK TO expand")
                try db.execute("RELEASE expand")
                result.removeSubrange(claimedBefore...)
                try db.query("UPDATE notifications SET expand_after = NULL, cancelled_at = ? WHERE id = ?", [.integer(now), .text(notification.id)])
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
            try db.query(
                """
                UPDATE deliveries SET next_attempt_at = ?1, updated_at = ?1 WHERE notification_id = ?2 AND device_id > ?3 AND device_id <= ?4
                    AND device_id IN (SELECT id FROM devices WHERE app_id = ?6 AND id > ?3 AND id <= ?4 AND time_zone IS ?5)
                """,
                [
                    .integer(NotificationPolicy.localDue(localTime, timeZone: zone, scheduledAt: scheduledAt)), .text(notificationID),
                    .integer(after),
                    .integer(through), zone.map(SQLValue.text) ?? .null, .text(appID),
                ]
            )
        }
    }

    /// A notification's audience as SQL over `devices d`: the conditions after `<app> = ?2`, with
    /// bindings from `?first`; nil for a targeting Herald did not write.
    private static func chunkAudience(
        targeting: Targeting?, deviceIDs: String?, first: Int
    ) -> (sql: String, bindings: [SQLValue], id: String, app: String)? {
        // A resolved list is walked through its ids (devices unregistered or made inactive
        // since are skipped); "all" and tags by id range with their filter. For the ids, `+`
        // keeps SQLite on rowid lookups of the list (in id order, so the ORDER BY costs
        // nothing) instead of a walk over the app's id range.
        if let deviceIDs {
            return (" AND d.id IN (SELECT value FROM json_each(?\(first)))", [.text(deviceIDs)], "+d.id", "+d.app_id")
        }
        guard let targeting else { return nil }
        let filter = Self.audienceFilter(targeting, first: first)
        return (filter.sql, filter.bindings, filter.id, "d.app_id")
    }

    /// Up to `limit` active devices of an audience with ids in `after…through`, in id order; with
    /// `excludingRecorded`, only those with no delivery of the notification yet.
    private static func chunkDevices(
        _ db: borrowing SQLiteDatabase.Connection, notificationID: String, bundleID: String, appID: String, pushType: PushType?,
        targeting: Targeting?,
        deviceIDs: String?, after: Int64, through: Int64, limit: Int, excludingRecorded: Bool, policy: Bool = false
    ) throws -> [ChunkDevice]? {
        guard let filter = Self.chunkAudience(targeting: targeting, deviceIDs: deviceIDs, first: 7) else { return nil }
        let (pushTypeSQL, topicSQL) = StoreSQL.pushTypeAndTopic(fixed: pushType, bundle: "?1")
        let sql = """
            SELECT d.id, d.token, d.environment, \(pushTypeSQL), \(topicSQL)\(policy ? PolicyDevice.columns : "") FROM devices d
            WHERE \(filter.app) = ?2 AND d.active = 1 AND \(filter.id) > ?3 AND \(filter.id) <= ?4\(filter.sql)
                AND (?6 IS NULL OR NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = ?6 AND x.device_id = d.id))
            ORDER BY d.id LIMIT ?5
            """
        var devices: [ChunkDevice] = []
        devices.reserveCapacity(min(limit, 1000))
        try db.each(
            sql,
            [
                .text(bundleID), .text(appID), .integer(after), .integer(through), .integer(Int64(limit)),
                excludingRecorded ? .text(notificationID) : .null,
            ] + filter.bindings
        ) { row in devices.append(ChunkDevice(row: row, policy: policy)) }
        return devices
    }

    /// Hands out `count` delivery ids (a chunk's are known before their rows exist); the first.
    private static func reserveDeliveryIDs(_ db: borrowing SQLiteDatabase.Connection, _ count: Int) throws -> Int64 {
        let last =
            try db.query("UPDATE sequences SET value = value + ? WHERE name = 'deliveries' RETURNING value", [.integer(Int64(count))]).first?[0].int
            ?? 0
        return last - Int64(count) + 1
    }

    /// Claims `devices` as chunk `chunk` (its attempt `attempts`), with ids from the counter.
    private static func claimChunk(
        _ db: borrowing SQLiteDatabase.Connection, _ devices: [ChunkDevice], chunk: Int64, attempts: Int, notificationID: String,
        shared: NotificationShared,
        into result: inout [ClaimedDelivery]
    ) throws {
        let first = try Self.reserveDeliveryIDs(db, devices.count)
        for (offset, device) in devices.enumerated() {
            result.append(
                ClaimedDelivery(
                    id: first + Int64(offset), device: device, notificationID: notificationID, shared: shared, attempts: attempts, chunk: chunk)
            )
        }
    }

    /// Deletes a chunk with nothing of it left to send; an encrypted notification may lose its
    /// plaintext now.
    private static func endChunk(_ db: borrowing SQLiteDatabase.Connection, _ chunk: Int64, notificationID: String) throws {
        try db.query("DELETE FROM delivery_chunks WHERE id = ?", [.integer(chunk)])
        try Self.forgetPlaintext(db, notificationIDs: [notificationID])
    }
}

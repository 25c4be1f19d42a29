// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore
import PostgresNIO

extension PostgresStore {
    package func claimDeliveries(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedDelivery] {
        try await ClaimPolicy.claimPastSetAside {
            try await self.claimBatch(limit: limit, now: now, leaseMilliseconds: leaseMilliseconds)
        }
    }

    /// One batch: how many deliveries it claimed, and those the delivery policies kept.
    private func claimBatch(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> (claimed: Int, kept: [ClaimedDelivery]) {
        let (claimed, known) = try await self.write { db in
            let leaseEnd = now + leaseMilliseconds
            var result: [ClaimedDelivery] = []
            result.reserveCapacity(limit)
            var known: [Int64: PolicyDevice] = [:]
            var policy = ClaimPolicy(limit: limit)
            while let step = policy.nextStep(claimed: result.count) {
                switch step {
                case .claimDue(let room):
                    try await Self.claimDue(db, into: &result, room: room, now: now, leaseEnd: leaseEnd)
                case .expand:
                    try await Self.expand(db, into: &result, known: &known, policy: policy, now: now, leaseEnd: leaseEnd)
                }
            }
            let sealed = ClaimPolicy.sealedDevices(result)
            if !sealed.isEmpty {
                ClaimPolicy.attach(try await Self.publicKeys(db, devices: sealed), to: &result)
            }
            let templated = ClaimPolicy.templatedDevices(result)
            if !templated.isEmpty {
                ClaimPolicy.render(try await Self.templateDevices(db, devices: templated), into: &result)
            }
            return (result, known)
        }
        // Delivery policies in a transaction of their own, once the claim has committed: the claim
        // holds the lock on the notification it expands (the next chunk of a broadcast waits for
        // it), the policies only the claimed deliveries' leases and the locks they take themselves
        // (per row of frequency counts, per throttled notification), so another worker expands
        // the next chunk meanwhile. Exact all the same: each row of histories is read and
        // written under its lock in one transaction. Should it fail, the claimed deliveries stay
        // leased, unsent, and are claimed again when their lease runs out, as after a crash.
        guard Self.hasPolicies(claimed) else { return (claimed.count, claimed) }
        let kept = try await self.write { db in
            var result = claimed
            try await Self.applyPolicies(db, to: &result, known: known, now: now)
            return result
        }
        return (claimed.count, kept)
    }

    /// Claims up to `room` deliveries that exist and are due, skipping rows another process is
    /// claiming. A lease moves the next attempt to the lease's end: if the process dies, the
    /// delivery is due again then.
    private static func claimDue(_ db: Connection, into result: inout [ClaimedDelivery], room: Int, now: Int64, leaseEnd: Int64) async throws {
        // Planned at every call, for its values: a generic plan made while the table was
        // small scans it all once it is not (it did, 72 ms a call at 100,000 rows).
        let rows = try await db.query(
            """
            UPDATE deliveries x SET next_attempt_at = $1, attempts = x.attempts + 1, updated_at = $2
            FROM (SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= $2
                ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) due
            WHERE x.id = due.id
            RETURNING x.id, x.notification_id, x.device_id, x.token, x.environment, x.push_type, x.topic, x.attempts, x.unknown_outcomes, x.reason
            """,
            [.int(leaseEnd), .int(now), .int(Int64(room))]
        )
        guard !rows.isEmpty else { return }
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

    /// The public keys of `devices` (those of encrypted notifications), read as they are now.
    private static func publicKeys(_ db: Connection, devices: [Int64]) async throws -> [Int64: DevicePublicKey] {
        var keys: [Int64: DevicePublicKey] = [:]
        for row in try await db.query(
            "SELECT id, public_key_type, public_key FROM devices WHERE id = ANY($1) AND public_key IS NOT NULL",
            [.ints(devices)]
        ) {
            if let id = row.int(0), let type = row.string(1), let key = row.bytes(2) { keys[id] = DevicePublicKey(type: type, key: key) }
        }
        return keys
    }

    /// The attributes templates use of `devices` (those of templated notifications), as they are now.
    private static func templateDevices(_ db: Connection, devices: [Int64]) async throws -> [Int64: TemplateDevice] {
        var found: [Int64: TemplateDevice] = [:]
        for row in try await db.query("SELECT \(TemplateDevice.columns) FROM devices WHERE id = ANY($1)", [.ints(devices)]) {
            if let id = row.int(0) { found[id] = TemplateDevice(row: row, from: 1) }
        }
        return found
    }

    /// Claims again the devices of chunks whose lease ran out and that got no delivery yet (the
    /// process that held them died, or is too late), as a new attempt of the same chunk; another
    /// process's chunks being claimed are skipped. A cancelled notification's are recorded as
    /// failed ("Cancelled") instead of sent.
    private static func reclaimChunks(
        _ db: Connection, into result: inout [ClaimedDelivery], policy: ClaimPolicy, now: Int64, leaseEnd: Int64
    ) async throws {
        while policy.hasRoom(claimed: result.count) {
            guard let row = try await db.query(Statements.ExpiredChunk.self, [.int(now)]).first else { return }
            let chunk = (
                chunk: row.int(0) ?? 0, notificationID: row.string(1) ?? "", after: row.int(2) ?? 0, through: row.int(3) ?? 0,
                attempts: Int(row.int(4) ?? 0)
            )
            let notification =
                row.isNull(5)
                ? nil
                : (
                    bundleID: row.string(6) ?? "", targeting: row.string(7).flatMap(Targeting.init(jsonString:)), byList: row.bool(8) ?? false,
                    pushType: row.string(9).flatMap(PushType.init(rawValue:)), cancelled: !row.isNull(10),
                    shared: NotificationShared(row: row, from: 11)
                )
            let cancelled = notification?.cancelled ?? false
            var devices: [(deliveryID: Int64, device: ChunkDevice)]?
            if let notification {
                devices = try await Self.chunkDevices(
                    db, notificationID: chunk.notificationID, bundleID: notification.bundleID, appID: notification.shared.appID,
                    pushType: notification.pushType, targeting: notification.targeting, byList: notification.byList, after: chunk.after,
                    through: chunk.through, limit: policy.reclaimLimit(claimed: result.count, cancelled: cancelled), excludingRecorded: true
                )
            }
            switch policy.reclaim(
                found: devices?.count, lastFound: devices?.last?.device.id, through: chunk.through, attempts: chunk.attempts, cancelled: cancelled,
                claimed: result.count
            ) {
            case .end(let recordCancelled):
                if recordCancelled, let devices {
                    var rows = NewRows()
                    for (deliveryID, device) in devices {
                        rows.add(
                            id: deliveryID, device: device, notificationID: chunk.notificationID, state: .failed,
                            attempts: chunk.attempts + 1, nextAttemptAt: now, reason: "Cancelled"
                        )
                    }
                    _ = try await Self.insertDeliveries(db, rows, fenced: false, now: now)
                }
                try await Self.endChunk(db, chunk.chunk, notificationID: chunk.notificationID)
            case .claim(let through, let attempts, let split):
                guard let notification, let devices else { return }
                if split {
                    try await db.query(
                        "INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES ($1, $2, $3, 0, $4, $5)",
                        [.text(chunk.notificationID), .int(through), .int(chunk.through), .int(Int64(chunk.attempts)), .int(now)]
                    )
                }
                try await db.query(
                    "UPDATE delivery_chunks SET through_id = $1, size = $2, attempts = $3, lease_until = $4 WHERE id = $5",
                    [.int(through), .int(Int64(devices.count)), .int(Int64(attempts)), .int(leaseEnd), .int(chunk.chunk)]
                )
                Self.claimChunk(
                    devices, chunk: chunk.chunk, attempts: attempts, notificationID: chunk.notificationID, shared: notification.shared, into: &result
                )
            }
        }
    }

    /// Chunks whose lease ran out first, then the next chunks of due notifications' audiences,
    /// until the batch is full. A chunk is leased as one row; its deliveries are written once,
    /// with their outcome. A notification being expanded is locked (`FOR UPDATE SKIP LOCKED`):
    /// another process takes the next notification, or the same one's next chunk once this
    /// commits. Each chunk is its own savepoint: a notification that cannot be expanded is stopped.
    /// The devices of a notification with policies come with what the policies read of them (`known`).
    private static func expand(
        _ db: Connection, into result: inout [ClaimedDelivery], known: inout [Int64: PolicyDevice], policy: ClaimPolicy, now: Int64, leaseEnd: Int64
    ) async throws {
        try await Self.reclaimChunks(db, into: &result, policy: policy, now: now, leaseEnd: leaseEnd)
        var expanded = 0
        while policy.mayExpand(claimed: result.count, expanded: expanded) {
            var row = try await db.query(Self.nextToExpand(now: now, skipLocked: true)).first
            if row == nil, result.isEmpty {
                row = try await Self.waitToExpand(db, now: now)
            }
            let next = row.map { row in
                (
                    id: row.string(0) ?? "", bundleID: row.string(1) ?? "", targeting: row.string(2).flatMap(Targeting.init(jsonString:)),
                    byList: row.bool(3) ?? false, after: row.int(4) ?? 0, until: row.int(5) ?? 0, scheduledAt: row.int(6) ?? 0,
                    pushType: row.string(7).flatMap(PushType.init(rawValue:)), localTime: row.string(8).flatMap(LocalTime.init),
                    shared: NotificationShared(row: row, from: 9)
                )
            }
            guard let notification = next else { break }
            if !notification.byList, notification.targeting == nil {
                // Not something Herald wrote: stop expanding it rather than loop on it.
                try await db.query("UPDATE notifications SET expand_after = NULL WHERE id = $1", [.text(notification.id)])
                continue
            }
            let chunk = policy.room(claimed: result.count)
            var count = 0
            var last = notification.after
            let claimedBefore = result.count
            try await db.execute("SAVEPOINT expand")
            do {
                if let localTime = notification.localTime {
                    // A local-time notification's deliveries are created pending, each due at its
                    // device's own time: in one statement, their ids from the table's sequence.
                    var insert = Query()
                    let bundle = insert.bind(.text(notification.bundleID))
                    let (pushTypeSQL, topicSQL) = StoreSQL.pushTypeAndTopic(fixed: notification.pushType, bundle: bundle)
                    insert.sql = """
                        INSERT INTO deliveries (notification_id, device_id, token, environment, push_type, topic, state, attempts, next_attempt_at, updated_at)
                        SELECT \(insert.bind(.text(notification.id))), d.id, d.token, d.environment, \(pushTypeSQL), \(topicSQL), 'pending', 0,
                            \(insert.bind(.int(notification.scheduledAt))), \(insert.bind(.int(now)))
                        """
                    _ = Self.chunkAudience(
                        &insert, notificationID: notification.id, appID: notification.shared.appID, targeting: notification.targeting,
                        byList: notification.byList, after: notification.after, through: notification.until
                    )
                    insert.sql += " ORDER BY d.id LIMIT \(insert.bind(.int(Int64(chunk)))) RETURNING device_id"
                    for row in try await db.query(insert) {
                        count += 1
                        last = max(last, row.int(0) ?? last)
                    }
                    if count > 0 {
                        try await Self.scheduleLocalTime(
                            db, localTime, notificationID: notification.id, appID: notification.shared.appID, scheduledAt: notification.scheduledAt,
                            after: notification.after, through: last
                        )
                    }
                } else if let devices = try await Self.chunkDevices(
                    db, notificationID: notification.id, bundleID: notification.bundleID, appID: notification.shared.appID,
                    pushType: notification.pushType, targeting: notification.targeting, byList: notification.byList, after: notification.after,
                    through: notification.until, limit: chunk, excludingRecorded: false, policy: PolicyDevice.wanted(by: notification.shared)
                ), !devices.isEmpty {
                    count = devices.count
                    last = devices[devices.count - 1].device.id
                    let chunkID =
                        try await db.query(
                            Statements.NewChunk.self,
                            [
                                .text(notification.id), .int(notification.after), .int(last), .int(Int64(count)),
                                .int(Int64(ClaimPolicy.firstAttempt)), .int(leaseEnd),
                            ]
                        ).first?.int(0) ?? 0
                    Self.claimChunk(
                        devices, chunk: chunkID, attempts: ClaimPolicy.firstAttempt, notificationID: notification.id, shared: notification.shared,
                        into: &result
                    )
                    for (_, device) in devices { if let read = device.policy { known[device.id] = read } }
                }
                expanded += count
                try await db.query(
                    Statements.ExpandAfter.self, [.int(ClaimPolicy.expandAfter(found: count, asked: chunk, last: last)), .text(notification.id)]
                )
                let exhausted = ClaimPolicy.isExhausted(found: count, asked: chunk)
                if NotificationPolicy.forgetsPlaintext(exhausted: exhausted, encrypted: notification.shared.placeholder != nil) {
                    try await Self.forgetPlaintext(db, notificationIDs: [notification.id])
                }
                try await db.execute("RELEASE SAVEPOINT expand")
            } catch  where !error.isTransient {
                // This notification cannot be expanded (the same statement would fail again): undo
                // its chunk, stop it as cancelled, go on. A passing failure (a lost connection, a
                // timeout, a cancel) instead fails the whole claim, and the next one tries again.
                try await db.execute("ROLLBACK TO SAVEPOINT expand")
                try await db.execute("RELEASE SAVEPOINT expand")
                result.removeSubrange(claimedBefore...)
                try await db.query(
                    "UPDATE notifications SET expand_after = NULL, cancelled_at = $1 WHERE id = $2", [.int(now), .text(notification.id)])
            }
        }
    }

    /// The first notification due by `now` with audience left to expand, locked; skipping those
    /// another claim holds, or waiting for the first. Planned at every call, like the claim of due
    /// deliveries: the notifications table grows.
    private static func nextToExpand(now: Int64, skipLocked: Bool) -> Query {
        var pick = Query(
            "SELECT id, bundle_id, targeting, device_ids IS NOT NULL, expand_after, expand_until, scheduled_at, push_type, local_time, \(NotificationShared.columns)"
        )
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
        } catch  where error.postgresState == "55P03" {
            // lock_not_available: the other claim is slow; come back with the poll.
            try await db.execute("ROLLBACK TO SAVEPOINT wait_to_expand")
            return nil
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
            try await db.query(
                """
                UPDATE deliveries SET next_attempt_at = $1, updated_at = $1 WHERE notification_id = $2 AND device_id > $3 AND device_id <= $4
                    AND device_id IN (SELECT id FROM devices WHERE app_id = $6 AND id > $3 AND id <= $4 AND time_zone IS NOT DISTINCT FROM $5)
                """,
                [
                    .int(NotificationPolicy.localDue(localTime, timeZone: zone, scheduledAt: scheduledAt)), .text(notificationID), .int(after),
                    .int(through), .text(zone), .text(appID),
                ]
            )
        }
    }

    /// The `FROM … WHERE …` over `devices d` of a notification's audience with ids in
    /// `after…through`; nil for a targeting Herald did not write.
    private static func chunkAudience(
        _ query: inout Query, notificationID: String, appID: String, targeting: Targeting?, byList: Bool, after: Int64, through: Int64
    ) -> Bool {
        let app = query.bind(.text(appID))
        let (first, last) = (query.bind(.int(after)), query.bind(.int(through)))
        if byList {
            // A resolved list is walked through its ids (devices removed or made inactive since
            // are skipped), each device looked up by its id: joined, the planner may walk the
            // devices table over the chunk's id range instead, every device of a sparse list's
            // range (a list of 1,000 among 31,601 devices: 16,050 rows read for 500).
            query.sql += """
                 FROM notifications n CROSS JOIN LATERAL unnest(n.device_ids) AS u(id)
                    CROSS JOIN LATERAL (SELECT * FROM devices WHERE id = u.id LIMIT 1) d
                WHERE n.id = \(query.bind(.text(notificationID))) AND u.id > \(first) AND u.id <= \(last) AND d.app_id = \(app) AND d.active
                """
        } else if let targeting {
            query.sql += " FROM devices d WHERE d.app_id = \(app) AND d.active AND d.id > \(first) AND d.id <= \(last)"
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
        after: Int64, through: Int64, limit: Int, excludingRecorded: Bool, policy: Bool = false
    ) async throws -> [(deliveryID: Int64, device: ChunkDevice)]? {
        var query = Query()
        let (pushTypeSQL, topicSQL) = StoreSQL.pushTypeAndTopic(fixed: pushType, bundle: query.bind(.text(bundleID)))
        // Each device's delivery id from the table's sequence (a chunk's are handed out before
        // their rows exist), drawn outside the LIMIT so that only the chosen devices draw one.
        query.sql =
            "SELECT nextval('deliveries_id_seq'), c.* FROM (SELECT d.id, d.token, d.environment, \(pushTypeSQL), \(topicSQL)\(policy ? PolicyDevice.columns : "")"
        guard
            Self.chunkAudience(
                &query, notificationID: notificationID, appID: appID, targeting: targeting, byList: byList, after: after, through: through)
        else { return nil }
        if excludingRecorded {
            query.sql +=
                " AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = \(query.bind(.text(notificationID))) AND x.device_id = d.id)"
        }
        query.sql += " ORDER BY d.id LIMIT \(query.bind(.int(Int64(limit))))) c"
        return try await db.query(query).map { row in
            (row.int(0) ?? 0, ChunkDevice(row: row, from: 1, policy: policy))
        }
    }

    /// Claims `devices` as chunk `chunk` (its attempt `attempts`).
    private static func claimChunk(
        _ devices: [(deliveryID: Int64, device: ChunkDevice)], chunk: Int64, attempts: Int, notificationID: String, shared: NotificationShared,
        into result: inout [ClaimedDelivery]
    ) {
        for (deliveryID, device) in devices {
            result.append(
                ClaimedDelivery(id: deliveryID, device: device, notificationID: notificationID, shared: shared, attempts: attempts, chunk: chunk))
        }
    }

    /// Deletes a chunk with nothing of it left to send; an encrypted notification may lose its

    /// plaintext now.
    private static func endChunk(_ db: Connection, _ chunk: Int64, notificationID: String) async throws {
        try await db.query("DELETE FROM delivery_chunks WHERE id = $1", [.int(chunk)])
        try await Self.forgetPlaintext(db, notificationIDs: [notificationID])
    }

}

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
        throw HeraldError(status: 503, code: "database_unavailable", "the notification could not be stored; try again")
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
            if summary.expanding { counts[.pending, default: 0] += max(0, summary.audienceSize - created) }
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
            let cancelled = stoppedExpansion || failedPending
            if cancelled {
                try await db.query("UPDATE notifications SET cancelled_at = $1 WHERE id = $2 AND cancelled_at IS NULL", [.int(now), .text(id)])
                // Nothing is left to send: an encrypted notification's plaintext goes now.
                try await db.query("UPDATE notifications SET payload = ''::bytea WHERE id = $1 AND placeholder IS NOT NULL", [.text(id)])
            }
            return cancelled
        }
    }

    /// What every delivery of one notification shares, read once per claim.
    private struct Shared {
        var appID: String
        var priority: Priority?
        var expiration: Int64?
        var collapseID: String?
        var payload: [UInt8]
        var placeholder: [UInt8]?
    }

    private static let sharedColumns = "app_id, priority, expiration, collapse_id, payload, placeholder"

    private static func shared(_ row: Row, from first: Int) -> Shared {
        Shared(
            appID: row.string(first) ?? "", priority: row.int(first + 1).flatMap { Priority(rawValue: Int($0)) }, expiration: row.int(first + 2),
            collapseID: row.string(first + 3), payload: row.bytes(first + 4) ?? [], placeholder: row.bytes(first + 5)
        )
    }

    private static let claimedColumns = "id, notification_id, device_id, token, environment, push_type, topic, attempts"

    /// A claimed row: id, notification_id, device_id, token, environment, push_type, topic, attempts.
    private static func claimed(_ row: Row, _ shared: Shared, notificationID: String) -> ClaimedDelivery {
        ClaimedDelivery(
            id: row.int(0) ?? 0, notificationID: notificationID, appID: shared.appID, deviceID: row.int(2) ?? 0,
            token: row.string(3) ?? "", environment: row.string(4).flatMap(APNSEnvironment.init(rawValue:)) ?? .production,
            pushType: row.string(5).flatMap(PushType.init(rawValue:)) ?? .alert, topic: row.string(6) ?? "",
            priority: shared.priority, expiration: shared.expiration, collapseID: shared.collapseID, payload: shared.payload,
            attempts: Int(row.int(7) ?? 0), placeholder: shared.placeholder
        )
    }

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
                var shared: [String: Shared] = [:]
                for row in try await db.query("SELECT id, \(Self.sharedColumns) FROM notifications WHERE id = ANY($1)", [.texts(notificationIDs)]) {
                    shared[row.string(0) ?? ""] = Self.shared(row, from: 1)
                }
                for row in rows {
                    let notificationID = row.string(1) ?? ""
                    guard let common = shared[notificationID] else { continue }
                    result.append(Self.claimed(row, common, notificationID: notificationID))
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

    /// The next chunks of due notifications' audiences, created already leased, until `limit`
    /// are claimed. A notification being expanded is locked (`FOR UPDATE SKIP LOCKED`): another
    /// process takes the next notification, or the same one's next chunk once this commits.
    /// Each chunk is its own savepoint: a notification that cannot be expanded is stopped.
    private static func expand(_ db: Connection, into result: inout [ClaimedDelivery], limit: Int, now: Int64, leaseEnd: Int64) async throws {
        var expanded = 0
        while result.count < limit, expanded < limit {
            var pick = Query("SELECT id, bundle_id, targeting, device_ids IS NOT NULL, expand_after, expand_until, scheduled_at, push_type, local_time, \(Self.sharedColumns)")
            pick.sql += " FROM notifications WHERE expand_after IS NOT NULL AND scheduled_at <= \(pick.bind(.int(now)))"
            pick.sql += " ORDER BY scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
            guard let row = try await db.query(pick).first else { break }
            let id = row.string(0) ?? ""
            let bundleID = row.string(1) ?? ""
            let byList = row.bool(3) ?? false
            let after = row.int(4) ?? 0
            let until = row.int(5) ?? 0
            let scheduledAt = row.int(6) ?? 0
            let pushType = row.string(7).flatMap(PushType.init(rawValue:))
            let localTime = row.string(8).flatMap(LocalTime.init)
            let shared = Self.shared(row, from: 9)
            let targeting = row.string(2).flatMap(Targeting.init(jsonString:))
            if !byList, targeting == nil {
                // Not something Herald wrote: stop expanding it rather than loop on it.
                try await db.query("UPDATE notifications SET expand_after = NULL WHERE id = $1", [.text(id)])
                continue
            }
            let chunk = limit - result.count
            // A local-time notification's deliveries are created pending at each device's own
            // time; the others leased, to be sent now.
            let deferred = localTime != nil
            var insert = Query()
            let bundle = insert.bind(.text(bundleID))
            let (pushTypeSQL, topicSQL) = StoreSQL.pushTypeAndTopic(fixed: pushType, bundle: bundle)
            let notification = insert.bind(.text(id))
            insert.sql = """
                INSERT INTO deliveries (notification_id, device_id, token, environment, push_type, topic, state, attempts, next_attempt_at, updated_at)
                SELECT \(notification), d.id, d.token, d.environment, \(pushTypeSQL), \(topicSQL), 'pending', \(insert.bind(.int(deferred ? 0 : 1))),
                    \(insert.bind(.int(deferred ? scheduledAt : leaseEnd))), \(insert.bind(.int(now)))
                """
            let app = insert.bind(.text(shared.appID))
            let range = "> \(insert.bind(.int(after))) AND d.id <= \(insert.bind(.int(until)))"
            if byList {
                // A resolved list is walked through its ids (devices removed or made inactive since are skipped).
                insert.sql += """
                     FROM notifications n CROSS JOIN LATERAL unnest(n.device_ids) AS u(id) JOIN devices d ON d.id = u.id
                    WHERE n.id = \(notification) AND d.app_id = \(app) AND d.active AND d.id \(range)
                    """
            } else if let targeting {
                insert.sql += " FROM devices d WHERE d.app_id = \(app) AND d.active AND d.id \(range)"
                Self.audienceFilter(targeting, into: &insert)
            }
            insert.sql += " ORDER BY d.id LIMIT \(insert.bind(.int(Int64(chunk)))) RETURNING \(Self.claimedColumns)"
            var count = 0
            var last = after
            let claimedBefore = result.count
            try await db.execute("SAVEPOINT expand")
            do {
                for row in try await db.query(insert) {
                    count += 1
                    last = max(last, row.int(2) ?? last)
                    if !deferred { result.append(Self.claimed(row, shared, notificationID: id)) }
                }
                expanded += count
                if let localTime, count > 0 {
                    try await Self.scheduleLocalTime(db, localTime, notificationID: id, appID: shared.appID, scheduledAt: scheduledAt, after: after, through: last)
                }
                // Fewer than asked for: the audience is exhausted.
                try await db.query("UPDATE notifications SET expand_after = $1 WHERE id = $2", [.int(count < chunk ? nil : last), .text(id)])
                if count < chunk, shared.placeholder != nil {
                    // Expanded and nothing left in flight: an encrypted notification's plaintext goes.
                    try await db.query(
                        """
                        UPDATE notifications SET payload = ''::bytea WHERE id = $1
                            AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = $1 AND x.state = 'pending')
                        """,
                        [.text(id)]
                    )
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
        var sentIDs: [Int64] = []
        var apnsIDs: [String] = []
        var latencies: [Int64] = []
        var attempts: [Int64] = []
        for result in results {
            guard case .sent(let apnsID) = result.outcome else { continue }
            sentIDs.append(result.deliveryID)
            apnsIDs.append(apnsID ?? "")
            latencies.append(result.latencyMilliseconds)
            attempts.append(result.attempt.map(Int64.init) ?? -1)
        }
        return try await self.write { db in
            var outcomes = RecordedOutcomes()
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
                    let written = try await db.query(
                        """
                        UPDATE deliveries SET status = $1, reason = $2, latency_ms = $3, next_attempt_at = $4, updated_at = $5
                        WHERE id = $6 AND ($7::bigint IS NULL OR attempts = $7::bigint) RETURNING id
                        """,
                        [.int(status.map(Int64.init)), .text(reason), latency, .int(retryAt), .int(now), id, attempt]
                    )
                    if !written.isEmpty { outcomes.applied.insert(result.deliveryID) }
                case .failed(let status, let reason, let invalidate, let timestamp):
                    let written = try await db.query(
                        """
                        UPDATE deliveries SET state = 'failed', status = $1, reason = $2, latency_ms = $3, updated_at = $4
                        WHERE id = $5 AND ($6::bigint IS NULL OR attempts = $6::bigint) RETURNING id
                        """,
                        [.int(status.map(Int64.init)), .text(reason), latency, .int(now), id, attempt]
                    )
                    // Fenced out: a newer claim answers for this delivery, and its device.
                    guard !written.isEmpty else { continue }
                    outcomes.applied.insert(result.deliveryID)
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
        try await self.write { db in
            try await db.query(
                """
                UPDATE notifications SET payload = ''::bytea WHERE id = ANY($1) AND placeholder IS NOT NULL AND expand_after IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id AND x.state = 'pending')
                """,
                [.texts(notificationIDs)]
            )
        }
    }

    public func prune(before: Int64, limit: Int) async throws -> Int {
        try await self.write { db in
            let deleted = try await db.query(
                """
                DELETE FROM deliveries WHERE id IN (
                    SELECT id FROM deliveries WHERE state != 'pending' AND updated_at < $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
                RETURNING id
                """,
                [.int(before), .int(Int64(limit))]
            ).count
            try await db.query(
                """
                DELETE FROM notifications WHERE created_at < $1 AND expand_after IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.notification_id = notifications.id)
                """,
                [.int(before)]
            )
            return deleted
        }
    }

    public func pendingDeliveries() async throws -> Int {
        try await self.read { db in Int(try await db.query("SELECT count(*) FROM deliveries WHERE state = 'pending'").first?.int(0) ?? 0) }
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

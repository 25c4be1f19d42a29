// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore
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
        case .channel:
            // A channel's subscribers are Apple's: no device of Herald's.
            query.sql += " AND false"
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
        Self.deviceFilter(targeting, into: &query)
    }

    /// Appends the conditions on each device's kind, environment, key and attributes.
    static func deviceFilter(_ targeting: Targeting, into query: inout Query) {
        let kinds = targeting.eligibleKinds
        if !kinds.isEmpty {
            query.sql += " AND d.kind = ANY(\(query.bind(.texts(kinds.map(\.rawValue).sorted()))))"
        }
        if let routes = targeting.routeCondition {
            query.sql += " AND " + routes
        }
        if targeting.encrypted {
            query.sql += " AND d.public_key IS NOT NULL"
        }
        if let attributesType = targeting.attributesType {
            query.sql += " AND d.attributes_type = \(query.bind(.text(attributesType)))"
        }
    }

    package func audienceKinds(appID: String, targeting: Targeting) async throws -> [DeviceKind: Int] {
        try await self.read { db in
            var query = Query()
            let head = "SELECT d.kind, count(*) FROM devices d WHERE d.app_id = \(query.bind(.text(appID))) AND d.active"
            query.sql = head
            Self.audienceFilter(targeting, into: &query)
            query.sql += " GROUP BY d.kind"
            var counts: [DeviceKind: Int] = [:]
            for row in try await db.query(query) {
                if let kind = row.string(0).flatMap(DeviceKind.init(rawValue:)) { counts[kind] = Int(row.int(1) ?? 0) }
            }
            return counts
        }
    }

    package func createNotification(
        appID: String, id: String, bundleID: String, _ spec: NotificationSpec, now: Int64
    ) async throws
        -> CreatedNotification
    {
        // The audience is every matching device that exists now (ids up to the newest). A list
        // (tokens, users, one activity) is resolved to device ids once; "all" and tags are
        // counted, and walked by id range when expanded.
        let targeting = spec.targeting
        // A token list's unknown and inactive tokens are counted here too, in the same snapshot.
        let (until, size, deviceIDs, listed) = try await self.read { db -> (Int64, Int64, [Int64]?, (unknown: Int, inactive: Int)?) in
            let until = try await db.query("SELECT coalesce(max(id), 0) FROM devices").first?.int(0) ?? 0
            var query = Query()
            let (app, last) = (query.bind(.text(appID)), query.bind(.int(until)))
            let head = " FROM devices d WHERE d.app_id = \(app) AND d.active AND d.id <= \(last)"
            switch targeting.audience {
            case .tokens(let tokens):
                // One lookup per distinct token gives both the deliveries and the answer's
                // counts: no device (unknown), an inactive one, or one the filter keeps.
                query.sql = "SELECT d.id, d.active, (d.id <= \(last)"
                Self.deviceFilter(targeting, into: &query)
                // Each token looked up in the (app_id, token) index: joined, the planner chose
                // to read every device of the app for a list of 1,000 (a hash join).
                query.sql += """
                    ) FROM (SELECT DISTINCT unnest(\(query.bind(.texts(tokens)))::text[]) AS token) t
                        LEFT JOIN LATERAL (SELECT * FROM devices WHERE app_id = \(app) AND token = t.token LIMIT 1) d ON TRUE
                    """
                var ids: [Int64] = []
                var listed = (unknown: 0, inactive: 0)
                for row in try await db.query(query) {
                    guard let id = row.int(0) else {
                        listed.unknown += 1
                        continue
                    }
                    if row.bool(1) == false {
                        listed.inactive += 1
                    } else if row.bool(2) == true {
                        ids.append(id)
                    }
                }
                ids.sort()
                return (until, Int64(ids.count), ids, listed)
            case .users, .activity:
                query.sql = "SELECT d.id" + head
                Self.audienceFilter(targeting, into: &query)
                query.sql += " ORDER BY d.id"
                let ids = try await db.query(query).compactMap { $0.int(0) }
                return (until, Int64(ids.count), ids, nil)
            case .all, .tags, .channel:
                query.sql = "SELECT count(*)" + head
                Self.audienceFilter(targeting, into: &query)
                return (until, try await db.query(query).first?.int(0) ?? 0, nil, nil)
            }
        }
        let targetingText = targeting.jsonString(listsAsCounts: deviceIDs != nil)
        // The unique (app, idempotency key) decides between processes racing with one key. The
        // first notification could be deleted (retention) between the insert and the lookup: then
        // the insert is tried again.
        for _ in 0..<3 {
            let outcome = try await self.write { db -> CreatedNotification? in
                let inserted = try await db.query(
                    """
                    INSERT INTO notifications (id, app_id, bundle_id, priority, expiration, collapse_id, payload, created_at, scheduled_at,
                        idempotency_key, targeting, device_ids, audience_size, expand_after, expand_until, push_type, local_time, placeholder,
                        on_unknown_outcome, quiet_hours, frequency_cap, throttle_per_minute, template, parts)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
                    ON CONFLICT (app_id, idempotency_key) DO NOTHING
                    RETURNING id
                    """,
                    [
                        .text(id), .text(appID), .text(bundleID), .int(spec.priority.map { Int64($0.rawValue) }), .int(spec.expiration),
                        .text(spec.collapseID),
                        .bytes(NotificationPolicy.storedPayload(spec, audienceSize: size)), .int(now), .int(spec.scheduledAt ?? now),
                        .text(spec.idempotencyKey), .text(targetingText), deviceIDs.map(Value.ints) ?? .int(nil), .int(size),
                        .int(NotificationPolicy.expandAfter(audienceSize: size)), .int(until), .text(targeting.pushType?.rawValue),
                        .text(targeting.localTime?.description),
                        .bytes(spec.placeholder), .text(NotificationPolicy.storedUnknownOutcome(spec)), .text(spec.quietHours?.description),
                        .text(spec.frequencyCap?.description), .int(spec.throttlePerMinute.map { Int64($0) }), .text(spec.template?.stored),
                        .bytes(NotificationParts.write(spec.parts)),
                    ]
                )
                guard inserted.isEmpty else {
                    return CreatedNotification(
                        id: id, deliveries: Int(size), existing: false, unknownTokens: listed?.unknown, inactiveTokens: listed?.inactive
                    )
                }
                guard let key = spec.idempotencyKey,
                    let existing = try await db.query(
                        "SELECT id, audience_size FROM notifications WHERE app_id = $1 AND idempotency_key = $2", [.text(appID), .text(key)]
                    ).first, let existingID = existing.string(0)
                else { return nil }
                return CreatedNotification(id: existingID, deliveries: Int(existing.int(1) ?? 0), existing: true)
            }
            if let outcome { return outcome }
        }
        throw HeraldError(code: "database_unavailable", "the notification could not be stored; try again")
    }

    package func notification(appID: String, id: String, deliveryLimit: Int) async throws -> NotificationStatus? {
        try await self.snapshot { db in
            guard
                let row = try await db.query(
                    "SELECT \(StoreSQL.summaryColumns) FROM notifications WHERE app_id = $1 AND id = $2", [.text(appID), .text(id)]
                ).first
            else { return nil }
            let summary = NotificationSummary(row: row)
            var rows: [DeliveryState: Int] = [:]
            var created = 0
            for row in try await db.query("SELECT state, count(*) FROM deliveries WHERE notification_id = $1 GROUP BY state", [.text(id)]) {
                let count = Int(row.int(1) ?? 0)
                created += count
                if let state = row.string(0).flatMap(DeliveryState.init(rawValue:)) { rows[state] = count }
            }
            let inFlight = try await db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = $1", [.text(id)]).first?.int(0) ?? 0
            let counts = NotificationPolicy.counts(rows, created: created, summary: summary, chunksInFlight: inFlight)
            let deliveries = try await db.query(
                "SELECT \(StoreSQL.deliveryColumns) FROM deliveries x LEFT JOIN devices d ON d.id = x.device_id WHERE x.notification_id = $1 ORDER BY x.id LIMIT $2",
                [.text(id), .int(Int64(deliveryLimit))]
            ).map(DeliveryRecord.init(row:))
            return NotificationStatus(summary: summary, counts: counts, deliveries: deliveries)
        }
    }

    package func notifications(appID: String, limit: Int, before: Int64?, after: NotificationPosition?) async throws -> [NotificationSummary] {
        try await self.read { db in
            // (created_at, id) is unique: a page ends at a row and the next starts right after it,
            // even among notifications created in the same millisecond (index notifications_page).
            // The ids compare in the column's collation, in the WHERE as in the ORDER BY.
            let bound = NotificationPosition.bound(before: before, after: after)
            return try await db.query(
                """
                SELECT \(StoreSQL.summaryColumns) FROM notifications
                WHERE app_id = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $4
                """,
                [.text(appID), .int(bound.createdAt), .text(bound.id), .int(Int64(limit))]
            ).map(NotificationSummary.init(row:))
        }
    }

    package func deliveries(appID: String, token: String, limit: Int, beforeID: Int64?) async throws -> [DeliveryRecord] {
        try await self.read { db in
            try await db.query(
                """
                SELECT \(StoreSQL.deliveryColumns) FROM devices d
                JOIN (SELECT id FROM notifications WHERE app_id = $1 ORDER BY created_at DESC LIMIT $3) n ON TRUE
                JOIN deliveries x ON x.notification_id = n.id AND x.device_id = d.id
                WHERE d.app_id = $1 AND d.token = $2 AND x.id < $5 ORDER BY x.id DESC LIMIT $4
                """,
                [.text(appID), .text(token), .int(Int64(NotificationPolicy.historyDepth)), .int(Int64(limit)), .int(beforeID ?? Int64.max)]
            ).map(DeliveryRecord.init(row:))
        }
    }

    package func cancelNotification(appID: String, id: String, now: Int64) async throws -> Bool {
        try await self.write { db in
            // Locks the notification: a process expanding it finishes its chunk first.
            guard
                let found = try await db.query(
                    "SELECT cancelled_at FROM notifications WHERE app_id = $1 AND id = $2 FOR UPDATE", [.text(appID), .text(id)]
                ).first
            else { return false }
            let alreadyCancelled = found.int(0) != nil
            let stoppedExpansion =
                try await db.query(
                    "UPDATE notifications SET expand_after = NULL, cancelled_at = $1 WHERE app_id = $2 AND id = $3 AND expand_after IS NOT NULL RETURNING id",
                    [.int(now), .text(appID), .text(id)]
                ).isEmpty == false
            let failedPending =
                try await db.query(
                    """
                    UPDATE deliveries SET state = 'failed', reason = 'Cancelled', updated_at = $1
                    WHERE state = 'pending' AND notification_id = (SELECT id FROM notifications WHERE app_id = $2 AND id = $3) RETURNING id
                    """,
                    [.int(now), .text(appID), .text(id)]
                ).isEmpty == false
            let inFlight = try await db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = $1", [.text(id)]).first?.int(0) ?? 0
            let cancelled = NotificationPolicy.cancelled(
                stoppedExpansion: stoppedExpansion, failedPending: failedPending, chunksInFlight: inFlight, alreadyCancelled: alreadyCancelled
            )
            if cancelled {
                try await db.query("UPDATE notifications SET cancelled_at = $1 WHERE id = $2 AND cancelled_at IS NULL", [.int(now), .text(id)])
                try await db.query(
                    "UPDATE notifications SET payload = ''::bytea, template = NULL WHERE id = $1 AND placeholder IS NOT NULL", [.text(id)])
            }
            return cancelled
        }
    }

    package func pendingDeliveries() async throws -> Int {
        // Chunks in flight count their deliveries too.
        try await self.read { db in
            Int(
                try await db.query(
                    "SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending') + (SELECT coalesce(sum(size), 0) FROM delivery_chunks)"
                ).first?.int(0) ?? 0
            )
        }
    }

    package func deliveryCounts() async throws -> [DeliveryState: Int] {
        try await self.read { db in
            var counts: [DeliveryState: Int] = [:]
            for row in try await db.query("SELECT state, count(*) FROM deliveries GROUP BY state") {
                if let state = row.string(0).flatMap(DeliveryState.init(rawValue:)) { counts[state] = Int(row.int(1) ?? 0) }
            }
            return counts
        }
    }
}

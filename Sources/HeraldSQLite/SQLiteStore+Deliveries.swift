// SPDX-License-Identifier: Apache-2.0
import APNSModels
public import HeraldCore

extension SQLiteStore {
    /// `CASE` expressions giving each device's push type and topic, from the kind table (enum
    /// values only, never caller input, go into the SQL text).
    private static func pushTypeAndTopic(fixed: PushType?) -> (pushType: String, topic: String) {
        var pushTypeCases = "CASE d.kind"
        var topicCases = "CASE d.kind"
        for kind in DeviceKind.allCases {
            let pushType = fixed ?? kind.defaultPushType
            pushTypeCases += " WHEN '\(kind.rawValue)' THEN '\(pushType.rawValue)'"
            topicCases += " WHEN '\(kind.rawValue)' THEN ?1 || '\(pushType.topicSuffix ?? "")'"
        }
        return (pushTypeCases + " END", topicCases + " END")
    }

    public func createNotification(appID: String, id: String, bundleID: String, _ spec: NotificationSpec, now: Int64) async throws
        -> (id: String, deliveries: Int, existing: Bool)
    {
        try await self.database.write { db in
            if let key = spec.idempotencyKey,
                let existing = try db.query("SELECT id FROM notifications WHERE app_id = ? AND idempotency_key = ?", [.text(appID), .text(key)]).first,
                let existingID = existing[0].string
            {
                let count = try db.query("SELECT count(*) FROM deliveries WHERE notification_id = ?", [.text(existingID)]).first?[0].int ?? 0
                return (existingID, Int(count), true)
            }
            let scheduledAt = spec.scheduledAt ?? now
            try db.query(
                """
                INSERT INTO notifications (id, app_id, priority, expiration, collapse_id, payload, created_at, scheduled_at, idempotency_key)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(id), .text(appID), spec.priority.map { .integer(Int64($0.rawValue)) } ?? .null,
                    spec.expiration.map(SQLValue.integer) ?? .null, spec.collapseID.map(SQLValue.text) ?? .null,
                    .blob(spec.payload), .integer(now), .integer(scheduledAt), spec.idempotencyKey.map(SQLValue.text) ?? .null,
                ]
            )
            // ?1 bundle id, ?2 notification id, ?3 due time, ?4 app id, then the audience's own.
            let (pushType, topic) = Self.pushTypeAndTopic(fixed: spec.pushType)
            var sql = """
                INSERT INTO deliveries (notification_id, device_id, token, environment, push_type, topic, state, next_attempt_at, updated_at)
                SELECT ?2, d.id, d.token, d.environment, \(pushType), \(topic), 'pending', ?3, ?3
                FROM devices d WHERE d.app_id = ?4 AND d.active = 1
                """
            var bindings: [SQLValue] = [.text(bundleID), .text(id), .integer(scheduledAt), .text(appID)]
            func list(_ values: [String]) -> SQLValue {
                .text(JSONValue.array(values.map(JSONValue.string)).jsonString)
            }
            switch spec.audience {
            case .all:
                break
            case .tokens(let tokens):
                bindings.append(list(tokens))
                sql += " AND d.token IN (SELECT value FROM json_each(?\(bindings.count)))"
            case .users(let users):
                bindings.append(list(users))
                sql += " AND d.user_id IN (SELECT value FROM json_each(?\(bindings.count)))"
            case .activity(let activityID):
                bindings.append(.text(activityID))
                sql += " AND d.kind = 'liveactivity' AND d.activity_id = ?\(bindings.count)"
            case .tags(let tags, let matchAll):
                bindings.append(list(tags))
                let listParameter = bindings.count
                if matchAll {
                    bindings.append(.integer(Int64(Set(tags).count)))
                    sql += """
                         AND (SELECT count(*) FROM device_tags t WHERE t.device_id = d.id
                            AND t.tag IN (SELECT value FROM json_each(?\(listParameter)))) = ?\(bindings.count)
                        """
                } else {
                    sql += " AND d.id IN (SELECT device_id FROM device_tags WHERE tag IN (SELECT value FROM json_each(?\(listParameter))))"
                }
            }
            var kinds = spec.kinds
            if let fixed = spec.pushType {
                // Only kinds that can receive the requested push type.
                let able = Set(DeviceKind.allCases.filter { $0.pushTypes.contains(fixed) })
                kinds = kinds.isEmpty ? able : kinds.intersection(able)
            }
            if !kinds.isEmpty {
                bindings.append(list(kinds.map(\.rawValue).sorted()))
                sql += " AND d.kind IN (SELECT value FROM json_each(?\(bindings.count)))"
            }
            if let environment = spec.environment {
                bindings.append(.text(environment.rawValue))
                sql += " AND d.environment = ?\(bindings.count)"
            }
            try db.query(sql, bindings)
            let count = db.changes
            if let localTime = spec.localTime {
                // One update per time zone among the recipients.
                let zones = try db.query(
                    "SELECT DISTINCT d.time_zone FROM deliveries x JOIN devices d ON d.id = x.device_id WHERE x.notification_id = ?",
                    [.text(id)]
                ).map { $0[0].string }
                for zone in zones {
                    let due = max(scheduledAt, localTime.instant(timeZone: zone))
                    try db.query(
                        "UPDATE deliveries SET next_attempt_at = ?1, updated_at = ?1 WHERE notification_id = ?2 "
                            + "AND device_id IN (SELECT id FROM devices WHERE app_id = ?3 AND time_zone IS ?4)",
                        [.integer(due), .text(id), .text(appID), zone.map(SQLValue.text) ?? .null]
                    )
                }
            }
            return (id, count, false)
        }
    }

    public func notification(appID: String, id: String, deliveryLimit: Int) async throws -> NotificationStatus? {
        try await self.database.read { db in
            guard let row = try db.query("SELECT id, app_id, created_at, scheduled_at FROM notifications WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]).first else {
                return nil
            }
            var counts: [DeliveryState: Int] = [:]
            for count in try db.query("SELECT state, count(*) FROM deliveries WHERE notification_id = ? GROUP BY state", [.text(id)]) {
                if let state = count[0].string.flatMap(DeliveryState.init(rawValue:)) { counts[state] = Int(count[1].int ?? 0) }
            }
            let deliveries = try db.query(
                """
                SELECT x.id, x.token, d.kind, x.environment, x.push_type, x.state, x.attempts, x.apns_id, x.status, x.reason, x.latency_ms
                FROM deliveries x LEFT JOIN devices d ON d.id = x.device_id WHERE x.notification_id = ? ORDER BY x.id LIMIT ?
                """,
                [.text(id), .integer(Int64(deliveryLimit))]
            ).map { row in
                DeliveryRecord(
                    id: row[0].int ?? 0, token: row[1].string ?? "", kind: row[2].string.flatMap(DeviceKind.init(rawValue:)),
                    environment: row[3].string.flatMap(APNSEnvironment.init(rawValue:)) ?? .production,
                    pushType: row[4].string.flatMap(PushType.init(rawValue:)) ?? .alert,
                    state: row[5].string.flatMap(DeliveryState.init(rawValue:)) ?? .pending, attempts: Int(row[6].int ?? 0),
                    apnsID: row[7].string, status: row[8].int.map(Int.init), reason: row[9].string, latencyMilliseconds: row[10].int
                )
            }
            return NotificationStatus(
                id: row[0].string ?? "", appID: row[1].string ?? "", createdAt: row[2].int ?? 0, scheduledAt: row[3].int ?? 0,
                counts: counts, deliveries: deliveries
            )
        }
    }

    public func cancelNotification(appID: String, id: String, now: Int64) async throws -> Bool {
        try await self.database.write { db in
            try db.query(
                """
                UPDATE deliveries SET state = 'failed', reason = 'Cancelled', lease_until = NULL, updated_at = ?
                WHERE state = 'pending' AND notification_id = (SELECT id FROM notifications WHERE app_id = ? AND id = ?)
                """,
                [.integer(now), .text(appID), .text(id)]
            )
            return db.changes > 0
        }
    }

    public func claimDeliveries(limit: Int, now: Int64, leaseMilliseconds: Int64) async throws -> [ClaimedDelivery] {
        try await self.database.write { db in
            let claimed = try db.query(
                """
                UPDATE deliveries SET lease_until = ?1, attempts = attempts + 1, updated_at = ?2
                WHERE id IN (SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= ?2
                    AND (lease_until IS NULL OR lease_until <= ?2) ORDER BY next_attempt_at, id LIMIT ?3)
                RETURNING id, notification_id, device_id, token, environment, push_type, topic, attempts
                """,
                [.integer(now + leaseMilliseconds), .integer(now), .integer(Int64(limit))]
            )
            var notifications: [String: (appID: String, priority: Int64?, expiration: Int64?, collapseID: String?, payload: [UInt8])] = [:]
            var result: [ClaimedDelivery] = []
            result.reserveCapacity(claimed.count)
            for row in claimed {
                let notificationID = row[1].string ?? ""
                if notifications[notificationID] == nil,
                    let n = try db.query("SELECT app_id, priority, expiration, collapse_id, payload FROM notifications WHERE id = ?", [.text(notificationID)]).first
                {
                    notifications[notificationID] = (n[0].string ?? "", n[1].int, n[2].int, n[3].string, n[4].bytes ?? [])
                }
                guard let notification = notifications[notificationID] else { continue }
                result.append(
                    ClaimedDelivery(
                        id: row[0].int ?? 0, notificationID: notificationID, appID: notification.appID, deviceID: row[2].int ?? 0,
                        token: row[3].string ?? "", environment: row[4].string.flatMap(APNSEnvironment.init(rawValue:)) ?? .production,
                        pushType: row[5].string.flatMap(PushType.init(rawValue:)) ?? .alert, topic: row[6].string ?? "",
                        priority: notification.priority.flatMap { Priority(rawValue: Int($0)) }, expiration: notification.expiration,
                        collapseID: notification.collapseID, payload: notification.payload, attempts: Int(row[7].int ?? 0)
                    )
                )
            }
            return result
        }
    }

    public func record(_ results: [DeliveryResult], now: Int64) async throws {
        guard !results.isEmpty else { return }
        // Accepted ones, the bulk of every batch, in one statement over a JSON array of
        // [id, apns-id, latency]; the rest one by one.
        var sent: [JSONValue] = []
        for result in results {
            if case .sent(let apnsID) = result.outcome {
                sent.append(.array([.int(result.deliveryID), apnsID.map(JSONValue.string) ?? .null, .int(result.latencyMilliseconds)]))
            }
        }
        let sentList = sent.isEmpty ? nil : JSONValue.array(sent).jsonString
        try await self.database.write { db in
            if let sentList {
                try db.query(
                    """
                    UPDATE deliveries SET state = 'sent', apns_id = v.apns_id, status = 200, reason = NULL, latency_ms = v.latency,
                        lease_until = NULL, updated_at = ?1
                    FROM (SELECT value ->> 0 AS id, value ->> 1 AS apns_id, value ->> 2 AS latency FROM json_each(?2)) AS v
                    WHERE deliveries.id = v.id
                    """,
                    [.integer(now), .text(sentList)]
                )
            }
            for result in results {
                let id = SQLValue.integer(result.deliveryID)
                let latency = SQLValue.integer(result.latencyMilliseconds)
                switch result.outcome {
                case .sent:
                    continue
                case .retry(let status, let reason, let retryAt):
                    try db.query(
                        "UPDATE deliveries SET status = ?, reason = ?, latency_ms = ?, lease_until = NULL, next_attempt_at = ?, updated_at = ? WHERE id = ?",
                        [status.map { .integer(Int64($0)) } ?? .null, .text(reason), latency, .integer(retryAt), .integer(now), id]
                    )
                case .failed(let status, let reason, let invalidate, let timestamp):
                    try db.query(
                        "UPDATE deliveries SET state = 'failed', status = ?, reason = ?, latency_ms = ?, lease_until = NULL, updated_at = ? WHERE id = ?",
                        [status.map { .integer(Int64($0)) } ?? .null, .text(reason), latency, .integer(now), id]
                    )
                    if invalidate {
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
                        try db.query(
                            """
                            INSERT INTO invalidations (app_id, device_id, reason, apns_timestamp, at, applied)
                            SELECT n.app_id, x.device_id, ?, ?, ?, ? FROM deliveries x JOIN notifications n ON n.id = x.notification_id WHERE x.id = ?
                            """,
                            [.text(reason), timestamp.map(SQLValue.integer) ?? .null, .integer(now), .integer(applied ? 1 : 0), id]
                        )
                    }
                }
            }
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

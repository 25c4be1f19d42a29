// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

extension SQLiteStore {
    /// The conditions (after `d.app_id = ? AND d.active = 1`) that pick a targeting's devices
    /// from `devices d`, with their bindings numbered from `first`; and how to name the device id
    /// in range conditions: for lists of tokens, users or one activity, `+d.id`, which keeps
    /// SQLite from walking the whole id range instead of the index on those columns.
    /// `sql` is the audience's condition followed by `rest`, the conditions on each device's kind,
    /// environment, key and attributes; the audience's own binding, if any, comes first.
    static func audienceFilter(_ targeting: Targeting, first: Int) -> (sql: String, rest: String, bindings: [SQLValue], id: String) {
        var sql = ""
        var bindings: [SQLValue] = []
        func next(_ value: SQLValue) -> String {
            bindings.append(value)
            return "?\(first + bindings.count - 1)"
        }
        func list(_ values: [String]) -> SQLValue { .text(Self.jsonStrings(values)) }
        switch targeting.audience {
        case .all:
            break
        case .tokens(let tokens):
            sql += " AND d.token IN (SELECT value FROM json_each(\(next(list(tokens)))))"
        case .users(let users):
            sql += " AND d.user_id IN (SELECT value FROM json_each(\(next(list(users)))))"
        case .activity(let activityID):
            sql += " AND d.kind = 'liveactivity' AND d.activity_id = \(next(.text(activityID)))"
        case .channel:
            // A channel's subscribers are Apple's: no device of Herald's.
            sql += " AND 0"
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
        let audience = sql
        sql = ""
        let kinds = targeting.eligibleKinds
        if !kinds.isEmpty {
            // Herald's own names, spelled into the statement: no JSON to parse per statement.
            sql += " AND d.kind IN (" + kinds.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ") + ")"
        }
        if let routes = targeting.routeCondition {
            sql += " AND " + routes
        }
        if targeting.encrypted {
            sql += " AND d.public_key IS NOT NULL"
        }
        if let attributesType = targeting.attributesType {
            sql += " AND d.attributes_type = \(next(.text(attributesType)))"
        }
        return (audience + sql, sql, bindings, targeting.audience.isList ? "+d.id" : "d.id")
    }

    package func audienceKinds(appID: String, targeting: Targeting) async throws -> [DeviceKind: Int] {
        let filter = Self.audienceFilter(targeting, first: 2)
        return try await self.database.read { db in
            var counts: [DeviceKind: Int] = [:]
            try db.each(
                "SELECT d.kind, count(*) FROM devices d WHERE d.app_id = ?1 AND d.active = 1" + filter.sql + " GROUP BY d.kind",
                [.text(appID)] + filter.bindings
            ) { row in
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
        // (tokens, users, one activity) is resolved to device ids, once, on the writer's
        // connection in the notification's own transaction: a reader's page cache is emptied
        // whenever the writer has committed since that reader last read, so under steady writes
        // (the engine's records) each lookup read its index pages again from the file
        // (`Benchmarks/floor.sh`, a lookup under writes), while the writer's cache holds them.
        // "All", tags and a channel are counted on a reader beside the writer (a count over
        // every device of the app would hold up every write), and walked by id range when
        // expanded. A device that goes away before its chunk is expanded is skipped then.
        let targeting = spec.targeting
        // A token list is looked up once per distinct token (deduplicated here: cheaper than
        // SQLite's DISTINCT); the targeting stored keeps the list as it was asked.
        var lookup = targeting
        if case .tokens(let tokens) = targeting.audience {
            var seen = Set<String>(minimumCapacity: tokens.count)
            lookup.audience = .tokens(tokens.filter { seen.insert($0).inserted })
        }
        let filter = Self.audienceFilter(lookup, first: 3)
        let counted: ResolvedAudience? =
            targeting.audience.isList
            ? nil
            : try await self.database.read { db in
                try Self.resolveAudience(db, appID: appID, audience: targeting.audience, filter: filter)
            }
        return try await self.database.write { db in
            if let key = spec.idempotencyKey,
                let existing = try db.query(
                    "SELECT id, audience_size FROM notifications WHERE app_id = ? AND idempotency_key = ?", [.text(appID), .text(key)]
                ).first,
                let existingID = existing[0].string
            {
                return CreatedNotification(id: existingID, deliveries: Int(existing[1].int ?? 0), existing: true)
            }
            // A token list's unknown and inactive tokens are counted here too: the same snapshot
            // as the deliveries.
            let (until, size, deviceIDs, listed) = try counted ?? Self.resolveAudience(db, appID: appID, audience: targeting.audience, filter: filter)
            // A resolved list is kept as its device ids; the targeting then records only its length.
            let targetingText = targeting.jsonString(listsAsCounts: deviceIDs != nil)
            try db.query(
                """
                INSERT INTO notifications (id, app_id, bundle_id, priority, expiration, collapse_id, payload, created_at, scheduled_at,
                    idempotency_key, targeting, device_ids, audience_size, expand_after, expand_until, push_type, local_time, placeholder,
                    on_unknown_outcome, quiet_hours, frequency_cap, throttle_per_minute, template, parts)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(id), .text(appID), .text(bundleID), spec.priority.map { .integer(Int64($0.rawValue)) } ?? .null,
                    spec.expiration.map(SQLValue.integer) ?? .null, spec.collapseID.map(SQLValue.text) ?? .null,
                    .blob(NotificationPolicy.storedPayload(spec, audienceSize: size)), .integer(now), .integer(spec.scheduledAt ?? now),
                    spec.idempotencyKey.map(SQLValue.text) ?? .null,
                    .text(targetingText), deviceIDs.map(SQLValue.text) ?? .null, .integer(size),
                    NotificationPolicy.expandAfter(audienceSize: size).map(SQLValue.integer) ?? .null, .integer(until),
                    targeting.pushType.map { .text($0.rawValue) } ?? .null,
                    targeting.localTime.map { .text($0.description) } ?? .null, spec.placeholder.map(SQLValue.blob) ?? .null,
                    NotificationPolicy.storedUnknownOutcome(spec).map(SQLValue.text) ?? .null,
                    spec.quietHours.map { .text($0.description) } ?? .null, spec.frequencyCap.map { .text($0.description) } ?? .null,
                    spec.throttlePerMinute.map { .integer(Int64($0)) } ?? .null,
                    spec.template.map { .text($0.stored) } ?? .null, NotificationParts.write(spec.parts).map(SQLValue.blob) ?? .null,
                ]
            )
            return CreatedNotification(
                id: id, deliveries: Int(size), existing: false, unknownTokens: listed?.unknown, inactiveTokens: listed?.inactive)
        }
    }

    /// An audience as found at acceptance: the newest device id (`until`), how many devices, a
    /// list's sorted device ids as a JSON array, and for tokens, how many were unknown or inactive.
    private typealias ResolvedAudience = (until: Int64, size: Int64, deviceIDs: String?, listed: (unknown: Int, inactive: Int)?)

    /// The devices that exist now that the audience names: a list resolved to their ids; "all",
    /// tags and a channel only counted.
    private static func resolveAudience(
        _ db: borrowing SQLiteDatabase.Connection, appID: String, audience: Audience,
        filter: (sql: String, rest: String, bindings: [SQLValue], id: String)
    ) throws -> ResolvedAudience {
        let until = try db.query("SELECT coalesce(max(id), 0) FROM devices").first?[0].int ?? 0
        let head = "FROM devices d WHERE d.app_id = ?1 AND d.active = 1 AND \(filter.id) <= ?2" + filter.sql
        let bindings: [SQLValue] = [.text(appID), .integer(until)] + filter.bindings
        guard audience.isList else {
            return (until, try db.query("SELECT count(*) " + head, bindings).first?[0].int ?? 0, nil, nil)
        }
        // No ORDER BY: it would tempt SQLite to walk every device of the app in id order
        // instead of looking each token (or user) up in its index.
        var ids: [Int64] = []
        var listed: (unknown: Int, inactive: Int)?
        if case .tokens = audience {
            // One lookup per distinct token (?3) gives both the deliveries and the
            // answer's counts: no device (unknown), an inactive one, or one the filter
            // keeps. Each is found in the (app_id, token) index, and whether it is
            // inactive in `devices_inactive`: an active device's row is not read unless
            // the filter asks for one of its columns (an inactive one's may be, by SQLite
            // before 3.51).
            var counts = (unknown: 0, inactive: 0)
            try db.each(
                """
                SELECT d.id, EXISTS (SELECT 1 FROM devices i INDEXED BY devices_inactive
                    WHERE i.app_id = ?1 AND i.token = t.value AND i.active = 0), (\(filter.id) <= ?2\(filter.rest))
                FROM json_each(?3) t LEFT JOIN devices d ON d.app_id = ?1 AND d.token = t.value
                """,
                bindings
            ) { row in
                guard let id = row.int(0) else {
                    counts.unknown += 1
                    return
                }
                if row.int(1) == 1 {
                    counts.inactive += 1
                } else if row.int(2) == 1 {
                    ids.append(id)
                }
            }
            listed = counts
        } else {
            try db.each("SELECT d.id " + head, bindings) { row in ids.append(row.int(0) ?? 0) }
        }
        ids.sort()
        var text: [UInt8] = [UInt8(ascii: "[")]
        for (index, deviceID) in ids.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            text += String(deviceID).utf8
        }
        text.append(UInt8(ascii: "]"))
        return (until, Int64(ids.count), String(decoding: text, as: UTF8.self), listed)
    }

    /// `values` as a JSON array of strings. Strings with nothing to escape (device tokens are
    /// hex) are joined as they are, which is much cheaper for a list of 10,000 tokens than
    /// building and serializing a JSON value.
    static func jsonStrings(_ values: [String]) -> String {
        guard !values.isEmpty else { return "[]" }
        let plain = values.allSatisfy { $0.utf8.allSatisfy { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") } }
        guard plain else { return JSONValue.array(values.map(JSONValue.string)).jsonString }
        return "[\"" + values.joined(separator: "\",\"") + "\"]"
    }

    package func notification(appID: String, id: String, deliveryLimit: Int) async throws -> NotificationStatus? {
        try await self.database.read { db in
            var found: NotificationSummary?
            try db.each("SELECT \(StoreSQL.summaryColumns) FROM notifications WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]) {
                found = NotificationSummary(row: $0)
            }
            guard let summary = found else { return nil }
            var rows: [DeliveryState: Int] = [:]
            var created = 0
            try db.each("SELECT state, count(*) FROM deliveries WHERE notification_id = ? GROUP BY state", [.text(id)]) { row in
                let count = Int(row.int(1) ?? 0)
                created += count
                if let state = row.string(0).flatMap(DeliveryState.init(rawValue:)) { rows[state] = count }
            }
            let inFlight = try db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = ?", [.text(id)]).first?[0].int ?? 0
            let counts = NotificationPolicy.counts(rows, created: created, summary: summary, chunksInFlight: inFlight)
            var deliveries: [DeliveryRecord] = []
            try db.each(
                "SELECT \(StoreSQL.deliveryColumns) FROM deliveries x LEFT JOIN devices d ON d.id = x.device_id WHERE x.notification_id = ? ORDER BY x.id LIMIT ?",
                [.text(id), .integer(Int64(deliveryLimit))]
            ) { deliveries.append(DeliveryRecord(row: $0)) }
            return NotificationStatus(summary: summary, counts: counts, deliveries: deliveries)
        }
    }

    package func notifications(appID: String, limit: Int, before: Int64?, after: NotificationPosition?) async throws -> [NotificationSummary] {
        try await self.database.read { db in
            var result: [NotificationSummary] = []
            // (created_at, id) is unique: a page ends at a row and the next starts right after it,
            // even among notifications created in the same millisecond (index notifications_page).
            let bound = NotificationPosition.bound(before: before, after: after)
            try db.each(
                """
                SELECT \(StoreSQL.summaryColumns) FROM notifications
                WHERE app_id = ?1 AND (created_at, id) < (?2, ?3) ORDER BY created_at DESC, id DESC LIMIT ?4
                """,
                [.text(appID), .integer(bound.createdAt), .text(bound.id), .integer(Int64(limit))]
            ) { result.append(NotificationSummary(row: $0)) }
            return result
        }
    }

    package func deliveries(appID: String, token: String, limit: Int, beforeID: Int64?) async throws -> [DeliveryRecord] {
        try await self.database.read { db in
            var result: [DeliveryRecord] = []
            // Through the app's most recent notifications: one (notification, device) lookup each.
            try db.each(
                """
                SELECT \(StoreSQL.deliveryColumns) FROM devices d
                JOIN (SELECT id FROM notifications WHERE app_id = ?1 ORDER BY created_at DESC LIMIT ?3) n
                JOIN deliveries x ON x.notification_id = n.id AND x.device_id = d.id
                WHERE d.app_id = ?1 AND d.token = ?2 AND x.id < ?5 ORDER BY x.id DESC LIMIT ?4
                """,
                [
                    .text(appID), .text(token), .integer(Int64(NotificationPolicy.historyDepth)), .integer(Int64(limit)),
                    .integer(beforeID ?? Int64.max),
                ]
            ) { result.append(DeliveryRecord(row: $0)) }
            return result
        }
    }

    package func cancelNotification(appID: String, id: String, now: Int64) async throws -> Bool {
        try await self.database.write { db in
            guard let found = try db.query("SELECT cancelled_at FROM notifications WHERE app_id = ? AND id = ?", [.text(appID), .text(id)]).first
            else {
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
            let failedPending = db.changes > 0
            let inFlight = try db.query("SELECT count(*) FROM delivery_chunks WHERE notification_id = ?", [.text(id)]).first?[0].int ?? 0
            let cancelled = NotificationPolicy.cancelled(
                stoppedExpansion: stoppedExpansion, failedPending: failedPending, chunksInFlight: inFlight, alreadyCancelled: alreadyCancelled
            )
            if cancelled {
                try db.query("UPDATE notifications SET cancelled_at = ?1 WHERE id = ?2 AND cancelled_at IS NULL", [.integer(now), .text(id)])
                try db.query("UPDATE notifications SET payload = X'', template = NULL WHERE id = ? AND placeholder IS NOT NULL", [.text(id)])
            }
            return cancelled
        }
    }

    package func pendingDeliveries() async throws -> Int {
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

    package func deliveryCounts() async throws -> [DeliveryState: Int] {
        try await self.database.read { db in
            var counts: [DeliveryState: Int] = [:]
            for row in try db.query("SELECT state, count(*) FROM deliveries GROUP BY state") {
                if let state = row[0].string.flatMap(DeliveryState.init(rawValue:)) { counts[state] = Int(row[1].int ?? 0) }
            }
            return counts
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore

extension SQLiteStore {
    @discardableResult
    package func record(_ results: [DeliveryResult], now: Int64) async throws -> RecordedOutcomes {
        guard !results.isEmpty else { return RecordedOutcomes() }
        // A chunk's deliveries (the bulk of a broadcast) are created with their outcome, their
        // values bound, fenced by their chunk's attempt. Of the others, those accepted in one
        // statement over a JSON array of [id, apns-id, latency, attempt], written straight as
        // text outside the writer; the rest one by one.
        var created = NewRows(updatedAt: now, capacity: results.count)
        let plan = RecordPlan(results, now: now, creating: &created)
        let sentList = plan.sent.isEmpty ? nil : Self.sentText(plan.sent)
        let createdRows = created
        return try await self.database.write { db in
            var outcomes = RecordedOutcomes()
            if plan.createsRows {
                outcomes.applied = try Self.insertDeliveries(db, createdRows, fenced: true)
                if !plan.retriedChunkDeliveries.isEmpty {
                    // A notification cancelled while its chunk was in flight is not retried.
                    try db.query(
                        """
                        UPDATE deliveries SET state = 'failed', reason = 'Cancelled' WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
                            AND notification_id IN (SELECT id FROM notifications WHERE cancelled_at IS NOT NULL)
                        """,
                        [.text(JSONValue.array(plan.retriedChunkDeliveries.map { .int($0) }).jsonString)]
                    )
                }
                for end in plan.chunkEnds(created: outcomes.applied) {
                    try Self.leaveChunk(db, end.chunk, rows: end.created, attempt: end.attempt)
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
            for single in plan.singles {
                let id = SQLValue.integer(single.deliveryID)
                let latency = SQLValue.integer(single.latencyMilliseconds)
                let attempt = single.attempt.map { SQLValue.integer(Int64($0)) } ?? .null
                switch single.outcome {
                case .sent:
                    continue
                case .retry(let status, let reason, let retryAt):
                    try db.query(
                        """
                        UPDATE deliveries SET status = ?1, reason = ?2, latency_ms = ?3, next_attempt_at = ?4, updated_at = ?5
                        WHERE id = ?6 AND (?7 IS NULL OR attempts = ?7)
                        """,
                        [status.map { .integer(Int64($0)) } ?? .null, .text(reason), latency, .integer(retryAt), .integer(now), id, attempt]
                    )
                    if db.changes > 0 { outcomes.applied.insert(single.deliveryID) }
                case .failed(let status, let reason, _, let timestamp):
                    if single.updatesRow {
                        try db.query(
                            "UPDATE deliveries SET state = 'failed', status = ?1, reason = ?2, latency_ms = ?3, updated_at = ?4 WHERE id = ?5 AND (?6 IS NULL OR attempts = ?6)",
                            [status.map { .integer(Int64($0)) } ?? .null, .text(reason), latency, .integer(now), id, attempt]
                        )
                        if db.changes > 0 { outcomes.applied.insert(single.deliveryID) }
                    }
                    guard RecordPlan.invalidates(single, applied: outcomes.applied) else { continue }
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
                    if applied { outcomes.invalidated.insert(single.deliveryID) }
                    try db.query(
                        """
                        INSERT INTO invalidations (app_id, device_id, reason, apns_timestamp, at, applied)
                        SELECT n.app_id, x.device_id, ?, ?, ?, ? FROM deliveries x JOIN notifications n ON n.id = x.notification_id WHERE x.id = ?
                        """,
                        [.text(reason), timestamp.map(SQLValue.integer) ?? .null, .integer(now), .integer(applied ? 1 : 0), id]
                    )
                }
            }
            let uncertain = plan.uncertain(applied: outcomes.applied)
            if !uncertain.isEmpty {
                try db.query(
                    "UPDATE deliveries SET unknown_outcomes = unknown_outcomes + 1 WHERE id IN (SELECT value FROM json_each(?))",
                    [.text(JSONValue.array(uncertain.map { .int($0) }).jsonString)]
                )
            }
            return outcomes
        }
    }

    /// The accepted deliveries as a JSON array of [id, apns-id, latency, attempt], written
    /// straight as text.
    private static func sentText(_ sent: [RecordPlan.Sent]) -> String {
        var text: [UInt8] = [UInt8(ascii: "[")]
        for (index, delivery) in sent.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            text.append(UInt8(ascii: "["))
            text += String(delivery.deliveryID).utf8
            text.append(UInt8(ascii: ","))
            // An apns-id is a UUID the client checked; quoted through the serializer anyway.
            (delivery.apnsID.map(JSONValue.string) ?? .null).serialize(into: &text)
            text.append(UInt8(ascii: ","))
            text += String(delivery.latencyMilliseconds).utf8
            text.append(UInt8(ascii: ","))
            text += (delivery.attempt.map { String($0) } ?? "null").utf8
            text.append(UInt8(ascii: "]"))
        }
        text.append(UInt8(ascii: "]"))
        return String(decoding: text, as: UTF8.self)
    }

    /// `rows` deliveries of `chunk` that have their rows now leave it (at `attempt`; nil: at
    /// whatever attempt it is); a chunk with none left without a row is done.
    static func leaveChunk(_ db: borrowing SQLiteDatabase.Connection, _ chunk: Int64, rows: Int, attempt: Int?) throws {
        let attempt = attempt.map { SQLValue.integer(Int64($0)) } ?? .null
        try db.query(
            "UPDATE delivery_chunks SET size = size - ?1 WHERE id = ?2 AND (?3 IS NULL OR attempts = ?3)",
            [.integer(Int64(rows)), .integer(chunk), attempt])
        try db.query("DELETE FROM delivery_chunks WHERE id = ?1 AND (?2 IS NULL OR attempts = ?2) AND size <= 0", [.integer(chunk), attempt])
    }

    /// Creates rows (``NewRows``); with `fenced`, only rows whose chunk is still leased at that
    /// attempt. A row whose (notification, device) exists already is skipped. Returns the ids
    /// created.
    static func insertDeliveries(_ db: borrowing SQLiteDatabase.Connection, _ rows: NewRows, fenced: Bool) throws -> Set<Int64> {
        var admitted = rows
        if fenced {
            // Each chunk's attempt, read once per chunk rather than once per row.
            var leased: [Int64: Int64] = [:]
            try db.each(
                "SELECT id, attempts FROM delivery_chunks WHERE id IN (SELECT value FROM json_each(?))",
                [.text(JSONValue.array(Set(rows.chunks.compactMap { $0 }).map { .int($0) }).jsonString)]
            ) { row in
                if let id = row.int(0) { leased[id] = row.int(1) ?? 0 }
            }
            admitted = rows.filter { chunk, attempts in chunk.map { leased[$0] == attempts } ?? false }
        }
        guard admitted.count > 0 else { return [] }
        // Each row's ids are its own (handed out by the counter), so when every row goes in (the
        // usual case: SQLite's count of changes says so) they are the ids created, and the
        // statements need no RETURNING (its temporary table, and a row back per delivery). When
        // some were skipped, that is undone and done again with RETURNING.
        // (An error leaves the savepoint to the caller's rollback, which takes it along.)
        try db.execute("SAVEPOINT insert_deliveries")
        if try Self.insertParts(db, admitted, returning: false).inserted == admitted.count {
            try db.execute("RELEASE insert_deliveries")
            return Set(admitted.ids)
        }
        try db.execute("ROLLBACK TO insert_deliveries")
        let created = try Self.insertParts(db, admitted, returning: true).created
        try db.execute("RELEASE insert_deliveries")
        return created
    }

    /// Inserts `rows`, many per statement (its overhead shared by them), each row's values bound,
    /// none parsed from text: how many went in, and with `returning` their ids.
    private static func insertParts(
        _ db: borrowing SQLiteDatabase.Connection, _ rows: NewRows, returning: Bool
    ) throws -> (inserted: Int, created: Set<Int64>) {
        let width = NewRows.columns
        var inserted = 0
        var created: Set<Int64> = []
        var start = 0
        while start < rows.count {
            // The largest statement that fits (64, 32, …, 1 rows): a few statements, each
            // written and prepared once, rather than one of each length a chunk's rest can have.
            let size = Self.insertSizes.first { $0 <= rows.count - start } ?? 1
            let bindings = rows.values[(start * width)..<((start + size) * width)]
            start += size
            let sql = Self.insertStatements[size]![returning ? 1 : 0]
            try db.each(sql, bindings) { row in
                if let id = row.int(0) { created.insert(id) }
            }
            inserted += db.changes
        }
        return (inserted, created)
    }

    /// Rows per INSERT, largest first: at most 64 × 15 values, well under SQLite's 32,766.
    static let insertSizes = [64, 32, 16, 8, 4, 2, 1]
    /// Each size's INSERT, without and with RETURNING.
    private static let insertStatements = Dictionary(
        uniqueKeysWithValues: insertSizes.map { ($0, [insertSQL(rows: $0, returning: false), insertSQL(rows: $0, returning: true)]) })

    /// An INSERT of `rows` rows of 15 values each; with `returning`, returning the ids it created.
    private static func insertSQL(rows: Int, returning: Bool) -> String {
        let values = (0..<rows).map { row in "(" + (1...NewRows.columns).map { "?\(row * NewRows.columns + $0)" }.joined(separator: ", ") + ")" }
        return """
            INSERT OR IGNORE INTO deliveries (id, notification_id, device_id, token, environment, push_type, topic, state, attempts,
                next_attempt_at, apns_id, status, reason, latency_ms, updated_at)
            VALUES \(values.joined(separator: ", "))\(returning ? " RETURNING id" : "")
            """
    }
}

/// Delivery rows, each the bindings of ``SQLiteStore/insertDeliveries``: id, notification_id,
/// device_id, token, environment, push_type, topic, state, attempts, next_attempt_at, apns_id,
/// status, reason, latency_ms, updated_at (the 15 columns of the INSERT), one row after the
/// other in `values`; beside them each row's id, attempt and chunk.
struct NewRows: NewDeliveryRows {
    /// Values per row.
    static let columns = 15
    private(set) var values: [SQLValue] = []
    /// Each row's chunk (not written: it fences the row).
    private(set) var chunks: [Int64?] = []
    /// When they are written.
    let updatedAt: Int64

    /// Rows written at `updatedAt`, with room for `capacity` of them.
    init(updatedAt: Int64, capacity: Int = 0) {
        self.updatedAt = updatedAt
        self.values.reserveCapacity(capacity * Self.columns)
        self.chunks.reserveCapacity(capacity)
    }

    var count: Int { self.chunks.count }

    /// Each row's id (its first value).
    var ids: [Int64] { (0..<self.count).map { self.values[$0 * Self.columns].int ?? 0 } }

    mutating func add(
        id: Int64, notificationID: String, deviceID: Int64, token: String, environment: String, pushType: String, topic: String,
        state: DeliveryState, attempts: Int, nextAttemptAt: Int64, apnsID: String?, status: Int?, reason: String?, latency: Int64?, chunk: Int64?
    ) {
        // One value at a time: an array literal here would be a temporary array per row.
        self.values.append(.integer(id))
        self.values.append(.text(notificationID))
        self.values.append(.integer(deviceID))
        self.values.append(.text(token))
        self.values.append(.text(environment))
        self.values.append(.text(pushType))
        self.values.append(.text(topic))
        self.values.append(.text(state.rawValue))
        self.values.append(.integer(Int64(attempts)))
        self.values.append(.integer(nextAttemptAt))
        self.values.append(apnsID.map(SQLValue.text) ?? .null)
        self.values.append(status.map { .integer(Int64($0)) } ?? .null)
        self.values.append(reason.map(SQLValue.text) ?? .null)
        self.values.append(latency.map(SQLValue.integer) ?? .null)
        self.values.append(.integer(self.updatedAt))
        self.chunks.append(chunk)
    }

    /// The rows `keep` keeps, given each row's chunk and attempt (its ninth value); these rows
    /// themselves (nothing copied) when it keeps every one.
    func filter(_ keep: (_ chunk: Int64?, _ attempts: Int64) -> Bool) -> NewRows {
        let kept = (0..<self.count).filter { keep(self.chunks[$0], self.values[$0 * Self.columns + 8].int ?? 0) }
        guard kept.count < self.count else { return self }
        var rows = NewRows(updatedAt: self.updatedAt, capacity: kept.count)
        for row in kept {
            rows.values += self.values[(row * Self.columns)..<((row + 1) * Self.columns)]
            rows.chunks.append(self.chunks[row])
        }
        return rows
    }
}

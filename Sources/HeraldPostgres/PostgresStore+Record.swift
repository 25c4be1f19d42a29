// SPDX-License-Identifier: Apache-2.0
import APNSModels
package import HeraldCore
import NIOCore
import PostgresNIO

extension PostgresStore {
    @discardableResult
    package func record(_ results: [DeliveryResult], now: Int64) async throws -> RecordedOutcomes {
        guard !results.isEmpty else { return RecordedOutcomes() }
        // A chunk's deliveries (the bulk of a broadcast) are created with their outcome, in one
        // COPY, fenced by their chunk's attempt. Of the others, those accepted in one statement
        // over arrays; the rest one by one.
        var created = NewRows()
        let plan = RecordPlan(results, now: now, creating: &created)
        let sentArrays = plan.sent.isEmpty ? nil : Self.sentArrays(plan.sent)
        return try await self.write { db in
            var outcomes = RecordedOutcomes()
            if plan.createsRows {
                outcomes.applied = try await Self.insertDeliveries(db, created, fenced: true, now: now)
                if !plan.retriedChunkDeliveries.isEmpty {
                    // A notification cancelled while its chunk was in flight is not retried.
                    try await db.query(
                        """
                        UPDATE deliveries SET state = 'failed', reason = 'Cancelled' WHERE id = ANY($1) AND state = 'pending'
                            AND notification_id IN (SELECT id FROM notifications WHERE cancelled_at IS NOT NULL)
                        """,
                        [.ints(plan.retriedChunkDeliveries)]
                    )
                }
                for end in plan.chunkEnds(created: outcomes.applied) {
                    try await Self.leaveChunk(db, end.chunk, rows: end.created, attempt: end.attempt)
                }
            }
            if let sentArrays {
                for row in try await db.query(
                    """
                    UPDATE deliveries x SET state = 'sent', apns_id = nullif(v.apns_id, ''), status = 200, reason = NULL,
                        latency_ms = v.latency, updated_at = $1
                    FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) AS v(id, apns_id, latency, attempt)
                    WHERE x.id = v.id AND (v.attempt < 0 OR x.attempts = v.attempt)
                    RETURNING x.id
                    """,
                    [.int(now)] + sentArrays
                ) {
                    if let id = row.int(0) { outcomes.applied.insert(id) }
                }
            }
            for single in plan.singles {
                let id = Value.int(single.deliveryID)
                let latency = Value.int(single.latencyMilliseconds)
                let attempt = Value.int(single.attempt.map(Int64.init))
                switch single.outcome {
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
                    if !written.isEmpty { outcomes.applied.insert(single.deliveryID) }
                case .failed(let status, let reason, _, let timestamp):
                    if single.updatesRow {
                        let written = try await db.query(
                            """
                            UPDATE deliveries SET state = 'failed', status = $1, reason = $2, latency_ms = $3, updated_at = $4
                            WHERE id = $5 AND ($6::bigint IS NULL OR attempts = $6::bigint) RETURNING id
                            """,
                            [.int(status.map(Int64.init)), .text(reason), latency, .int(now), id, attempt]
                        )
                        if !written.isEmpty { outcomes.applied.insert(single.deliveryID) }
                    }
                    guard RecordPlan.invalidates(single, applied: outcomes.applied) else { continue }
                    // Only if the token was not registered again after APNs learned it was dead.
                    let applied =
                        try await db.query(
                            """
                            UPDATE devices SET active = FALSE, invalidated_at = $1, invalidation_reason = $2
                            WHERE id = (SELECT device_id FROM deliveries WHERE id = $3) AND active
                                AND ($4::bigint IS NULL OR last_registered_at < $4::bigint)
                            RETURNING id
                            """,
                            [.int(now), .text(reason), id, .int(timestamp)]
                        ).isEmpty == false
                    if applied { outcomes.invalidated.insert(single.deliveryID) }
                    try await db.query(
                        """
                        INSERT INTO invalidations (app_id, device_id, reason, apns_timestamp, at, applied)
                        SELECT n.app_id, x.device_id, $1, $2, $3, $4 FROM deliveries x JOIN notifications n ON n.id = x.notification_id WHERE x.id = $5
                        """,
                        [.text(reason), .int(timestamp), .int(now), .bool(applied), id]
                    )
                }
            }
            let uncertain = plan.uncertain(applied: outcomes.applied)
            if !uncertain.isEmpty {
                try await db.query("UPDATE deliveries SET unknown_outcomes = unknown_outcomes + 1 WHERE id = ANY($1)", [.ints(uncertain)])
            }
            return outcomes
        }
    }

    /// The accepted deliveries as the arrays of `unnest`: ids, apns-ids ('' for none), latencies
    /// and attempts (-1: unfenced).
    private static func sentArrays(_ sent: [RecordPlan.Sent]) -> [Value] {
        [
            .ints(sent.map(\.deliveryID)), .texts(sent.map { $0.apnsID ?? "" }), .ints(sent.map(\.latencyMilliseconds)),
            .ints(sent.map { $0.attempt.map(Int64.init) ?? -1 }),
        ]
    }

    /// `rows` deliveries of `chunk` that have their rows now leave it (at `attempt`; nil: at
    /// whatever attempt it is); a chunk with none left without a row is done.
    static func leaveChunk(_ db: Connection, _ chunk: Int64, rows: Int, attempt: Int?) async throws {
        let attempt = Value.int(attempt.map(Int64.init))
        try await db.query(Statements.LeaveChunk.self, [.int(Int64(rows)), .int(chunk), attempt])
        try await db.query(Statements.EndRecordedChunk.self, [.int(chunk), attempt])
    }

    /// Creates the rows of `rows`; with `fenced`, only those whose chunk is still leased at that
    /// attempt. The chunks are locked first (a chunk being claimed again waits, or is skipped by
    /// the claim), so no two attempts of a chunk record a device. Returns the ids created.
    static func insertDeliveries(_ db: Connection, _ rows: NewRows, fenced: Bool, now: Int64) async throws -> Set<Int64> {
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

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore

/// Delivery policies in the claim's own transaction (SQLite's one writer makes them exact): quiet
/// hours hold alerts, throttles set aside deliveries until their slot, then frequency caps fail
/// or defer alerts over the cap. The decisions are
/// HeraldCore's (`QuietHours`, `FrequencyCap`); a claim with no policy active reads nothing more.
extension SQLiteStore {
    /// `known`: what was read of some devices with their chunk (the others are read here).
    static func applyPolicies(
        _ db: borrowing SQLiteDatabase.Connection, to result: inout [ClaimedDelivery], known: [Int64: PolicyDevice] = [:], now: Int64
    ) throws {
        let quiet = QuietHours.devices(result)
        let capped = FrequencyCap.devices(result)
        let throttled = Throttle.notifications(result)
        guard !quiet.isEmpty || !capped.isEmpty || !throttled.isEmpty else { return }
        var zones: [Int64: String] = [:]
        var users: [Int64: String] = [:]
        var unknown: [Int64] = []
        for id in Set(quiet + capped) {
            if let device = known[id] {
                zones[id] = device.timeZone
                users[id] = device.userID
            } else {
                unknown.append(id)
            }
        }
        if !unknown.isEmpty {
            try db.each(
                "SELECT id, time_zone, user_id FROM devices WHERE id IN (SELECT value FROM json_each(?))",
                [.text(JSONValue.array(unknown.map { .int($0) }).jsonString)]
            ) { row in
                guard let id = row.int(0) else { return }
                if let zone = row.string(1) { zones[id] = zone }
                if let user = row.string(2) { users[id] = user }
            }
        }
        let held = quiet.isEmpty ? [:] : QuietHours.held(result, timeZones: zones, now: now)
        var slotted: [Int: Int64] = [:]
        if !throttled.isEmpty {
            var next: [String: Int64] = [:]
            try db.each(
                "SELECT notification_id, next_slot FROM throttle_slots WHERE notification_id IN (SELECT value FROM json_each(?))",
                [.text(JSONValue.array(throttled.map(JSONValue.string)).jsonString)]
            ) { row in
                if let id = row.string(0), let slot = row.int(1) { next[id] = slot }
            }
            let decision = Throttle.decide(result, skipping: Set(held.keys), next: next, now: now)
            slotted = decision.aside
            try db.query(
                """
                INSERT INTO throttle_slots (notification_id, next_slot) SELECT value ->> 0, value ->> 1 FROM json_each(?) WHERE true
                ON CONFLICT (notification_id) DO UPDATE SET next_slot = excluded.next_slot
                """,
                [.text(JSONValue.array(decision.next.sorted { $0.key < $1.key }.map { .array([.string($0.key), .int($0.value)]) }).jsonString)]
            )
        }
        var outcomes: [Int: FrequencyCap.Outcome] = [:]
        let keys = FrequencyCap.keys(result, users: users).filter { held[$0.index] == nil && slotted[$0.index] == nil }
        if !keys.isEmpty {
            // The rows the people are stored in (a user's own; devices without one, 64 to a
            // row: see `FrequencyCap.row(of:)`) read by key, and written in statements of many
            // rows, their values bound (SQLite's one writer makes the read and the write exact).
            var stored: [FrequencyCap.Key: String] = [:]
            for row in FrequencyCap.rows(of: FrequencyCap.inClaimOrder(keys)) {
                try db.each(
                    "SELECT times FROM frequency_counts WHERE app_id = ? AND subject = ? AND category = ?",
                    [.text(row.appID), .text(row.subject), .text(row.category)]
                ) { found in stored[row] = found.string(0) ?? "" }
            }
            let decision = FrequencyCap.decide(result, keys: keys, history: FrequencyCap.history(stored: stored), now: now)
            outcomes = decision.outcomes
            let changed = FrequencyCap.written(decision.history, stored: stored, now: now)
            var start = changed.startIndex
            while start < changed.endIndex {
                let batch = changed[start..<min(start + Self.countsPerInsert, changed.endIndex)]
                var values: [SQLValue] = []
                values.reserveCapacity(batch.count * 4)
                for row in batch { values += [.text(row.key.appID), .text(row.key.subject), .text(row.key.category), .text(row.text)] }
                try db.query(
                    """
                    INSERT INTO frequency_counts (app_id, subject, category, times) VALUES \(Self.rowPlaceholders(batch.count))
                    ON CONFLICT (app_id, subject, category) DO UPDATE SET times = excluded.times
                    """,
                    values
                )
                start = batch.endIndex
            }
        }
        try Self.setAside(db, SetAside.merge(held: held, throttled: slotted, capped: outcomes, now: now), in: &result, now: now)
    }

    /// The most rows one statement writes (four values each).
    private static let countsPerInsert = 100

    /// `(?, ?, ?, ?), …`: `count` rows of four values.
    private static func rowPlaceholders(_ count: Int) -> String {
        count == Self.countsPerInsert ? Self.fullCountsBatch : Array(repeating: "(?, ?, ?, ?)", count: count).joined(separator: ", ")
    }

    private static let fullCountsBatch = Array(repeating: "(?, ?, ?, ?)", count: SQLiteStore.countsPerInsert).joined(separator: ", ")

    /// Takes the deliveries `aside` (by index) out of the batch, as they say; none counts as an
    /// attempt. A delivery with a row is updated; a chunk's gets its row now and leaves its
    /// chunk (which ends if nothing of it is left).
    private static func setAside(
        _ db: borrowing SQLiteDatabase.Connection, _ aside: [Int: SetAside], in result: inout [ClaimedDelivery], now: Int64
    ) throws {
        guard !aside.isEmpty else { return }
        var rows = NewRows(updatedAt: now)
        var leftChunks: [Int64: Int] = [:]
        for (index, fate) in aside.sorted(by: { $0.key < $1.key }) {
            let delivery = result[index]
            if let chunk = delivery.chunk {
                rows.add(
                    id: delivery.id, notificationID: delivery.notificationID, deviceID: delivery.deviceID, token: delivery.token,
                    environment: delivery.route.stored, pushType: delivery.pushType.rawValue, topic: delivery.topic, state: fate.state,
                    attempts: delivery.attempts - 1, nextAttemptAt: fate.nextAttemptAt, apnsID: nil, status: nil, reason: fate.reason, latency: nil,
                    chunk: nil
                )
                leftChunks[chunk, default: 0] += 1
            } else {
                try db.query(
                    "UPDATE deliveries SET state = ?, next_attempt_at = ?, attempts = attempts - 1, reason = ?, updated_at = ? WHERE id = ?",
                    [.text(fate.state.rawValue), .integer(fate.nextAttemptAt), .text(fate.reason), .integer(now), .integer(delivery.id)]
                )
            }
        }
        _ = try Self.insertDeliveries(db, rows, fenced: false)
        for (chunk, count) in leftChunks.sorted(by: { $0.key < $1.key }) {
            try Self.leaveChunk(db, chunk, rows: count, attempt: nil)
        }
        result = result.enumerated().compactMap { aside[$0.offset] == nil ? $0.element : nil }
    }
}

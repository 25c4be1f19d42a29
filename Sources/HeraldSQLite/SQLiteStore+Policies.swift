// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore

/// Delivery policies in the claim's own transaction (SQLite's one writer makes them exact): quiet
/// hours hold alerts, throttles set aside deliveries until their slot, then frequency caps fail
/// or defer alerts over the cap. The decisions are
/// HeraldCore's (`QuietHours`, `FrequencyCap`); a claim with no policy active reads nothing more.
extension SQLiteStore {
    static func applyPolicies(_ db: borrowing SQLiteDatabase.Connection, to result: inout [ClaimedDelivery], now: Int64) throws {
        let quiet = QuietHours.devices(result)
        let capped = FrequencyCap.devices(result)
        let throttled = Throttle.notifications(result)
        guard !quiet.isEmpty || !capped.isEmpty || !throttled.isEmpty else { return }
        var zones: [Int64: String] = [:]
        var users: [Int64: String] = [:]
        if !quiet.isEmpty || !capped.isEmpty {
            try db.each(
                "SELECT id, time_zone, user_id FROM devices WHERE id IN (SELECT value FROM json_each(?))",
                [.text(JSONValue.array(Array(Set(quiet + capped)).map { .int($0) }).jsonString)]
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
        let keys = FrequencyCap.keys(result, users: users).filter { held[$0.key] == nil && slotted[$0.key] == nil }
        if !keys.isEmpty {
            let people = Array(Set(keys.values))
            var history: [FrequencyCap.Key: [Int64]] = [:]
            try db.each(
                """
                SELECT app_id, subject, category, times FROM frequency_counts
                WHERE (app_id, subject, category) IN (SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?))
                """,
                [.text(Self.keysJSON(people))]
            ) { row in
                history[FrequencyCap.Key(appID: row.string(0) ?? "", subject: row.string(1) ?? "", category: row.string(2) ?? "")] =
                    FrequencyCap.decode(row.string(3))
            }
            let decision = FrequencyCap.decide(result, keys: keys, history: history, now: now)
            outcomes = decision.outcomes
            if !decision.history.isEmpty {
                let changed = decision.history.sorted { $0.key < $1.key }.map { key, times -> JSONValue in
                    .array([.string(key.appID), .string(key.subject), .string(key.category), .string(FrequencyCap.encode(times))])
                }
                try db.query(
                    """
                    INSERT INTO frequency_counts (app_id, subject, category, times)
                    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?) WHERE true
                    ON CONFLICT (app_id, subject, category) DO UPDATE SET times = excluded.times
                    """,
                    [.text(JSONValue.array(changed).jsonString)]
                )
            }
        }
        try Self.setAside(db, SetAside.merge(held: held, throttled: slotted, capped: outcomes, now: now), in: &result, now: now)
    }

    private static func keysJSON(_ keys: [FrequencyCap.Key]) -> String {
        JSONValue.array(keys.map { .array([.string($0.appID), .string($0.subject), .string($0.category)]) }).jsonString
    }

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
                    environment: delivery.environment.rawValue, pushType: delivery.pushType.rawValue, topic: delivery.topic, state: fate.state,
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
        _ = try Self.insertDeliveries(db, rows.rows, fenced: false)
        for (chunk, count) in leftChunks.sorted(by: { $0.key < $1.key }) {
            try db.query("UPDATE delivery_chunks SET size = size - ? WHERE id = ?", [.integer(Int64(count)), .integer(chunk)])
            try db.query("DELETE FROM delivery_chunks WHERE id = ? AND size <= 0", [.integer(chunk)])
        }
        result = result.enumerated().compactMap { aside[$0.offset] == nil ? $0.element : nil }
    }
}

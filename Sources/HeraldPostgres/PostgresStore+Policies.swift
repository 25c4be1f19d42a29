// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import PostgresNIO

/// Delivery policies, in a transaction of their own right after the claim's (see
/// `claimDeliveries`): quiet hours hold alerts, throttles set aside deliveries until their slot,
/// then frequency caps fail or defer alerts over the cap. The decisions are HeraldCore's
/// (`QuietHours`, `FrequencyCap`); a claim with no policy active reads nothing more.
///
/// Caps are exact across processes: before reading the rows its people's histories are in, the
/// claim takes an advisory lock per row (`pg_advisory_xact_lock`, in key order, so two claims
/// never wait on each other in a cycle), held until it commits; a claim in another process for
/// the same row waits for that commit and then reads what it wrote.
extension PostgresStore {
    /// Whether any delivery of `claimed` has a policy to apply (``applyPolicies(_:to:now:)`` does nothing otherwise).
    static func hasPolicies(_ claimed: [ClaimedDelivery]) -> Bool {
        !QuietHours.devices(claimed).isEmpty || !FrequencyCap.devices(claimed).isEmpty || !Throttle.notifications(claimed).isEmpty
    }

    /// `known`: what was read of some devices with their chunk (the others are read here).
    static func applyPolicies(_ db: Connection, to result: inout [ClaimedDelivery], known: [Int64: PolicyDevice] = [:], now: Int64) async throws {
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
            for row in try await db.query("SELECT id, time_zone, user_id FROM devices WHERE id = ANY($1)", [.ints(unknown)]) {
                guard let id = row.int(0) else { continue }
                if let zone = row.string(1) { zones[id] = zone }
                if let user = row.string(2) { users[id] = user }
            }
        }
        let held = quiet.isEmpty ? [:] : QuietHours.held(result, timeZones: zones, now: now)
        var slotted: [Int: Int64] = [:]
        if !throttled.isEmpty {
            // Each notification's slot row, created if need be and locked (in id order) until the
            // claim commits: claims in any process take slots one after the other.
            var next: [String: Int64] = [:]
            for row in try await db.query(
                """
                INSERT INTO throttle_slots (notification_id, next_slot) SELECT id, 0 FROM unnest($1::text[]) AS id ORDER BY id
                ON CONFLICT (notification_id) DO UPDATE SET next_slot = throttle_slots.next_slot
                RETURNING notification_id, next_slot
                """,
                [.texts(throttled)]
            ) {
                if let id = row.string(0), let slot = row.int(1), slot > 0 { next[id] = slot }
            }
            let decision = Throttle.decide(result, skipping: Set(held.keys), next: next, now: now)
            slotted = decision.aside
            let changed = decision.next.sorted { $0.key < $1.key }
            try await db.query(
                "UPDATE throttle_slots t SET next_slot = v.next FROM unnest($1::text[], $2::bigint[]) AS v(id, next) WHERE t.notification_id = v.id",
                [.texts(changed.map(\.key)), .ints(changed.map(\.value))]
            )
        }
        var outcomes: [Int: FrequencyCap.Outcome] = [:]
        let keys = FrequencyCap.keys(result, users: users).filter { held[$0.index] == nil && slotted[$0.index] == nil }
        if !keys.isEmpty {
            // People are stored in rows (a user's own; devices without one, 64 to a row: see
            // `FrequencyCap.row(of:)`). unnest yields the array's order: the locks are taken in
            // lock-key order. Under them no other claim reads or writes these rows; they are
            // read and written in the claim's order (a broadcast's chunk is in device order:
            // neighbours in the key's index). The rows have no foreign key to their app (its
            // per-row check cost more than half of a broadcast's inserts): the apps are locked
            // in the same statement instead, once each, as that check did, so an app's deletion
            // waits for this commit and then deletes what it wrote, and an app deleted already
            // gets no rows (see `deleteAppRows`). The rows are read by a statement of their own:
            // its snapshot is taken after the locks are granted, so it sees what the claim that
            // held them wrote.
            let rows = FrequencyCap.rows(of: FrequencyCap.inClaimOrder(keys))
            let apps = Set(
                try await db.query(
                    """
                    WITH locked AS (SELECT count(pg_advisory_xact_lock(k)) AS n FROM unnest($1::bigint[]) AS k)
                    SELECT a.id FROM locked, apps a WHERE a.id = ANY($2) AND locked.n >= 0 ORDER BY a.id FOR KEY SHARE OF a
                    """,
                    [.ints(Array(Set(rows.map(\.lockKey))).sorted()), .texts(Array(Set(rows.map(\.appID))))]
                ).compactMap { $0.string(0) })
            // Each row looked up by key: the LIMIT keeps the subquery apart, so the planner
            // cannot join the table as a whole (it hashed all of it, each claim, while a
            // broadcast's first claims filled it faster than its statistics followed). A search
            // by `subject = ANY(…)` was no better planned: 3.7× slower in a capped broadcast.
            var stored: [FrequencyCap.Key: String] = [:]
            for row in try await db.query(
                """
                SELECT k.app_id, k.subject, k.category, f.times FROM unnest($1::text[], $2::text[], $3::text[]) AS k(app_id, subject, category)
                CROSS JOIN LATERAL (
                    SELECT times FROM frequency_counts WHERE app_id = k.app_id AND subject = k.subject AND category = k.category LIMIT 1
                ) f
                """,
                [.texts(rows.map(\.appID)), .texts(rows.map(\.subject)), .texts(rows.map(\.category))]
            ) {
                stored[FrequencyCap.Key(appID: row.string(0) ?? "", subject: row.string(1) ?? "", category: row.string(2) ?? "")] =
                    row.string(3) ?? ""
            }
            let decision = FrequencyCap.decide(result, keys: keys, history: FrequencyCap.history(stored: stored), now: now)
            outcomes = decision.outcomes
            // Under the locks no other claim can write these rows: new ones by a plain insert (no
            // conflict to look for: with a row per user, one upsert for all made PostgreSQL's CPU
            // in a 1M-user capped broadcast 18–21 s against 15–18 s), the others updated by key
            // (an upsert: a join could be planned as a hash of the whole table). A broadcast's
            // claim mostly has one kind or the other: one statement.
            let written = FrequencyCap.written(decision.history, stored: stored, now: now).filter { apps.contains($0.key.appID) }
            for (rows, sql) in [
                (
                    written.filter { stored[$0.key] == nil },
                    "INSERT INTO frequency_counts (app_id, subject, category, times) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])"
                ),
                (
                    written.filter { stored[$0.key] != nil },
                    """
                    INSERT INTO frequency_counts (app_id, subject, category, times) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                    ON CONFLICT (app_id, subject, category) DO UPDATE SET times = excluded.times
                    """
                ),
            ] where !rows.isEmpty {
                try await db.query(
                    sql,
                    [.texts(rows.map(\.key.appID)), .texts(rows.map(\.key.subject)), .texts(rows.map(\.key.category)), .texts(rows.map(\.text))]
                )
            }
        }
        try await Self.setAside(db, SetAside.merge(held: held, throttled: slotted, capped: outcomes, now: now), in: &result, now: now)
    }

    /// Takes the deliveries `aside` (by index) out of the batch, as they say; none counts as an
    /// attempt. A delivery with a row is updated; a chunk's gets its row now and leaves its chunk
    /// (which ends if nothing of it is left). The rows and chunks are this claim's (locked, or
    /// just created).
    private static func setAside(_ db: Connection, _ aside: [Int: SetAside], in result: inout [ClaimedDelivery], now: Int64) async throws {
        guard !aside.isEmpty else { return }
        var rows = NewRows()
        var leftChunks: [Int64: Int] = [:]
        var updated: [(id: Int64, fate: SetAside)] = []
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
                updated.append((delivery.id, fate))
            }
        }
        if !updated.isEmpty {
            try await db.query(
                """
                UPDATE deliveries x SET state = v.state, next_attempt_at = v.next, attempts = x.attempts - 1, reason = v.reason, updated_at = $5
                FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[]) AS v(id, state, next, reason) WHERE x.id = v.id
                """,
                [
                    .ints(updated.map(\.id)), .texts(updated.map(\.fate.state.rawValue)), .ints(updated.map(\.fate.nextAttemptAt)),
                    .texts(updated.map(\.fate.reason)), .int(now),
                ]
            )
        }
        _ = try await Self.insertDeliveries(db, rows, fenced: false, now: now)
        for (chunk, count) in leftChunks.sorted(by: { $0.key < $1.key }) {
            try await Self.leaveChunk(db, chunk, rows: count, attempt: nil)
        }
        result = result.enumerated().compactMap { aside[$0.offset] == nil ? $0.element : nil }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import PostgresNIO
import Synchronization

/// Group commit for registrations: a caller that finds ``groups`` groups already being committed
/// waits; a leader that finishes its group hands the lead to the first waiter, which commits
/// its own registration and every waiting one (up to ``limit``) in one transaction on one
/// connection — a handful of statements for the whole group — and answers each after the COMMIT.
/// Nobody is answered before the commit that holds its registration.
final class RegistrationBatch: Sendable {
    struct Entry: Sendable {
        var appID: String
        var asked: DeviceRegistration
        var authority: RegistrationAuthority
        var now: Int64

        var key: String { RegistrationBatch.key(self.appID, self.asked.token) }
    }

    static func key(_ appID: String?, _ token: String?) -> String { (appID ?? "") + "\u{0}" + (token ?? "") }

    /// The most registrations one group commits; the rest wait for the next.
    static let limit = 256
    /// Groups committed at once per process: while one waits for its COMMIT to reach the disk,
    /// another runs its statements.
    static let groups = 4

    private enum Signal: Sendable {
        case done(Device)
        /// Commit a group: this caller's registration and the waiting ones.
        case lead
    }

    private struct Waiter: Sendable {
        let entry: Entry
        let continuation: CheckedContinuation<Signal, any Error>
    }

    /// Invariant: callers wait only while `groups` leaders are committing.
    private struct State {
        var waiting: [Waiter] = []
        var leaders = 0
    }

    private let state = Mutex(State())

    func register(_ entry: Entry, store: PostgresStore) async throws -> Device {
        let leads = self.state.withLock { state in
            guard state.leaders < Self.groups else { return false }
            state.leaders += 1
            return true
        }
        if leads { return try await self.lead(entry, store: store) }
        let signal = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Signal, any Error>) in
            let leadsNow = self.state.withLock { state in
                // A leader may have finished in between: then nobody would hand this one the lead.
                guard state.leaders < Self.groups else {
                    state.waiting.append(Waiter(entry: entry, continuation: continuation))
                    return false
                }
                state.leaders += 1
                return true
            }
            if leadsNow { continuation.resume(returning: .lead) }
        }
        switch signal {
        case .done(let device): return device
        case .lead: return try await self.lead(entry, store: store)
        }
    }

    /// As a leader: commits `own` and the waiting registrations as one group, hands the lead to
    /// the next waiter (or gives it up), and answers the group.
    private func lead(_ own: Entry, store: PostgresStore) async throws -> Device {
        let others = self.state.withLock { state in
            let taken = Array(state.waiting.prefix(Self.limit - 1))
            state.waiting.removeFirst(taken.count)
            return taken
        }
        let outcomes: [Result<Device, any Error>]
        do {
            outcomes = try await store.registerGroup([own] + others.map(\.entry))
        } catch {
            outcomes = Array(repeating: .failure(error), count: others.count + 1)
        }
        let next: Waiter? = self.state.withLock { state in
            if state.waiting.isEmpty {
                state.leaders -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.continuation.resume(returning: .lead)
        for (waiter, outcome) in zip(others, outcomes.dropFirst()) {
            switch outcome {
            case .success(let device): waiter.continuation.resume(returning: .done(device))
            case .failure(let error): waiter.continuation.resume(throwing: error)
            }
        }
        return try outcomes[0].get()
    }
}

extension PostgresStore {
    /// `entries` registered in one transaction, each with its own outcome, in order. Tokens
    /// registered more than once go in rounds (a later registration over the earlier one).
    ///
    /// Most groups' statements all succeed: they go without savepoints (two round trips fewer
    /// per round). When a round's statements fail as a whole (one bad registration among them),
    /// that transaction is rolled back and the group goes again with a savepoint per round,
    /// registered one by one in the round that fails, so a bad registration fails alone. An error
    /// that could go away (a lost connection, a deadlock) fails the group (`write` retries a
    /// deadlock).
    func registerGroup(_ entries: [RegistrationBatch.Entry]) async throws -> [Result<Device, any Error>] {
        do {
            return try await self.write { db in
                var outcomes = [Result<Device, any Error>?](repeating: nil, count: entries.count)
                for round in Self.rounds(entries) {
                    let answers = try await Self.registerRound(db, round.map { entries[$0] })
                    for (index, answer) in zip(round, answers) { outcomes[index] = answer }
                }
                return outcomes.map { $0 ?? .failure(HeraldError(code: "internal", "a registration had no outcome")) }
            }
        } catch  where !error.isTransient {
            return try await self.registerGroupApart(entries)
        }
    }

    /// The group's registrations in rounds of distinct tokens, each round in the order every
    /// process locks rows in (fewer deadlocks between groups).
    private static func rounds(_ entries: [RegistrationBatch.Entry]) -> [[Int]] {
        // Each key made once (a sort's comparisons would make two at each).
        let keys = entries.map(\.key)
        var rounds: [[Int]] = []
        var remaining = Array(entries.indices)
        while !remaining.isEmpty {
            var seen = Set<String>()
            var round: [Int] = []
            var later: [Int] = []
            for index in remaining {
                if seen.insert(keys[index]).inserted { round.append(index) } else { later.append(index) }
            }
            remaining = later
            rounds.append(round.sorted { keys[$0] < keys[$1] })
        }
        return rounds
    }

    /// The group again after its statements failed: each round in a savepoint, and a round
    /// that fails rolled back and registered one by one, each in its own savepoint.
    private func registerGroupApart(_ entries: [RegistrationBatch.Entry]) async throws -> [Result<Device, any Error>] {
        try await self.write { db in
            var outcomes = [Result<Device, any Error>?](repeating: nil, count: entries.count)
            for round in Self.rounds(entries) {
                try await db.execute("SAVEPOINT registration_round")
                do {
                    let answers = try await Self.registerRound(db, round.map { entries[$0] })
                    try await db.execute("RELEASE SAVEPOINT registration_round")
                    for (index, answer) in zip(round, answers) { outcomes[index] = answer }
                } catch  where !error.isTransient {
                    try await db.execute("ROLLBACK TO SAVEPOINT registration_round")
                    for index in round {
                        let entry = entries[index]
                        try await db.execute("SAVEPOINT registration_one")
                        do {
                            let device = try await Self.registerOne(db, appID: entry.appID, entry.asked, authority: entry.authority, now: entry.now)
                            try await db.execute("RELEASE SAVEPOINT registration_one")
                            outcomes[index] = .success(device)
                        } catch  where !error.isTransient {
                            try await db.execute("ROLLBACK TO SAVEPOINT registration_one")
                            outcomes[index] = .failure((error as? PSQLError).map(PostgresStoreError.map) ?? error)
                        }
                    }
                }
            }
            return outcomes.map { $0 ?? .failure(HeraldError(code: "internal", "a registration had no outcome")) }
        }
    }

    /// One registration as a row of the group's upsert (sent as one JSON array; nil is NULL),
    /// under the names of ``Statements/UpsertRegistered``'s record type.
    private static func upsertRow(_ appID: String, _ registration: DeviceRegistration, now: Int64) -> JSONValue {
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        return .object([
            ("app_id", .string(appID)),
            ("token", .string(registration.token)),
            ("kind", .string(registration.kind.rawValue)),
            ("environment", .string(registration.route.stored)),
            ("user_id", text(registration.userID)),
            ("locale", text(registration.locale)),
            ("time_zone", text(registration.timeZone)),
            ("app_version", text(registration.appVersion)),
            ("platform", text(registration.platform)),
            ("activity_id", text(registration.activityID)),
            ("attributes_type", text(registration.attributesType)),
            ("registered_at", .int(now)),
            ("public_key", text(registration.publicKey.map { Data($0).base64EncodedString() })),
            ("public_key_type", text(registration.publicKeyType)),
        ])
    }

    /// Registrations of distinct tokens, with a few statements for all: the devices they
    /// replace (locked), the policy for each, one upsert, their tags.
    private static func registerRound(_ db: Connection, _ entries: [RegistrationBatch.Entry]) async throws -> [Result<Device, any Error>] {
        var held: [String: (id: Int64, userID: String?)] = [:]
        let reading = entries.filter { $0.authority.readsDevice }
        if !reading.isEmpty {
            let rows = try await db.query(
                Statements.LockRegistered.self, [.texts(reading.map(\.appID)), .texts(reading.map(\.asked.token))])
            for row in rows { held[RegistrationBatch.key(row.string(0), row.string(1))] = (row.int(2) ?? 0, row.string(3)) }
        }
        var heldTags: [Int64: [String]] = [:]
        let tagged = reading.filter { $0.authority.readsTags }.compactMap { held[$0.key]?.id }
        if !tagged.isEmpty {
            for row in try await db.query(Statements.RegisteredTags.self, [.ints(tagged)]) {
                if let id = row.int(0), let tag = row.string(1) { heldTags[id, default: []].append(tag) }
            }
        }
        var results = [Result<Device, any Error>?](repeating: nil, count: entries.count)
        var accepted: [(index: Int, key: String, registration: DeviceRegistration, row: JSONValue, protected: Set<String>)] = []
        for (index, entry) in entries.enumerated() {
            do {
                var existing: (userID: String?, tags: [String])?
                if entry.authority.readsDevice, let current = held[entry.key] {
                    existing = (current.userID, entry.authority.readsTags ? heldTags[current.id] ?? [] : [])
                }
                let registration = try RegistrationPolicy.apply(entry.asked, existing: existing, authority: entry.authority)
                accepted.append(
                    (
                        index, RegistrationBatch.key(entry.appID, registration.token), registration,
                        Self.upsertRow(entry.appID, registration, now: entry.now), entry.authority.protectedTags
                    ))
            } catch {
                results[index] = .failure(error)
            }
        }
        if !accepted.isEmpty {
            let json = JSONValue.array(accepted.map(\.row)).jsonString
            let rows = try await db.query(Statements.UpsertRegistered.self, [.text(json)])
            var stored: [String: Row] = [:]
            for row in rows { stored[RegistrationBatch.key(row.string(1), row.string(2))] = row }
            // Devices that were there before this group: their tags go. One this group inserted
            // has none (`inserted`: xmax = 0, the row is no earlier version's update; a device
            // the lock found is always updated).
            var replaced: [Int64] = []
            // A register key's devices keep their protected tags untouched, whatever this round's
            // lock saw: a device the backend inserted with them while this round waited (no row
            // to lock then, an update at the upsert) must not lose them.
            var guarded: [(id: Int64, protected: String)] = []
            var tagIDs: [Int64] = []
            var tags: [String] = []
            var devices: [(index: Int, row: Row, tags: [String])] = []
            for item in accepted {
                guard let row = stored[item.key], let id = row.int(0) else {
                    throw HeraldError(code: "internal", "the upsert returned nothing")
                }
                let own = Set(item.registration.tags).sorted()
                if row.bool(Statements.UpsertRegistered.inserted) != true {
                    if item.protected.isEmpty {
                        replaced.append(id)
                    } else {
                        guarded.append((id, JSONValue.array(item.protected.sorted().map(JSONValue.string)).jsonString))
                    }
                }
                for tag in own where !item.protected.contains(tag) || row.bool(Statements.UpsertRegistered.inserted) == true {
                    tagIDs.append(id)
                    tags.append(tag)
                }
                devices.append((item.index, row, own))
            }
            // A statement of its own, after the upsert: its snapshot sees the tags another group
            // committed while this one waited for the rows' locks (one statement with the upsert
            // would not, and would keep them beside these). None when every device is new (a
            // storm of fresh installs): a round trip less.
            if !replaced.isEmpty {
                try await db.query(Statements.DeleteRegisteredTags.self, [.ints(replaced)])
            }
            if !guarded.isEmpty {
                try await db.query(Statements.DeleteUnprotectedTags.self, [.ints(guarded.map(\.id)), .texts(guarded.map(\.protected))])
            }
            if !tags.isEmpty {
                try await db.query(Statements.InsertRegisteredTags.self, [.ints(tagIDs), .texts(tags)])
            }
            for device in devices { results[device.index] = .success(Self.device(device.row, tags: device.tags)) }
        }
        return results.map { $0 ?? .failure(HeraldError(code: "internal", "a registration had no outcome")) }
    }
}

/// A group's statements, the same text at every group: prepared once per connection. Their
/// plans are lookups by key whatever the tables hold (planning them at every group was ~40% of
/// PostgreSQL's time for a storm of registrations).
extension Statements {
    /// The devices of apps $1 and tokens $2 (pairwise), each locked in turn in the arrays' order
    /// (a round's, the same in every process). Each is looked up in the `(app_id, token)` index
    /// whatever the table's statistics: the join's generic plan, prepared, once read the whole
    /// table (1.7 ms a group).
    enum LockRegistered: FixedStatement {
        static let sql = """
            SELECT k.app_id, k.token, d.id, d.user_id FROM unnest($1::text[], $2::text[]) AS k(app_id, token)
            CROSS JOIN LATERAL (SELECT id, user_id FROM devices WHERE app_id = k.app_id AND token = k.token FOR UPDATE) d
            """
    }

    /// The tags of devices $1.
    enum RegisteredTags: FixedStatement {
        static let sql = "SELECT device_id, tag FROM device_tags WHERE device_id = ANY($1::bigint[])"
    }

    /// The registrations of JSON array $1 (``PostgresStore/upsertRow(_:_:now:)``), each inserted or over its device.
    enum UpsertRegistered: FixedStatement {
        static let sql = """
            \(PostgresStore.registrationInsert)
            SELECT r.app_id, r.token, r.kind, r.environment, r.user_id, r.locale, r.time_zone, r.app_version, r.platform,
                r.activity_id, r.attributes_type, TRUE, r.registered_at, r.registered_at, decode(r.public_key, 'base64'),
                r.public_key_type
            FROM json_to_recordset($1::json) AS r(app_id text, token text, kind text, environment text, user_id text,
                locale text, time_zone text, app_version text, platform text, activity_id text, attributes_type text,
                registered_at bigint, public_key text, public_key_type text)
            \(PostgresStore.registrationConflict)
            RETURNING \(PostgresStore.deviceColumns), xmax = 0
            """

        /// The returned column that says whether the row was inserted (true) or updated: the one
        /// after the device's.
        static let inserted = PostgresStore.deviceColumns.split(separator: ",").count
    }

    /// Devices $1's tags gone (before their registrations' own are written).
    enum DeleteRegisteredTags: FixedStatement {
        static let sql = "DELETE FROM device_tags WHERE device_id = ANY($1::bigint[])"
    }

    /// Devices $1's tags gone but those of the JSON arrays $2 (pairwise): the protected tags of
    /// a device a register key registered over.
    enum DeleteUnprotectedTags: FixedStatement {
        static let sql = """
            DELETE FROM device_tags t USING unnest($1::bigint[], $2::text[]) AS k(device_id, protected)
            WHERE t.device_id = k.device_id AND NOT (t.tag = ANY (ARRAY(SELECT json_array_elements_text(k.protected::json))))
            """
    }

    /// Tags $2 of devices $1 (pairwise).
    enum InsertRegisteredTags: FixedStatement {
        static let sql = "INSERT INTO device_tags (device_id, tag) SELECT * FROM unnest($1::bigint[], $2::text[])"
    }
}

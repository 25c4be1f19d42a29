// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldSQLite
import HeraldTesting
import Testing

@Suite("SQLite: the WAL checkpointed beside the writer", .heavy)
struct SQLiteCheckpointTests {
    @Test("steady writes keep the WAL within four times the checkpoint size, checkpoints run in the background, and every row is kept")
    func bounded() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-checkpoint")
        defer { directory.remove() }
        let path = directory.path + "/wal.sqlite"
        let pages = 50
        var largest = 0
        do {
            let database = try await Self.table(at: path, checkpointPages: pages)
            func insert(_ n: Int) async throws {
                try await database.write { db in try db.query("INSERT INTO t (id, body) VALUES (?, ?)", [.integer(Int64(n)), Self.row]) }
                largest = max(largest, Self.walFrames(path))
            }
            // ~90 pages: past the threshold, short of the writer's own checkpoint at 200. The first commit past 50
            // handed a checkpoint to the background; this waits for the ones handed over to end.
            for n in 0..<30 { try await insert(n) }
            let background = try await database.backgroundCheckpoints()
            #expect(background.runs >= 1)
            // It copied the pages itself (nothing else checkpoints below 200 pages before it has run).
            #expect(background.frames >= pages)
            for n in 30..<600 { try await insert(n) }
            // ~1,800 pages written; without checkpoints the WAL would hold them all.
            #expect(largest <= 4 * pages + 20, "the WAL reached \(largest) frames")
            // The erasure's checkpoint (TRUNCATE) waits for a background one still running rather than being refused as busy.
            #expect(try await database.checkpoint())
            #expect(Self.walFrames(path) == 0)
        }
        let reopened = try SQLiteDatabase(path: path)
        let counted = try await reopened.read { db in
            (try db.query("SELECT count(*), sum(length(body)) FROM t").first ?? [], try db.query("PRAGMA integrity_check").first ?? [])
        }
        #expect(counted.0 == [.integer(600), .integer(600 * 8192)])
        #expect(counted.1 == [.text("ok")])
    }

    @Test("the commit after each background checkpoint copies what it left, so the WAL restarts from its beginning")
    func tailAfterEveryRun() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-checkpoint")
        defer { directory.remove() }
        let path = directory.path + "/wal.sqlite"
        let database = try await Self.table(at: path, checkpointPages: 50)
        let salts = try Self.walSalts(path)
        var next: Int64 = 0
        func insert() async throws {
            let id = next
            try await database.write { db in try db.query("INSERT INTO t (id, body) VALUES (?, ?)", [.integer(id), Self.row]) }
            next += 1
        }
        // ~60 pages (three or so a row): the commit that crossed 50 handed a run to the
        // background. After the WAL restarts it cannot reach 50 again within these writes.
        for _ in 0..<20 { try await insert() }
        let settled = try await database.backgroundCheckpoints()
        #expect(settled.runs == 1)
        // A run that had caught up used to leave the restart to chance: the writer's next
        // transaction had to begin with every frame copied, which under steady writes it never
        // does (it is inside one when the run ends), so the WAL grew to the writer's own
        // checkpoint at four times the threshold. Now the commit after a run copies the rest.
        try await insert()
        #expect(try await database.backgroundCheckpoints().tails == 1)
        // Everything copied: the next transaction (at the latest) starts the WAL again from its first frame, with new salts.
        try await insert()
        #expect(try Self.walSalts(path) != salts)
        #expect(try await database.read { db in try db.query("SELECT count(*) FROM t").first ?? [] } == [.integer(next)])
    }

    /// A row of 8 KiB: one transaction that inserts it writes three pages or so.
    static let row = SQLValue.blob([UInt8](repeating: 7, count: 8192))

    /// A new database at `path` with table `t` (an id and a body).
    static func table(at path: String, checkpointPages: Int) async throws -> SQLiteDatabase {
        let database = try SQLiteDatabase(path: path, checkpointPages: checkpointPages)
        try await database.write { db in try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)") }
        return database
    }

    /// The two salts of the WAL's header, which SQLite draws anew each time the WAL restarts from its beginning.
    static func walSalts(_ path: String) throws -> [UInt8] {
        let handle = try #require(FileHandle(forReadingAtPath: path + "-wal"))
        defer { try? handle.close() }
        let header = try #require(try handle.read(upToCount: 24))
        return Array(header[16..<24])
    }

    /// The frames the WAL file has room for (it is reused from its start after a checkpoint, not shrunk).
    static func walFrames(_ path: String) -> Int {
        let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        return max(0, size - 32) / (4096 + 24)
    }
}

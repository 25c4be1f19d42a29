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
        // One transaction: a row of 8 KiB, three pages or so.
        let body = SQLValue.blob([UInt8](repeating: 7, count: 8192))
        var largest = 0
        do {
            let database = try SQLiteDatabase(path: path, checkpointPages: pages)
            try await database.write { db in try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)") }
            func insert(_ n: Int) async throws {
                try await database.write { db in try db.query("INSERT INTO t (id, body) VALUES (?, ?)", [.integer(Int64(n)), body]) }
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

    /// The frames the WAL file has room for (it is reused from its start after a checkpoint, not shrunk).
    static func walFrames(_ path: String) -> Int {
        let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        return max(0, size - 32) / (4096 + 24)
    }
}

// SPDX-License-Identifier: Apache-2.0
import CSQLite
import Foundation
import NIOPosix
import Synchronization

/// What SQLite said went wrong, with its result code.
package struct SQLiteError: Error, Sendable, CustomStringConvertible {
    package var code: Int32
    package var message: String

    package var description: String { "SQLite error \(self.code): \(self.message)" }

    /// A UNIQUE / PRIMARY KEY violation.
    package var isConstraintViolation: Bool { self.code & 0xFF == SQLITE_CONSTRAINT }
}

/// A value bound to or read from a statement.
package enum SQLValue: Sendable, Hashable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null

    package var int: Int64? { if case .integer(let value) = self { return value } else { return nil } }
    package var string: String? { if case .text(let value) = self { return value } else { return nil } }
    package var bytes: [UInt8]? { if case .blob(let value) = self { return value } else { return nil } }
}

/// One SQLite database file in WAL mode: one writer connection and a few reader connections.
///
/// Work runs as whole closures on threads of the database's own (`read`/`write`), so the
/// cooperative pool never blocks and a transaction's statements run back to back without a hop
/// between them. Writes queue, in order, for the one writer thread (SQLite allows one writer);
/// reads run at the same time on reader connections and see the last committed state (WAL
/// readers never wait for the writer). Prepared statements are cached per connection by SQL text.
package final class SQLiteDatabase: Sendable {
    private let writer: Mutex<Connection>
    private let readers: [Slot]
    private let freeReaders: Mutex<[Int]>
    private let writerThread: NIOThreadPool
    private let readerThreads: NIOThreadPool
    /// Writes waiting for the writer's next group commit (``writeGrouped(_:)``).
    private let group = Mutex(GroupQueue())
    /// Copies the WAL into the database file off the writer's thread.
    private let checkpointer: Checkpointer
    package let path: String

    /// Opens (creating if needed) `path` in WAL mode with foreign keys on, with `readers` reader
    /// connections. The WAL is checkpointed in the background once it holds `checkpointPages`
    /// pages (``Checkpointer``).
    package init(path: String, readers: Int = 2, checkpointPages: Int = 10_000) throws {
        self.path = path
        let writer = try Connection(path: path)
        try writer.execute("PRAGMA journal_mode = WAL")
        try writer.execute("PRAGMA synchronous = NORMAL")
        try Self.configure(writer)
        // The writer alone gets a larger page cache (16 MiB; the default is 2 MiB): a delivery
        // batch rewrites the same index pages again and again.
        try writer.execute("PRAGMA cache_size = -16384")
        // Emptied plaintext (end-to-end notifications) is overwritten in its page, not left in free space.
        try writer.execute("PRAGMA secure_delete = FAST")
        let checkpointing = try Connection(path: path)
        try Self.configure(checkpointing)
        // A connection checkpoints only once it has read the database and so opened its WAL.
        try checkpointing.query("SELECT count(*) FROM sqlite_master")
        self.checkpointer = Checkpointer(checkpointing, pages: checkpointPages)
        // Replaces SQLite's own checkpoint after commit (`wal_autocheckpoint`), which copied the
        // WAL and waited for two fsyncs on the writer's thread, with nothing committed meanwhile.
        sqlite3_wal_hook(writer.handle, Checkpointer.hook, Unmanaged.passUnretained(self.checkpointer).toOpaque())
        var slots: [Slot] = []
        for _ in 0..<max(1, readers) {
            let reader = try Connection(path: path)
            try Self.configure(reader)
            try reader.execute("PRAGMA query_only = 1")
            slots.append(Slot(reader))
        }
        self.writer = Mutex(writer)
        self.readers = slots
        self.freeReaders = Mutex(Array(slots.indices))
        self.writerThread = NIOThreadPool(numberOfThreads: 1)
        self.readerThreads = NIOThreadPool(numberOfThreads: max(1, readers))
        self.writerThread.start()
        self.readerThreads.start()
    }

    private static func configure(_ connection: borrowing Connection) throws {
        try connection.execute("PRAGMA foreign_keys = ON")
        try connection.execute("PRAGMA temp_store = MEMORY")
    }

    deinit {
        // The hook points at the checkpointer without holding it.
        self.writer.withLock { connection in _ = sqlite3_wal_hook(connection.handle, nil, nil) }
        self.writerThread.shutdownGracefully { _ in }
        self.readerThreads.shutdownGracefully { _ in }
    }

    /// Checkpoints run in the background, the WAL frames each found copied into the database
    /// file when it ended, added up, and the writer's own checkpoints of what a background run
    /// left (for tests and diagnostics): once every checkpoint handed over before this call has ended.
    package func backgroundCheckpoints() async throws -> (runs: Int, frames: Int, tails: Int) {
        try await self.checkpointer.settled()
    }

    /// Runs `body` inside one transaction (BEGIN IMMEDIATE … COMMIT) on the writer's thread;
    /// rolls back if it throws, so nothing half-written remains.
    @discardableResult
    package func write<Result: Sendable>(_ body: @escaping @Sendable (borrowing Connection) throws -> Result) async throws -> Result {
        try await self.writerThread.runIfActive {
            try self.writer.withLock { connection in
                try connection.execute("BEGIN IMMEDIATE")
                do {
                    let result = try body(connection)
                    try connection.execute("COMMIT")
                    return result
                } catch {
                    try? connection.execute("ROLLBACK")
                    throw error
                }
            }
        }
    }

    /// Runs `body` in the writer's next group commit: writes that arrive while the writer is busy
    /// queue, and the writer takes every queued one (up to ``groupLimit``) into one transaction,
    /// each in its own SAVEPOINT, commits once, and only then answers them all. A write that
    /// throws is rolled back to its savepoint and fails alone; the others commit. A failed
    /// COMMIT fails every write of the group. Nothing is answered before its commit.
    ///
    /// For small independent writes that many callers make at once (registrations): one
    /// transaction's WAL pages and thread hop serve the whole group.
    @discardableResult
    package func writeGrouped<Result: Sendable>(_ body: @escaping @Sendable (borrowing Connection) throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
            let write = GroupedWrite(
                run: { connection in
                    do {
                        try connection.query("SAVEPOINT grouped_write")
                        let result = try body(connection)
                        try connection.query("RELEASE grouped_write")
                        return { failure in
                            if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: result) }
                        }
                    } catch {
                        if connection.inTransaction {
                            try? connection.execute("ROLLBACK TO grouped_write; RELEASE grouped_write")
                        }
                        return { _ in continuation.resume(throwing: error) }
                    }
                },
                fail: { error in continuation.resume(throwing: error) }
            )
            let schedule = self.group.withLock { queue in
                queue.writes.append(write)
                defer { queue.scheduled = true }
                return !queue.scheduled
            }
            if schedule { self.scheduleGroup() }
        }
    }

    /// Writes queued for the next group commit and not yet taken by the writer.
    package var queuedGroupWrites: Int { self.group.withLock { $0.writes.count } }

    /// The most writes one group commit takes; the rest wait for the next (bounds a group's latency).
    package static let groupLimit = 512

    /// Asks the writer's thread for a group commit of the queued writes (behind the writes
    /// already in its queue).
    private func scheduleGroup() {
        self.writerThread.submit { state in
            guard case .active = state else {
                let stranded = self.group.withLock { queue in
                    defer { queue = GroupQueue() }
                    return queue.writes
                }
                for write in stranded { write.fail(SQLiteError(code: SQLITE_MISUSE, message: "the database is closed")) }
                return
            }
            self.commitGroup()
        }
    }

    /// On the writer's thread: takes the queued writes and commits them together.
    private func commitGroup() {
        let (writes, more) = self.group.withLock { queue in
            let taken = Array(queue.writes.prefix(Self.groupLimit))
            queue.writes.removeFirst(taken.count)
            // `scheduled` stays set while writes remain: the next group is asked for here.
            queue.scheduled = !queue.writes.isEmpty
            return (taken, queue.scheduled)
        }
        if more { self.scheduleGroup() }
        self.writer.withLock { connection in
            var answers: [@Sendable ((any Error)?) -> Void] = []
            answers.reserveCapacity(writes.count)
            var begun = false
            for write in writes {
                if !begun {
                    do {
                        try connection.execute("BEGIN IMMEDIATE")
                        begun = true
                    } catch {
                        write.fail(error)
                        continue
                    }
                }
                let answer = write.run(connection)
                if connection.inTransaction {
                    answers.append(answer)
                } else {
                    // SQLite rolled the whole transaction back (an I/O error, a full disk): the
                    // group's earlier writes are gone with it; the rest start a new one.
                    let lost = SQLiteError(code: SQLITE_ABORT, message: "the group's transaction was rolled back")
                    for earlier in answers { earlier(lost) }
                    answers.removeAll()
                    answer(lost)
                    begun = false
                }
            }
            guard begun else { return }
            do {
                try connection.execute("COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                for answer in answers { answer(error) }
                return
            }
            for answer in answers { answer(nil) }
        }
    }

    /// Copies the WAL's pages into the database file and truncates the WAL to zero bytes
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), on the writer's thread, between transactions. False
    /// when a reader's snapshot held it back (the WAL then keeps frames until the next one).
    @discardableResult
    package func checkpoint() async throws -> Bool {
        try await self.writerThread.runIfActive {
            try self.writer.withLock { connection in
                // Not beside a background checkpoint, which would make this one busy at once.
                try self.checkpointer.excluding {
                    try connection.query("PRAGMA wal_checkpoint(TRUNCATE)").first?.first?.int == 0
                }
            }
        }
    }

    /// Runs `body` on a reader connection, in one read transaction (one consistent snapshot).
    @discardableResult
    package func read<Result: Sendable>(_ body: @escaping @Sendable (borrowing Connection) throws -> Result) async throws -> Result {
        try await self.readerThreads.runIfActive {
            // As many reader threads as reader connections: one is always free here.
            guard let index = self.freeReaders.withLock({ $0.popLast() }) else {
                throw SQLiteError(code: SQLITE_BUSY, message: "no reader connection free")
            }
            defer { self.freeReaders.withLock { $0.append(index) } }
            return try self.readers[index].connection.withLock { connection in
                try connection.execute("BEGIN")
                defer { try? connection.execute("COMMIT") }
                return try body(connection)
            }
        }
    }

    /// Keeps the WAL short without stalling the writer. After each commit SQLite tells the
    /// writer's WAL hook how many pages the WAL holds; at `pages` or more, a checkpoint runs on
    /// a connection and thread of its own (`PASSIVE`: it copies what no reader still needs,
    /// beside the writer, and waits for the fsyncs there), again for the pages the writer added
    /// meanwhile (a few rounds at most, each shorter than the one before).
    ///
    /// The WAL restarts from its beginning only at a write transaction that begins with every
    /// frame copied. Under steady writes the writer is always inside a transaction when the
    /// background catches up, so the background alone never restarts it: the WAL would grow
    /// until the writer's own checkpoint at 4 × `pages`, and every commit in between would hand
    /// the background another run of a few frames, each with its two fsyncs, copying pages again
    /// that a single run would have copied once. So after each background run the writer's next
    /// commit copies what the run left (the frames of the commits made during its last round)
    /// itself, and its next transaction restarts the WAL. Should the background fall far behind
    /// (4 × `pages`), the writer checkpoints itself, as SQLite's own `wal_autocheckpoint` does.
    private final class Checkpointer: Sendable {
        private struct State {
            var running = false
            /// A background run has ended: the writer's next commit copies what it left.
            var tailDue = false
            /// The frames the WAL held after the writer's latest commit.
            var walFrames = 0
            var completed = 0
            /// The frames each run found backfilled when it ended, added up.
            var frames = 0
            /// The writer's checkpoints of what a background run left.
            var tails = 0
        }

        private let connection: Mutex<Connection>
        private let thread: NIOThreadPool
        private let pages: Int
        private let state = Mutex(State())

        init(_ connection: consuming Connection, pages: Int) {
            self.connection = Mutex(connection)
            self.pages = max(1, pages)
            self.thread = NIOThreadPool(numberOfThreads: 1)
            self.thread.start()
        }

        deinit {
            self.thread.shutdownGracefully { _ in }
        }

        /// Its counts once the checkpoints handed over so far have ended: its one thread runs
        /// jobs in order, so this waits behind them.
        func settled() async throws -> (runs: Int, frames: Int, tails: Int) {
            try await self.thread.runIfActive {}
            return self.state.withLock { ($0.completed, $0.frames, $0.tails) }
        }

        /// Runs `body` while no background checkpoint runs (it waits for one running now).
        func excluding<Result>(_ body: () throws -> Result) rethrows -> Result {
            try self.connection.withLock { _ in try body() }
        }

        static let hook: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32 = {
            context, handle, name, pages in
            guard let context, let handle else { return SQLITE_OK }
            Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(handle, name, pages: Int(pages))
            return SQLITE_OK
        }

        /// On the writer's thread, after a commit that left `pages` pages in the WAL.
        private func committed(_ writer: OpaquePointer, _ name: UnsafePointer<CChar>?, pages: Int) {
            enum Step { case none, here(behind: Bool), background }
            let step: Step = self.state.withLock { state in
                state.walFrames = pages
                if pages >= 4 * self.pages {
                    state.tailDue = false
                    return .here(behind: state.running)
                }
                if state.tailDue {
                    state.tailDue = false
                    state.tails += 1
                    return .here(behind: false)
                }
                guard pages >= self.pages, !state.running else { return .none }
                state.running = true
                return .background
            }
            switch step {
            case .none:
                break
            case .here(let behind):
                // Far behind: wait for the background's checkpoint to end (it holds its
                // connection while it runs), so that this one is not refused as busy.
                if behind { self.excluding {} }
                // A failure (a reader's snapshot) leaves the pages for the next checkpoint.
                _ = sqlite3_wal_checkpoint_v2(writer, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            case .background:
                self.thread.submit { state in
                    // Again while the writer added more than `tail` frames meanwhile (a few
                    // times at most), so that what the writer's next commit copies itself is
                    // short. The WAL's size is the writer's latest report: a round's own count
                    // is of the frames the WAL held when it began.
                    let tail = max(1, self.pages / 128)
                    var copied: Int32 = 0
                    if case .active = state {
                        self.connection.withLock { connection in
                            for _ in 0..<8 {
                                var done: Int32 = 0
                                guard sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, &done) == SQLITE_OK else {
                                    break
                                }
                                copied = max(copied, done)
                                if self.state.withLock({ $0.walFrames }) - Int(done) <= tail { break }
                            }
                        }
                    }
                    self.state.withLock { state in
                        state.running = false
                        state.tailDue = true
                        state.completed += 1
                        state.frames += Int(max(0, copied))
                    }
                }
            }
        }
    }

    private final class Slot: Sendable {
        let connection: Mutex<Connection>
        init(_ connection: consuming Connection) { self.connection = Mutex(connection) }
    }

    /// The connection: statements, bindings, rows. Only reachable inside `read`/`write`.
    package struct Connection: ~Copyable, @unchecked Sendable {
        fileprivate let handle: OpaquePointer
        private let cache: StatementCache

        /// Set once, before the process's first connection: no memory statistics (a global mutex
        /// on every allocation of every connection's thread). `SQLITE_OK`, or SQLite's refusal
        /// when something in the process had started SQLite first (the statistics then stay on).
        package static let memoryStatisticsOff: Int32 = herald_sqlite3_memory_statistics_off()

        fileprivate init(path: String) throws {
            _ = Self.memoryStatisticsOff
            var handle: OpaquePointer?
            let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
            let status = sqlite3_open_v2(path, &handle, flags, nil)
            guard status == SQLITE_OK, let handle else {
                let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
                if let handle { sqlite3_close_v2(handle) }
                throw SQLiteError(code: status, message: message)
            }
            // Before any statement, the WAL switch included: a lock that another connection
            // holds (one closing, which checkpoints under the file's exclusive lock; another
            // process) is waited for up to 5 s, not answered at once with "database is locked".
            sqlite3_busy_timeout(handle, 5000)
            self.handle = handle
            self.cache = StatementCache()
        }

        deinit {
            self.cache.finalizeAll()
            sqlite3_close_v2(self.handle)
        }

        /// Runs SQL without results (may hold several statements).
        package func execute(_ sql: String) throws {
            var error: UnsafeMutablePointer<CChar>?
            let status = sqlite3_exec(self.handle, sql, nil, nil, &error)
            if status != SQLITE_OK {
                let message = error.map { String(cString: $0) } ?? "unknown"
                sqlite3_free(error)
                throw SQLiteError(code: status, message: message)
            }
        }

        /// Runs one statement with `bindings` and returns every row.
        @discardableResult
        package func query(_ sql: String, _ bindings: [SQLValue] = []) throws -> [[SQLValue]] {
            var rows: [[SQLValue]] = []
            try self.each(sql, bindings) { row in rows.append(row.values) }
            return rows
        }

        /// Runs one statement with `bindings`, handing each row to `body` as a view that reads
        /// columns in place (nothing is copied unless asked for).
        package func each(_ sql: String, _ bindings: [SQLValue], _ body: (Row) throws -> Void) throws {
            try self.each(sql, bindings[...], body)
        }

        /// `each` with its bindings a part of a longer array (a few rows of many): not copied out.
        package func each(_ sql: String, _ bindings: ArraySlice<SQLValue>, _ body: (Row) throws -> Void) throws {
            let statement = try self.cache.statement(sql, handle: self.handle)
            // Text and blobs are copied once into one buffer that outlives the run and bound in
            // place: one allocation per statement instead of SQLite's copy of each value.
            let arena = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, Self.arenaSize(bindings)), alignment: 1)
            defer { arena.deallocate() }
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            try self.bind(bindings, to: statement, arena: arena)
            let row = Row(statement: statement)
            while true {
                let status = sqlite3_step(statement)
                if status == SQLITE_DONE { return }
                guard status == SQLITE_ROW else { throw self.error(status) }
                try body(row)
            }
        }

        /// The bytes of `bindings`' text and blobs.
        private static func arenaSize(_ bindings: ArraySlice<SQLValue>) -> Int {
            var size = 0
            for value in bindings {
                switch value {
                case .text(let text): size += text.utf8.count
                case .blob(let bytes): size += bytes.count
                case .integer, .real, .null: break
                }
            }
            return size
        }

        /// Binds `bindings`, their text and blobs copied into `arena` (which must outlive the
        /// statement's run and hold `arenaSize(bindings)` bytes) and bound from there.
        private func bind(_ bindings: ArraySlice<SQLValue>, to statement: OpaquePointer, arena: UnsafeMutableRawBufferPointer) throws {
            var used = 0
            /// `bytes` copied into the arena: their place there (never NULL, which would bind NULL).
            func place(_ bytes: UnsafeRawBufferPointer) -> UnsafeMutableRawPointer {
                let start = arena.baseAddress! + used
                if !bytes.isEmpty { start.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                used += bytes.count
                return start
            }
            for (index, value) in bindings.enumerated() {
                let position = Int32(index + 1)
                let status: Int32
                switch value {
                case .integer(let number): status = sqlite3_bind_int64(statement, position, number)
                case .real(let number): status = sqlite3_bind_double(statement, position, number)
                case .text(var text):
                    status = text.withUTF8 { utf8 in
                        let start = place(UnsafeRawBufferPointer(utf8))
                        return sqlite3_bind_text(statement, position, start.assumingMemoryBound(to: CChar.self), Int32(utf8.count), Self.static)
                    }
                case .blob(let bytes):
                    status = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, position, place($0), Int32($0.count), Self.static) }
                case .null: status = sqlite3_bind_null(statement, position)
                }
                guard status == SQLITE_OK else { throw self.error(status) }
            }
        }

        /// The current row of a running statement; valid only inside `each`'s closure.
        package struct Row {
            fileprivate let statement: OpaquePointer

            package var count: Int { Int(sqlite3_column_count(self.statement)) }

            package func isNull(_ column: Int) -> Bool { sqlite3_column_type(self.statement, Int32(column)) == SQLITE_NULL }

            package func int(_ column: Int) -> Int64? {
                self.isNull(column) ? nil : sqlite3_column_int64(self.statement, Int32(column))
            }

            package func string(_ column: Int) -> String? {
                guard let text = sqlite3_column_text(self.statement, Int32(column)) else { return nil }
                let count = Int(sqlite3_column_bytes(self.statement, Int32(column)))
                return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
            }

            package func bytes(_ column: Int) -> [UInt8]? {
                guard !self.isNull(column) else { return nil }
                let count = Int(sqlite3_column_bytes(self.statement, Int32(column)))
                guard let pointer = sqlite3_column_blob(self.statement, Int32(column)), count > 0 else { return [] }
                return Array(UnsafeRawBufferPointer(start: pointer, count: count))
            }

            /// Every column as a value.
            package var values: [SQLValue] {
                var row: [SQLValue] = []
                row.reserveCapacity(self.count)
                for column in 0..<Int32(self.count) {
                    switch sqlite3_column_type(self.statement, column) {
                    case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(self.statement, column)))
                    case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(self.statement, column)))
                    case SQLITE_TEXT: row.append(.text(self.string(Int(column)) ?? ""))
                    case SQLITE_BLOB: row.append(.blob(self.bytes(Int(column)) ?? []))
                    default: row.append(.null)
                    }
                }
                return row
            }
        }

        /// Whether a transaction is open (SQLite rolls one back by itself on some errors).
        package var inTransaction: Bool { sqlite3_get_autocommit(self.handle) == 0 }

        /// Rows changed by the last statement.
        package var changes: Int { Int(sqlite3_changes(self.handle)) }

        package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(self.handle) }

        private func error(_ status: Int32) -> SQLiteError {
            SQLiteError(code: sqlite3_extended_errcode(self.handle), message: String(cString: sqlite3_errmsg(self.handle)))
        }

        /// SQLite uses a bound value in place, without copying it.
        private static let `static` = unsafeBitCast(0, to: sqlite3_destructor_type.self)
    }
}

/// Writes waiting for a group commit, and whether the writer has been asked to take them.
private struct GroupQueue {
    var writes: [GroupedWrite] = []
    var scheduled = false
}

/// One caller's write in a group commit: runs it in the group's transaction and returns how to answer the caller once the commit's outcome is
/// known (nil: committed).
private struct GroupedWrite: Sendable {
    let run: @Sendable (borrowing SQLiteDatabase.Connection) -> @Sendable ((any Error)?) -> Void
    /// Answers the caller with `error` without running its write.
    let fail: @Sendable (any Error) -> Void
}

/// Prepared statements by SQL text, for one connection.
private final class StatementCache: @unchecked Sendable {
    private var statements: [String: OpaquePointer] = [:]

    func statement(_ sql: String, handle: OpaquePointer) throws -> OpaquePointer {
        if let statement = self.statements[sql] { return statement }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else {
            throw SQLiteError(code: status, message: String(cString: sqlite3_errmsg(handle)) + " in: \(sql.prefix(200))")
        }
        if self.statements.count > 256 {
            // Only idle ones: a statement still stepping (an outer `each`) must stay alive.
            for (text, cached) in self.statements where sqlite3_stmt_busy(cached) == 0 {
                sqlite3_finalize(cached)
                self.statements[text] = nil
            }
        }
        self.statements[sql] = statement
        return statement
    }

    func finalizeAll() {
        for statement in self.statements.values { sqlite3_finalize(statement) }
        self.statements.removeAll()
    }
}

// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import HeraldTesting
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization
import Testing

@testable import HeraldPostgres

/// A statement is checked and written in one turn of its connection's event loop, so that one
/// written to a connection the server has closed is refused instead of waiting for ever
/// (postgres-nio 1.33 never answers a statement that reaches a closed channel).
@Suite struct PostgresStatementTests {
    /// What a statement's first synchronous steps see: whether they ran on the loop, and whether
    /// the loop had taken a turn since the caller's check.
    struct Seen: Sendable {
        var onLoop: Bool
        var turned: Bool
    }

    /// Stands for postgres-nio's `query`: a nonisolated async function of another type, whose
    /// first steps (up to its write) run before it first suspends.
    final class Writer: Sendable {
        let loop: any EventLoop
        let turned: Mutex<Bool>

        init(loop: any EventLoop) {
            self.loop = loop
            self.turned = Mutex(false)
        }

        func write() async -> Seen {
            Seen(onLoop: self.loop.inEventLoop, turned: self.turned.withLock { $0 })
        }
    }

    @Test("under the loop's executor, the check and the statement's first steps run on the loop, with no turn of the loop between them")
    func oneTurn() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let writer = Writer(loop: loop)
        let executor = EventLoopTaskExecutor(loop)
        let (checked, seen) = await withTaskExecutorPreference(executor) { () async -> (Bool, Seen) in
            let checked = loop.inEventLoop
            // A turn of the loop (such as a close) queued now cannot come before the write below.
            loop.execute { writer.turned.withLock { $0 = true } }
            return (checked, await writer.write())
        }
        #expect(checked)
        #expect(seen.onLoop)
        #expect(!seen.turned)
        // Once the task does wait, the loop turns: the probe above could have seen it.
        try await loop.submit {}.get()
        #expect(writer.turned.withLock { $0 })
    }

    @Test(
        "a statement on a connection the server has closed is refused as database_unavailable, not left waiting",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)), .timeLimit(.minutes(10))
    )
    func closedConnection() async throws {
        try await PostgresTestDatabase.with { database in
            try await PostgresStore.withStore(url: database.url, logger: Logger(label: "test")) { store in
                try await store.read { db in
                    let pid = try #require(try await db.query("SELECT pg_backend_pid()").first?.int(0))
                    // Another connection of the pool ends this one's backend, as DROP DATABASE
                    // WITH (FORCE) or a restart would; the client sees its channel close.
                    try await store.read { other in _ = try await other.query("SELECT pg_terminate_backend($1::int)", [.int(pid)]) }
                    try await db.connection.closeFuture.get()
                    for statement in ["SELECT 1", "ROLLBACK"] {
                        do {
                            try await db.execute(statement)
                            Issue.record("\(statement) on a closed connection answered")
                        } catch let error as HeraldError {
                            #expect(error.code == "database_unavailable", "\(error)")
                        }
                    }
                }
            }
        }
    }
}

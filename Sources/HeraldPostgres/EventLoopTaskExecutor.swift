// SPDX-License-Identifier: Apache-2.0
package import NIOCore

/// A task executor that runs its jobs on one NIO event loop: async code that belongs to one
/// channel runs where the channel's own handlers do, in turns of its loop.
///
/// - PostgreSQL statements (``Connection``): postgres-nio (1.33) writes each statement to its
///   channel without a promise for the write, so a statement that reaches the channel after it
///   closed (and its handlers were taken away) is never answered, and whoever waits for it waits
///   for ever: a worker that cannot stop, a server that cannot shut down. Checked from another
///   thread, "the channel is still open" can be stale by the time the write lands (a close
///   between the two, which a busy machine makes wide). Run on the channel's own event loop, the
///   check and the write happen in one turn of the loop, before any close can: a channel open
///   there has its handlers, which answer every statement.
/// - The API's registration lane: a registration read by a connection's handler is handed over,
///   checked and answered on that connection's loop, not on the concurrency pool with a hop back
///   to the loop at each step.
package final class EventLoopTaskExecutor: TaskExecutor {
    package let loop: any EventLoop

    package init(_ loop: any EventLoop) { self.loop = loop }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

// SPDX-License-Identifier: Apache-2.0
import NIOCore

/// When a connection must have sent a complete request head: the clock starts with the first
/// byte of a request (on a new connection, or after the previous response ended) and stops when
/// the head is decoded. A connection that sends nothing is the idle timeout's business.
///
/// One timer per connection, set lazily: a head that completes in time leaves the timer as it
/// is, and when it fires it either finds no head being read (and is not set again until the
/// next request starts), finds the current head's deadline passed (close), or is set again for
/// that deadline. A busy keep-alive connection so costs one timer per `timeout`, not one per
/// request.
///
/// Plain values, no I/O: ``RequestHeadTimeoutHandler`` feeds it the channel's events with the
/// time, and does what it answers.
struct RequestHeadDeadline: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// No request in progress and no byte of the next one yet.
        case waiting
        /// Bytes of a request arrived; its head must be complete by `deadline`.
        case readingHead(deadline: NIODeadline)
        /// Heads decoded whose responses have not ended yet.
        case inRequest(count: Int)
    }

    enum Action: Sendable, Equatable {
        case none
        /// Set the connection's timer to fire at this time (no timer is set now).
        case setTimer(NIODeadline)
        /// The head did not arrive in time: answer 408 and close.
        case close
    }

    let timeout: TimeAmount
    private(set) var state = State.waiting
    /// When the connection's timer fires, if one is set.
    private(set) var timer: NIODeadline?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    /// Bytes arrived from the client (`now` is read only when they start a request).
    mutating func bytesRead(now: @autoclosure () -> NIODeadline) -> Action {
        guard case .waiting = self.state else { return .none }
        let deadline = now() + self.timeout
        self.state = .readingHead(deadline: deadline)
        guard self.timer == nil else { return .none }
        self.timer = deadline
        return .setTimer(deadline)
    }

    /// The decoder produced a request head.
    mutating func headRead() {
        switch self.state {
        case .waiting, .readingHead:
            self.state = .inRequest(count: 1)
        case .inRequest(let count):
            // A pipelined request: its head was read while an earlier one was answered.
            self.state = .inRequest(count: count + 1)
        }
    }

    /// A response was written to its end.
    mutating func responseEnded() {
        if case .inRequest(let count) = self.state {
            self.state = count > 1 ? .inRequest(count: count - 1) : .waiting
        }
    }

    /// The timer set by `.setTimer` fired.
    mutating func timerFired(now: NIODeadline) -> Action {
        self.timer = nil
        guard case .readingHead(let deadline) = self.state else { return .none }
        guard now < deadline else { return .close }
        self.timer = deadline
        return .setTimer(deadline)
    }
}

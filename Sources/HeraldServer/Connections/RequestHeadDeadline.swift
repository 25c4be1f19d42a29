// SPDX-License-Identifier: Apache-2.0

/// When a connection must have sent a complete request head: the clock starts with the first
/// byte of a request (on a new connection, or after the previous response ended) and stops when
/// the head is decoded. A connection that sends nothing is the idle timeout's business.
///
/// Plain values, no I/O: ``RequestHeadTimeoutHandler`` feeds it the channel's events and does
/// what it answers.
struct RequestHeadDeadline: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// No request in progress and no byte of the next one yet.
        case waiting
        /// Bytes of a request arrived; its head is not complete yet (the timer runs).
        case readingHead
        /// Heads decoded whose responses have not ended yet.
        case inRequest(count: Int)
    }

    enum Action: Sendable, Equatable {
        case none
        case startTimer
        case cancelTimer
        /// The head did not arrive in time: answer 408 and close.
        case close
    }

    private(set) var state = State.waiting

    /// Bytes arrived from the client.
    mutating func bytesRead() -> Action {
        guard case .waiting = self.state else { return .none }
        self.state = .readingHead
        return .startTimer
    }

    /// The decoder produced a request head.
    mutating func headRead() -> Action {
        switch self.state {
        case .waiting:
            self.state = .inRequest(count: 1)
            return .none
        case .readingHead:
            self.state = .inRequest(count: 1)
            return .cancelTimer
        case .inRequest(let count):
            // A pipelined request: its head was read while an earlier one was answered.
            self.state = .inRequest(count: count + 1)
            return .none
        }
    }

    /// A response was written to its end.
    mutating func responseEnded() -> Action {
        if case .inRequest(let count) = self.state {
            self.state = count > 1 ? .inRequest(count: count - 1) : .waiting
        }
        return .none
    }

    /// The timer started by `.startTimer` fired.
    mutating func timerFired() -> Action {
        guard case .readingHead = self.state else { return .none }
        return .close
    }
}

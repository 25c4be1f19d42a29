// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore
import NIOPosix
import Synchronization

extension APNSClient {
    /// Pushes every request of `requests`, keeping up to `maxInFlight` between the input and the
    /// results, and hands each outcome to `onResult` as it arrives (not in input order).
    ///
    /// Input is read in a child task while results are delivered here, so a slow input never
    /// holds back results and a slow `onResult` holds back the input (back-pressure). Returns
    /// when every request read has its outcome; rethrows an error of the input or of `onResult`
    /// (requests already on the wire then finish unobserved).
    ///
    /// - Parameter maxInFlight: defaults to 1500 per connection: enough to keep APNs's
    ///   1000 streams per connection busy while results are handled.
    public func send<Requests: AsyncSequence & Sendable>(
        _ requests: Requests,
        maxInFlight: Int? = nil,
        timeout: Duration? = nil,
        onResult: (APNSOutcome) async throws -> Void
    ) async throws where Requests.Element == APNSRequest {
        let window = max(1, maxInFlight ?? self.configuration.connections * 1500)
        let timeout = TimeAmount(timeout ?? self.configuration.requestTimeout)
        let collector = OutcomeCollector(window: window)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var count = 0
                // One notification's requests share one payload: parsed as JSON once.
                var checkedPayload: [UInt8]? = nil
                do {
                    for try await request in requests {
                        guard await collector.acquire() else { break }
                        count += 1
                        await self.submit(request, timeout: timeout, checkedPayload: &checkedPayload) { request, result in
                            collector.append(APNSOutcome(request: request, result: result))
                        }
                    }
                    collector.inputFinished(count: count, error: nil)
                } catch {
                    collector.inputFinished(count: count, error: error)
                }
            }
            do {
                while let batch = await collector.next() {
                    for outcome in batch { try await onResult(outcome) }
                }
            } catch {
                collector.cancel()
                throw error
            }
            if let error = collector.inputError { throw error }
        }
    }
}

extension APNSClient {
    /// ``send(_:maxInFlight:timeout:onResult:)`` for requests already in hand: read without
    /// suspending (an `AsyncStream` would take a lock and a continuation per request).
    public func send(
        _ requests: [APNSRequest],
        maxInFlight: Int? = nil,
        timeout: Duration? = nil,
        onResult: (APNSOutcome) async throws -> Void
    ) async throws {
        try await self.send(RequestList(requests: requests), maxInFlight: maxInFlight, timeout: timeout, onResult: onResult)
    }
}

/// An array of requests as an async sequence that never suspends.
struct RequestList: AsyncSequence, Sendable {
    let requests: [APNSRequest]

    struct AsyncIterator: AsyncIteratorProtocol {
        let requests: [APNSRequest]
        var index = 0

        mutating func next() async -> APNSRequest? {
            guard self.index < self.requests.count else { return nil }
            defer { self.index += 1 }
            return self.requests[self.index]
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(requests: self.requests) }
}

/// Outcomes handed from the event loop to the consumer in batches (one wake-up per batch, not
/// per result), and the window of requests between input and consumer.
final class OutcomeCollector: Sendable {
    private struct State: ~Copyable {
        var outcomes: [APNSOutcome] = []
        var consumer: UnsafeContinuation<[APNSOutcome]?, Never>?
        /// A waiting consumer is to be woken once the event loop has handled what it read.
        var wakeScheduled = false
        var permits: Int
        var producer: UnsafeContinuation<Bool, Never>?
        var delivered = 0
        var expected: Int?
        var inputError: (any Error)?
        var cancelled = false
    }

    private let state: Mutex<State>

    init(window: Int) {
        self.state = Mutex(State(permits: window))
    }

    var inputError: (any Error)? { self.state.withLock { $0.inputError } }

    /// Whether a consumer is waiting in ``next()``.
    var consumerWaits: Bool { self.state.withLock { $0.consumer != nil } }

    /// One place in the window; `false` once the consumer gave up.
    func acquire() async -> Bool {
        let fast: Bool? = self.state.withLock { state in
            if state.cancelled { return false }
            if state.permits > 0 {
                state.permits -= 1
                return true
            }
            return nil
        }
        if let fast { return fast }
        return await withUnsafeContinuation { continuation in
            let answer: Bool? = self.state.withLock { state in
                if state.cancelled { return false }
                if state.permits > 0 {
                    state.permits -= 1
                    return true
                }
                state.producer = continuation
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Called on the connection's event loop as each answer is read. A waiting consumer is not
    /// woken at once but by a task behind everything the loop read together: the answers to a
    /// burst of requests come in a few reads, and each read's outcomes then cost one wake-up
    /// of the consumer (and of a producer waiting for room), not one per outcome.
    func append(_ outcome: APNSOutcome) {
        let schedule = self.state.withLock { state -> Bool in
            state.outcomes.append(outcome)
            guard state.consumer != nil, !state.wakeScheduled else { return false }
            state.wakeScheduled = true
            return true
        }
        guard schedule else { return }
        if let loop = MultiThreadedEventLoopGroup.currentEventLoop {
            loop.execute { self.wakeConsumer() }
        } else {
            self.wakeConsumer()
        }
    }

    private func wakeConsumer() {
        let consumer = self.state.withLock { state -> UnsafeContinuation<[APNSOutcome]?, Never>? in
            state.wakeScheduled = false
            guard let consumer = state.consumer else { return nil }
            state.consumer = nil
            return consumer
        }
        consumer?.resume(returning: self.takeBatch())
    }

    func inputFinished(count: Int, error: (any Error)?) {
        let consumer = self.state.withLock { state -> UnsafeContinuation<[APNSOutcome]?, Never>? in
            state.expected = count
            state.inputError = error
            guard let consumer = state.consumer else { return nil }
            state.consumer = nil
            return consumer
        }
        consumer?.resume(returning: self.takeBatch())
    }

    /// The outcomes since the last call, waiting for at least one; `nil` when all are delivered.
    func next() async -> [APNSOutcome]? {
        switch self.takeBatch() {
        case nil: return nil
        case let batch? where !batch.isEmpty: return batch
        default: break
        }
        return await withUnsafeContinuation { continuation in
            let ready = self.state.withLock { state -> Bool in
                if !state.outcomes.isEmpty || state.expected == state.delivered { return true }
                state.consumer = continuation
                return false
            }
            if ready { continuation.resume(returning: self.takeBatch()) }
        }
    }

    /// Takes the pending outcomes and returns their permits; `[]` when there are none yet,
    /// `nil` when everything expected was delivered.
    private func takeBatch() -> [APNSOutcome]? {
        let (batch, producer) = self.state.withLock { state -> ([APNSOutcome]?, UnsafeContinuation<Bool, Never>?) in
            if state.outcomes.isEmpty {
                return (state.expected == state.delivered ? nil : [], nil)
            }
            let batch = state.outcomes
            state.outcomes = []
            state.outcomes.reserveCapacity(batch.count)
            state.delivered += batch.count
            state.permits += batch.count
            let producer = state.producer
            state.producer = nil
            if producer != nil { state.permits -= 1 }
            return (batch, producer)
        }
        producer?.resume(returning: true)
        return batch
    }

    func cancel() {
        let producer = self.state.withLock { state -> UnsafeContinuation<Bool, Never>? in
            state.cancelled = true
            let producer = state.producer
            state.producer = nil
            return producer
        }
        producer?.resume(returning: false)
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore
import Testing

@testable import APNSClient

/// Which unanswered streams the client sends again, on plain values: only what APNs cannot
/// have processed; what it may have processed comes back as an unknown outcome.
@Suite struct ResendPolicyTests {
    let policy = ResendPolicy(maximumResends: 3)
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    var later: NIODeadline { self.now + .seconds(10) }

    @Test("a written stream whose connection ended is an unknown outcome: never resent, however early, however few sends")
    func connectionLost() throws {
        for sends in [1, 2, 4] {
            let decision = self.policy.decide(
                .connectionLost(reason: "PING unanswered"), sends: sends, written: true, deadline: self.later, now: self.now)
            guard case .fail(let error) = decision else {
                Issue.record("resent after a lost connection: \(decision)")
                continue
            }
            #expect(error.code == .unknownOutcome)
            #expect(error.outcomeUnknown)
            #expect(error.message.contains("PING unanswered"))
            #expect(error.failureClass == .retryLater)
        }
    }

    @Test("a stream APNs did not process is resent within maximumResends, then fails as connectionFailed, not unknown")
    func notProcessed() {
        for sends in 1...3 {
            #expect(
                self.policy.decide(.notProcessed(reason: "REFUSED_STREAM"), sends: sends, written: true, deadline: self.later, now: self.now)
                    == .resend(counts: true))
        }
        let decision = self.policy.decide(.notProcessed(reason: "REFUSED_STREAM"), sends: 4, written: true, deadline: self.later, now: self.now)
        guard case .fail(let error) = decision else {
            Issue.record("resent beyond maximumResends")
            return
        }
        #expect(error.code == .connectionFailed)
        #expect(!error.outcomeUnknown, "never processed: APNs did not deliver it")
    }

    @Test("a request handed back unwritten is resent without counting a send")
    func neverWritten() {
        #expect(
            self.policy.decide(.notProcessed(reason: "no stream"), sends: 0, written: false, deadline: self.later, now: self.now)
                == .resend(counts: false))
    }

    @Test("a stream not processed past its deadline fails as deadlineExceeded, known undelivered")
    func notProcessedPastDeadline() {
        let decision = self.policy.decide(.notProcessed(reason: "GOAWAY"), sends: 1, written: true, deadline: self.now, now: self.now)
        guard case .fail(let error) = decision else {
            Issue.record("resent past its deadline")
            return
        }
        #expect(error.code == .deadlineExceeded)
        #expect(!error.outcomeUnknown)
    }

    @Test("a deadline passed in flight is an unknown outcome")
    func deadlineInFlight() {
        let error = ResendPolicy.deadlinePassedInFlight()
        #expect(error.code == .deadlineExceeded)
        #expect(error.outcomeUnknown)
    }
}

/// The connection's state machine marks what APNs may have processed, on plain values.
@Suite struct UnknownOutcomeStateMachineTests {
    /// The error of a `.failed` action, nil for any other.
    static func error(_ action: APNSConnection.StateMachine.FrameAction) -> APNSClientError? {
        if case .failed(_, let error) = action { return error }
        return nil
    }

    @Test("a stream reset with a code other than REFUSED_STREAM fails with an unknown outcome; a refused one is resent")
    func reset() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        #expect(try harness.submit(tag: 1))
        #expect(try harness.submit(tag: 2))
        var reader = HTTP2FrameReader()
        var bytes = ByteBuffer(bytes: Frames.rstStream(stream: 1, code: 7) + Frames.rstStream(stream: 3, code: 2))
        reader.append(&bytes)
        let refused = harness.machine.frameReceived(try #require(try reader.next()))
        let reset = harness.machine.frameReceived(try #require(try reader.next()))
        #expect(Self.error(refused) == nil)
        #expect(Self.error(reset)?.outcomeUnknown == true)
    }

    @Test("a close after GOAWAY fails the streams at or below its last-stream-id as unknown outcomes; the rest are unanswered")
    func goAwayThenClose() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        #expect(try harness.submit(tag: 1))
        #expect(try harness.submit(tag: 2))
        _ = harness.receive(Frames.goAway(lastStreamID: 1, code: 0))
        let closed = harness.machine.closed()
        let termination = try #require(closed)
        #expect(termination.outcomes.compactMap(Self.error).map(\.outcomeUnknown) == [true])

        var lost = ClientConnectionHarness()
        _ = lost.ready()
        #expect(try lost.submit(tag: 1))
        let lostClosed = lost.machine.closed()
        let dropped = try #require(lostClosed)
        #expect(dropped.unanswered.map(\.request.tag) == [1], "written, unanswered: the pool reports it as an unknown outcome")
    }
}

// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNSEmulator

/// APNs's connection behaviour on plain values: requests read to their end, the stream-limit
/// ramp, GOAWAY's boundary.
@Suite struct ConnectionHandlerStateMachineTests {
    typealias Machine = APNSConnectionHandler.StateMachine

    static func machine(dropAfterRejection: Bool = false) -> Machine {
        Machine(maxConcurrentStreams: 1000, dropStreamLimitAfterRejection: dropAfterRejection, allocator: ByteBufferAllocator())
    }

    static func headers(_ stream: Int, endStream: Bool) -> HTTP2Frame {
        var headers = HPACKHeaders()
        headers.add(name: ":path", value: "/3/device/x")
        return HTTP2Frame(streamID: HTTP2StreamID(stream), payload: .headers(.init(headers: headers, endStream: endStream)))
    }

    static func data(_ stream: Int, _ count: Int, endStream: Bool, padding: Int? = nil) -> HTTP2Frame {
        let bytes = ByteBuffer(repeating: 0x41, count: count)
        return HTTP2Frame(
            streamID: HTTP2StreamID(stream), payload: .data(.init(data: .byteBuffer(bytes), endStream: endStream, paddingBytes: padding)))
    }

    /// The body of a completed request, or nil when the action is another.
    static func completed(_ action: Machine.FrameAction) -> (body: Int, oversized: Bool, windowUpdate: Int?)? {
        guard case .requestComplete(let pending, let windowUpdate) = action else { return nil }
        return (pending.body.readableBytes, pending.oversized, windowUpdate)
    }

    @Test("a request is read to its end: HEADERS, then DATA until END_STREAM, or trailers")
    func requests() throws {
        var machine = Self.machine()
        guard case .none = machine.frameReceived(Self.headers(1, endStream: false)) else {
            Issue.record("HEADERS alone ended it")
            return
        }
        guard case .none = machine.frameReceived(Self.data(1, 10, endStream: false)) else {
            Issue.record("DATA ended it early")
            return
        }
        let done = try #require(Self.completed(machine.frameReceived(Self.data(1, 5, endStream: true))))
        #expect(done.body == 15 && !done.oversized && done.windowUpdate == nil)
        #expect(machine.isIdle)

        _ = machine.frameReceived(Self.headers(3, endStream: false))
        let trailers = try #require(Self.completed(machine.frameReceived(Self.headers(3, endStream: true))))
        #expect(trailers.body == 0)
        #expect(machine.highestStreamID == 3)
        // DATA for a stream no longer being read is dropped.
        guard case .none = machine.frameReceived(Self.data(3, 1, endStream: true)) else {
            Issue.record("late DATA was used")
            return
        }
    }

    @Test("a body over the cap keeps cap + 1 bytes and grants window for the rest until its end")
    func oversized() throws {
        var machine = Self.machine()
        _ = machine.frameReceived(Self.headers(1, endStream: false))
        guard case .none = machine.frameReceived(Self.data(1, 10, endStream: false)) else {
            Issue.record("window granted within the cap")
            return
        }
        guard case .windowUpdate(let first) = machine.frameReceived(Self.data(1, 6000, endStream: false, padding: 3)) else {
            Issue.record("no window granted for the oversized DATA")
            return
        }
        #expect(first == 10 + 6004)  // all flow-controlled bytes so far, padding included
        guard case .windowUpdate(let next) = machine.frameReceived(Self.data(1, 100, endStream: false)) else {
            Issue.record("no window granted for the rest")
            return
        }
        #expect(next == 100)
        let done = try #require(Self.completed(machine.frameReceived(Self.data(1, 100, endStream: true))))
        #expect(done.body == Machine.bodyCap + 1 && done.oversized && done.windowUpdate == nil)
    }

    @Test("a reset drops the request and an answer held back for it")
    func reset() {
        var machine = Self.machine()
        _ = machine.frameReceived(Self.headers(1, endStream: false))
        machine.answerDelayed(3)
        guard case .reset = machine.frameReceived(HTTP2Frame(streamID: 1, payload: .rstStream(.cancel))) else {
            Issue.record("no reset")
            return
        }
        _ = machine.frameReceived(HTTP2Frame(streamID: 3, payload: .rstStream(.cancel)))
        #expect(machine.isIdle)
        let due = machine.delayedAnswerDue(3)
        #expect(!due)
    }

    @Test("the first authenticated request opens the full stream limit; with the option, rejections drop it to 1")
    func streamLimitRamp() {
        var machine = Self.machine()
        #expect(machine.processed(1, accepted: true, status: 200, firstAuthentication: true, authenticated: true) == [1000])
        #expect(machine.processed(3, accepted: true, status: 200, firstAuthentication: false, authenticated: true) == [])

        var dropping = Self.machine(dropAfterRejection: true)
        // A first request rejected after authenticating: the limit opens, then drops.
        #expect(dropping.processed(1, accepted: false, status: 400, firstAuthentication: true, authenticated: true) == [1000, 1])
        #expect(dropping.processed(3, accepted: false, status: 410, firstAuthentication: false, authenticated: true) == [])
        #expect(dropping.processed(5, accepted: true, status: 200, firstAuthentication: false, authenticated: true) == [1000])
        #expect(dropping.processed(7, accepted: false, status: 403, firstAuthentication: false, authenticated: false) == [])
        #expect(dropping.highestProcessedStreamID == 7)
    }

    @Test("the stream-limit fault refuses the requests still being read beyond it, never ones already processed")
    func streamLimitFault() {
        var machine = Self.machine()
        for stream in [3, 5, 7] { _ = machine.frameReceived(Self.headers(stream, endStream: false)) }
        machine.answerDelayed(1)
        // Limit 3 while judging one request, one answer held back: one more fits.
        let (limit, refuse) = machine.streamLimitFault(3)
        #expect(limit == 3)
        #expect(refuse == [5, 7])
        #expect(machine.loweredByFault)
        // Lowered by a fault, the ramp no longer raises it.
        #expect(machine.processed(9, accepted: true, status: 200, firstAuthentication: true, authenticated: true) == [])
        #expect(machine.streamLimitFault(-1).limit == 0)
    }

    @Test("GOAWAY's boundary: requests above it are refused unprocessed; only the first GOAWAY goes out")
    func goAwayBoundary() {
        var machine = Self.machine()
        _ = machine.processed(5, accepted: true, status: 200, firstAuthentication: false, authenticated: true)
        #expect(machine.admit(9))
        let early = machine.goAwayFault(3)
        #expect(early.answerFirst && early.boundary == 5)
        #expect(machine.admit(5) && !machine.admit(7))

        var inOrder = Self.machine()
        _ = inOrder.processed(3, accepted: true, status: 200, firstAuthentication: false, authenticated: true)
        let fault = inOrder.goAwayFault(9)
        #expect(!fault.answerFirst && fault.boundary == 7)

        let first = inOrder.sendGoAway()
        let second = inOrder.sendGoAway()
        #expect(first && !second)
    }

    @Test("closing sets the boundary at the highest stream seen and waits for the requests below it")
    func closing() {
        var machine = Self.machine()
        _ = machine.frameReceived(Self.headers(1, endStream: false))
        _ = machine.frameReceived(Self.headers(3, endStream: true))
        #expect(machine.closing() == 3)
        #expect(machine.waitingBelowBoundary)
        _ = machine.frameReceived(Self.data(1, 1, endStream: true))
        #expect(!machine.waitingBelowBoundary)
        machine.answerDelayed(3)
        #expect(machine.waitingBelowBoundary)
        let due = machine.delayedAnswerDue(3)
        #expect(due)
        #expect(!machine.waitingBelowBoundary)
    }
}

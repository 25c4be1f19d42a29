// SPDX-License-Identifier: Apache-2.0
import NIOCore
import Testing

@testable import APNSClient

/// The client's HTTP/2 connection on plain values: frames in, actions and frames out, no channel.
@Suite struct ConnectionStateMachineTests {
    @Test("the first SETTINGS is acknowledged and makes the connection ready with its stream limit")
    func settingsAck() {
        var harness = ClientConnectionHarness()
        let opening = harness.sent()
        #expect(opening.map(\.type) == [4, 8])  // our SETTINGS, then the connection WINDOW_UPDATE
        #expect(harness.machine.capacity == 0)

        #expect(harness.receive(Frames.settings([(3, 7)])) == [.ready(maxStreams: 7)])
        #expect(harness.sent() == [WireFrame(type: 4, flags: 0x1, streamID: 0, payload: [])])
        #expect(harness.machine.state == .ready)
        #expect(harness.machine.capacity == 7)

        // Later SETTINGS are acknowledged too, and change the limit; an ACK of ours is not answered.
        #expect(harness.receive(Frames.settings([(3, 2)])).isEmpty)
        #expect(harness.sent().map(\.flags) == [0x1])
        #expect(harness.machine.capacity == 2)
        #expect(harness.receive(Frames.frame(4, flags: 0x1)).isEmpty)
        #expect(harness.sent().isEmpty)
    }

    @Test("maximumStreamsPerConnection caps the streams in flight below the server's limit, not above it")
    func streamCap() throws {
        var capped = ClientConnectionHarness(streamCap: 2)
        _ = capped.ready(maxStreams: 1000)
        #expect(capped.machine.capacity == 2)
        #expect(try capped.submit(tag: 1))
        #expect(capped.machine.capacity == 1)
        #expect(try capped.submit(tag: 2))
        #expect(capped.machine.capacity == 0)
        #expect(capped.receive(Frames.headers(stream: 1, status: 200, apnsID: "A")) == [.succeeded(tag: 1, apnsID: "A")])
        #expect(capped.machine.capacity == 1)

        var server = ClientConnectionHarness(streamCap: 8)
        _ = server.ready(maxStreams: 3)
        #expect(server.machine.capacity == 3)
    }

    @Test("without MAX_CONCURRENT_STREAMS the connection takes 100 streams; token connections take one until an answer")
    func streamLimits() throws {
        var certificate = ClientConnectionHarness()
        #expect(certificate.receive(Frames.settings([])) == [.ready(maxStreams: 100)])
        #expect(certificate.machine.capacity == 100)

        var token = ClientConnectionHarness(usesToken: true)
        _ = token.ready(maxStreams: 1000)
        #expect(token.machine.capacity == 1)
        var harness = ClientConnectionHarness()
        _ = harness.ready(maxStreams: 2)
        #expect(try harness.submit(tag: 1))
        #expect(try harness.submit(tag: 2))
        #expect(harness.machine.capacity == 0)
        let frames = harness.sent()
        #expect(frames.map(\.type) == [1, 0, 1, 0])
        #expect(frames.map(\.streamID) == [1, 1, 3, 3])
        #expect(frames.map(\.flags) == [0x4, 0x1, 0x4, 0x1])
        #expect(harness.receive(Frames.headers(stream: 1, status: 200, apnsID: "A")) == [.succeeded(tag: 1, apnsID: "A")])
        #expect(harness.machine.capacity == 1)
    }

    @Test("an answer is a delivery, a rejection with its reason, or an expired provider token")
    func answers() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        for tag in 1...3 { #expect(try harness.submit(tag: tag)) }
        _ = harness.sent()
        #expect(harness.receive(Frames.headers(stream: 1, status: 200, apnsID: "id-1")) == [.succeeded(tag: 1, apnsID: "id-1")])
        let rejection = Frames.headers(stream: 3, status: 400, endStream: false) + Frames.data(stream: 3, #"{"reason":"BadDeviceToken"}"#)
        #expect(harness.receive(rejection) == [.failed(tag: 2, code: .rejected, status: 400)])
        let expired = Frames.headers(stream: 5, status: 403, endStream: false) + Frames.data(stream: 5, #"{"reason":"ExpiredProviderToken"}"#)
        #expect(harness.receive(expired) == [.tokenExpired(tag: 3)])
        #expect(harness.machine.inFlight == 0)
    }

    @Test("RST_STREAM(REFUSED_STREAM) hands the request back for a resend; other codes fail it")
    func resets() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        #expect(try harness.submit(tag: 1))
        #expect(try harness.submit(tag: 2))
        #expect(harness.receive(Frames.rstStream(stream: 1, code: 7)) == [.refused(tag: 1)])
        #expect(harness.receive(Frames.rstStream(stream: 3, code: 2)) == [.failed(tag: 2, code: .connectionFailed, status: nil)])
        // A reset for a stream already gone changes nothing.
        #expect(harness.receive(Frames.rstStream(stream: 3, code: 7)).isEmpty)
        #expect(harness.machine.inFlight == 0)
    }

    @Test("GOAWAY: streams above its last-stream-id are resent, ones at or below fail when the connection ends")
    func goAway() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        for tag in 1...4 { #expect(try harness.submit(tag: tag)) }  // streams 1, 3, 5, 7
        let seen = harness.receive(Frames.goAway(lastStreamID: 3, code: 0, debug: #"{"reason":"Shutdown"}"#))
        #expect(seen == [.goAway(unprocessed: [3, 4], failedBeforeReady: false, code: 0)])
        #expect(harness.machine.state == .draining)
        #expect(harness.machine.capacity == 0)
        #expect(harness.machine.closeReason == "GOAWAY (HTTP/2 error 0): Shutdown")
        #expect(try !harness.submit(tag: 5))
        // A second GOAWAY may lower last-stream-id, never raise it.
        #expect(harness.receive(Frames.goAway(lastStreamID: 1, code: 0)) == [.goAway(unprocessed: [2], failedBeforeReady: false, code: 0)])
        #expect(harness.receive(Frames.headers(stream: 1, status: 200)) == [.succeeded(tag: 1, apnsID: nil)])
        #expect(harness.machine.isDrained)

        var answering = ClientConnectionHarness()
        _ = answering.ready()
        #expect(try answering.submit(tag: 1))
        #expect(try answering.submit(tag: 2))
        _ = answering.receive(Frames.goAway(lastStreamID: 1, code: 0))
        let closed = answering.machine.closed()
        let termination = try #require(closed)
        #expect(termination.outcomes.compactMap(ClientConnectionHarness.describe) == [.failed(tag: 1, code: .connectionFailed, status: nil)])
        #expect(termination.unanswered.isEmpty)
        let again = answering.machine.closed()
        #expect(again == nil)

        var early = ClientConnectionHarness()
        #expect(early.receive(Frames.goAway(lastStreamID: 0, code: 11)) == [.goAway(unprocessed: [], failedBeforeReady: true, code: 11)])
    }

    @Test("DATA waits for the peer's windows and goes out as WINDOW_UPDATEs open them")
    func flowControl() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready(extra: [(4, 10)])  // INITIAL_WINDOW_SIZE 10
        let payload = Array(repeating: UInt8(ascii: "a"), count: 25)
        #expect(try harness.submit(tag: 1, payload: payload))
        var data = harness.sent().filter { $0.type == 0 }
        #expect(data.map(\.payload.count) == [10])
        #expect(data.map(\.flags) == [0])
        #expect(harness.machine.sendWindow == 65_535 - 10)

        #expect(harness.receive(Frames.windowUpdate(stream: 1, 10)).isEmpty)
        data = harness.sent().filter { $0.type == 0 }
        #expect(data.map(\.payload.count) == [10])
        // A larger INITIAL_WINDOW_SIZE opens every stream's window by the difference.
        #expect(harness.receive(Frames.settings([(4, 100)])).isEmpty)
        data = harness.sent().filter { $0.type == 0 }
        #expect(data.map(\.payload.count) == [5])
        #expect(data.map(\.flags) == [0x1])

        // The connection window may not pass 2^31-1.
        let overflow = harness.receive(Frames.windowUpdate(stream: 0, 0x7FFF_FFFF))
        #expect(overflow == [.connectionError(.flowControl)])
        #expect(harness.sent().compactMap(\.goAway).map(\.errorCode) == [0x3])
        #expect(harness.machine.state == .closed)
    }

    @Test("an answer that ends before its request's DATA was sent resets the stream")
    func answerBeforeUpload() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready(extra: [(4, 10)])
        #expect(try harness.submit(tag: 1, payload: Array(repeating: 0x61, count: 25)))
        _ = harness.sent()
        #expect(harness.receive(Frames.headers(stream: 1, status: 413)) == [.failed(tag: 1, code: .rejected, status: 413)])
        #expect(harness.sent().map { [$0.type, UInt8($0.value ?? 99)] } == [[3, 8]])  // RST_STREAM(CANCEL)
        #expect(harness.receive(Frames.windowUpdate(stream: 0, 100)).isEmpty)
        #expect(harness.sent().isEmpty)
    }

    @Test("a header block continues only in CONTINUATION frames of its own stream")
    func continuation() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        #expect(try harness.submit(tag: 1))
        #expect(try harness.submit(tag: 2))
        let block = Frames.answerBlock(status: 200, apnsID: "split")
        let first = Frames.frame(1, flags: 0x1, stream: 1, payload: Array(block.prefix(4)))  // END_STREAM, no END_HEADERS
        let rest = Frames.frame(9, flags: 0x4, stream: 1, payload: Array(block.dropFirst(4)))
        #expect(harness.receive(first).isEmpty)
        #expect(harness.receive(rest) == [.succeeded(tag: 1, apnsID: "split")])

        #expect(harness.receive(Frames.frame(1, flags: 0x1, stream: 3, payload: [0x88])).isEmpty)
        #expect(harness.receive(Frames.frame(6, payload: Array(repeating: 0, count: 8))) == [.connectionError(.protocol)])
        #expect(harness.sent().compactMap(\.goAway).map(\.errorCode) == [0x1])
        let closed = harness.machine.closed()
        let termination = try #require(closed)
        #expect(termination.unanswered.map(\.request.tag) == [2])
        #expect(termination.reason == "HTTP/2 protocol error: expected CONTINUATION")
    }

    @Test(
        "malformed frames end the connection with the right error code",
        arguments: [
            (Frames.frame(6, payload: [1, 2, 3, 4]), APNSConnection.StateMachine.ErrorCode.frameSize),  // short PING
            (Frames.frame(6, stream: 1, payload: Array(repeating: 0, count: 8)), .frameSize),  // PING on a stream
            (Frames.frame(8, payload: [0, 0, 0, 0]), .protocol),  // WINDOW_UPDATE of 0
            (Frames.frame(8, payload: [0, 0, 1]), .frameSize),  // short WINDOW_UPDATE
            (Frames.frame(3, stream: 1, payload: [0, 0, 0]), .frameSize),  // short RST_STREAM
            (Frames.frame(4, stream: 1), .protocol),  // SETTINGS on a stream
            (Frames.frame(4, payload: [0, 3, 0]), .frameSize),  // SETTINGS not a multiple of 6
            (Frames.settings([(4, 0x8000_0000)]), .flowControl),  // INITIAL_WINDOW_SIZE too large
            (Frames.settings([(5, 100)]), .protocol),  // MAX_FRAME_SIZE too small
            (Frames.frame(5, stream: 1, payload: [0, 0, 0, 2]), .protocol),  // PUSH_PROMISE
            (Frames.frame(9, flags: 0x4, stream: 1, payload: [0x88]), .protocol),  // CONTINUATION out of the blue
            (Frames.frame(0, payload: [1]), .protocol),  // DATA on stream 0
            (Frames.frame(0, flags: 0x8, stream: 1, payload: [5, 1]), .protocol),  // padding longer than the frame
            (Frames.frame(1, flags: 0x4, stream: 1, payload: [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]), .compression),  // bad HPACK
            (Frames.frame(1, flags: 0x24, stream: 1, payload: [0, 0]), .frameSize),  // PRIORITY flag, short
            (Frames.frame(7, payload: [0, 0, 0, 0]), .frameSize),  // short GOAWAY
            ([0x00, 0x40, 0x01, 0, 0, 0, 0, 0, 0], .frameSize),  // over our 16384-byte frame limit
        ]
    )
    func malformed(bytes: [UInt8], code: APNSConnection.StateMachine.ErrorCode) throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        #expect(try harness.submit(tag: 1))
        _ = harness.sent()
        #expect(harness.receive(bytes) == [.connectionError(code)])
        #expect(harness.sent().compactMap(\.goAway).map(\.errorCode) == [code.rawValue])
        #expect(harness.machine.state == .closed)
        // Nothing after a connection error is read; the request goes back to the pool on close.
        #expect(harness.receive(Frames.headers(stream: 1, status: 200)).isEmpty)
        let closed = harness.machine.closed()
        #expect(closed?.unanswered.map(\.request.tag) == [1])
    }

    @Test("a PING is answered with an ACK of the same data; the ACK of ours clears the wait")
    func ping() {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        let data: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        #expect(harness.receive(Frames.frame(6, payload: data)).isEmpty)
        #expect(harness.sent() == [WireFrame(type: 6, flags: 0x1, streamID: 0, payload: data)])

        let first = harness.machine.ping(now: harness.now)
        let second = harness.machine.ping(now: harness.now)
        #expect(first)
        #expect(!second)  // one at a time
        let ours = harness.sent()
        #expect(ours.map(\.type) == [6])
        #expect(harness.machine.pingSentAt == harness.now)
        #expect(harness.receive(Frames.frame(6, flags: 0x1, payload: ours[0].payload)).isEmpty)
        #expect(harness.machine.pingSentAt == nil)
        #expect(harness.sent().isEmpty)
    }

    @Test("streams past their deadline are reset with CANCEL and handed back; the rest stay")
    func timeout() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        #expect(try harness.submit(tag: 1, deadlineSeconds: 1))
        #expect(try harness.submit(tag: 2, deadlineSeconds: 10))
        _ = harness.sent()
        let early = harness.machine.expire(now: harness.now)
        let late = harness.machine.expire(now: harness.now + .seconds(2))
        #expect(early.isEmpty)
        #expect(late.map(\.request.tag) == [1])
        #expect(harness.sent().map { [$0.type, UInt8($0.streamID), UInt8($0.value ?? 99)] } == [[3, 1, 8]])
        #expect(harness.machine.inFlight == 1)
        // A late answer for the reset stream is dropped (its header block still decoded).
        #expect(harness.receive(Frames.headers(stream: 1, status: 200)).isEmpty)
    }

    @Test("draining closes once nothing is in flight; closing hands back what was never answered")
    func drainAndClose() throws {
        var harness = ClientConnectionHarness()
        _ = harness.ready()
        #expect(try harness.submit(tag: 1))
        #expect(try harness.submit(tag: 2))
        let closeNow = harness.machine.drain(reason: "retired")
        #expect(!closeNow)
        #expect(try !harness.submit(tag: 3))
        #expect(harness.receive(Frames.headers(stream: 1, status: 200, endStream: false)).isEmpty)
        let closed = harness.machine.closed()
        let termination = try #require(closed)
        // Stream 1's status came (completed with what arrived); stream 2 was never answered.
        #expect(termination.outcomes.compactMap(ClientConnectionHarness.describe) == [.succeeded(tag: 1, apnsID: nil)])
        #expect(termination.unanswered.map(\.request.tag) == [2])
        #expect(termination.reason == "retired")
        #expect(termination.becameReady)
    }

    @Test("the reader cuts frames across reads and refuses one over 16384 bytes")
    func reader() throws {
        var reader = HTTP2FrameReader()
        let bytes = Frames.frame(6, payload: [1, 2, 3, 4, 5, 6, 7, 8]) + Frames.settings([(3, 1)])
        var first = ByteBuffer(bytes: bytes.prefix(5))
        reader.append(&first)
        #expect(try reader.next() == nil)
        var rest = ByteBuffer(bytes: bytes.dropFirst(5))
        reader.append(&rest)
        let ping = try #require(try reader.next())
        #expect(ping.type == 6 && ping.streamID == 0 && ping.payload.readableBytes == 8)
        #expect(try reader.next()?.type == 4)
        #expect(try reader.next() == nil)
        var large = ByteBuffer(bytes: [0x00, 0x40, 0x01, 0, 0, 0, 0, 0, 0])
        reader.append(&large)
        #expect(throws: HTTP2FrameReader.Error.frameTooLarge(length: 16_385)) { try reader.next() }
    }
}

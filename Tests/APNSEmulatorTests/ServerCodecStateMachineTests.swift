// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNSEmulator

/// The emulator's HTTP/2 connection on plain values: a client's frames in, forwarded frames,
/// refusals and the frames it writes out, no channel.
@Suite struct ServerCodecStateMachineTests {
    @Test("our SETTINGS go out once; a client's SETTINGS is acknowledged, its ACK must be empty")
    func settingsAck() {
        var harness = ServerConnectionHarness()
        #expect(harness.sent().map(\.type) == [4])
        let again = harness.machine.connectionActive()
        #expect(!again)
        #expect(harness.receive(ClientFrames.settings([(4, 1000), (1, 0)])).isEmpty)
        #expect(harness.sent() == [ServerWireFrame(type: 4, flags: 0x1, streamID: 0, payload: [])])
        #expect(harness.machine.peerInitialWindow == 1000)
        #expect(harness.receive(ClientFrames.settingsAck).isEmpty)
        #expect(harness.sent().isEmpty)
        #expect(harness.receive(ClientFrames.frame(4, flags: 0x1, payload: [0, 0, 0, 0, 0, 0])) == [.connectionError(.frameSizeError)])
        #expect(harness.sent().compactMap(\.goAway).map(\.errorCode) == [6])
    }

    @Test("streams over the limit are refused with RST_STREAM(REFUSED_STREAM); a lowered limit applies once acknowledged")
    func streamLimits() {
        // Announced 1, cap 2: until the client acknowledges, it cannot know of 1.
        var harness = ServerConnectionHarness(limit: 1, streamCap: 2)
        _ = harness.sent()
        let opened = harness.receive(
            ClientFrames.request(stream: 1, endStream: false) + ClientFrames.request(stream: 3, endStream: false) + ClientFrames.request(stream: 5)
        )
        #expect(opened == [.headers(stream: 1, endStream: false), .headers(stream: 3, endStream: false), .refused(stream: 5)])
        #expect(harness.sent().map { [$0.type, UInt8($0.streamID), UInt8($0.value ?? 99)] } == [[3, 5, 7]])
        // Frames still in flight for the refused stream are ignored.
        #expect(harness.receive(ClientFrames.data(stream: 5, count: 3)).isEmpty)
        #expect(harness.sent().isEmpty)

        #expect(harness.receive(ClientFrames.settingsAck).isEmpty)
        #expect(harness.machine.streamLimit == 1)
        #expect(harness.receive(ClientFrames.data(stream: 1, count: 2) + ClientFrames.data(stream: 3, count: 2)).count == 2)
        harness.answer(stream: 1)
        harness.answer(stream: 3)
        #expect(harness.machine.streams.isEmpty)
        #expect(
            harness.receive(ClientFrames.request(stream: 7) + ClientFrames.request(stream: 9)) == [
                .headers(stream: 7, endStream: true), .refused(stream: 9),
            ])

        // A higher limit applies at once.
        _ = harness.machine.write(
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 2)]))))
        #expect(harness.machine.streamLimit == 2)
        #expect(harness.receive(ClientFrames.request(stream: 11)) == [.headers(stream: 11, endStream: true)])
    }

    @Test("GOAWAY's last-stream-id never rises, drops the streams above it, and bounds a later connection error's")
    func goAway() {
        var harness = ServerConnectionHarness(limit: 10)
        _ = harness.sent()
        for stream: UInt32 in [1, 3, 5] { _ = harness.receive(ClientFrames.request(stream: stream, endStream: false)) }
        _ = harness.machine.write(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: 3, errorCode: .noError, opaqueData: nil)))
        _ = harness.machine.write(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: 7, errorCode: .noError, opaqueData: nil)))
        #expect(harness.sent().compactMap(\.goAway).map(\.lastStreamID) == [3, 3])
        #expect(harness.machine.streams.keys.sorted() == [1, 3])
        #expect(harness.receive(ClientFrames.request(stream: 7, endStream: false)) == [.headers(stream: 7, endStream: false)])
        #expect(harness.receive(ClientFrames.frame(6, payload: [1])) == [.connectionError(.frameSizeError)])
        #expect(harness.sent().compactMap(\.goAway).map { [$0.lastStreamID, $0.errorCode] } == [[3, 6]])
        // After a connection error nothing is read, and writes fail.
        #expect(harness.receive(ClientFrames.request(stream: 9)).isEmpty)
        guard case .failed = harness.machine.write(HTTP2Frame(streamID: 1, payload: .rstStream(.cancel))) else {
            Issue.record("a write after the connection error succeeded")
            return
        }
    }

    @Test("RST_STREAM from the client ends an open stream; on an idle stream it is a connection error")
    func resets() {
        var harness = ServerConnectionHarness()
        _ = harness.sent()
        #expect(harness.receive(ClientFrames.request(stream: 1, endStream: false)).count == 1)
        #expect(harness.receive(ClientFrames.frame(3, stream: 1, payload: ClientFrames.bytes(8))) == [.rstStream(stream: 1, code: .cancel)])
        #expect(harness.machine.streams.isEmpty)
        // DATA for the stream now closed: STREAM_CLOSED for that stream, the connection goes on.
        #expect(harness.receive(ClientFrames.data(stream: 1, count: 1)).isEmpty)
        #expect(harness.sent().map { [$0.type, UInt8($0.value ?? 99)] } == [[3, 5]])
        #expect(harness.receive(ClientFrames.frame(3, stream: 9, payload: ClientFrames.bytes(8))) == [.connectionError(.protocolError)])
    }

    @Test("answers wait for the client's windows; received DATA is given back at the end of each read")
    func flowControl() {
        var harness = ServerConnectionHarness()
        _ = harness.receive(ClientFrames.settings([(4, 10)]) + ClientFrames.request(stream: 1))
        _ = harness.sent()
        harness.answer(stream: 1, status: "400", body: 25)
        #expect(harness.sent().filter { $0.type == 0 }.map(\.payload.count) == [10])
        #expect(harness.receive(ClientFrames.windowUpdate(stream: 1, 10)).isEmpty)
        #expect(harness.sent().filter { $0.type == 0 }.map(\.payload.count) == [10])
        #expect(harness.receive(ClientFrames.windowUpdate(stream: 1, 100)).isEmpty)
        let last = harness.sent().filter { $0.type == 0 }
        #expect(last.map(\.payload.count) == [5])
        #expect(last.map(\.flags) == [0x1])
        #expect(harness.machine.streams.isEmpty)
        #expect(harness.machine.connectionOutboundWindow == 65_535 - 25)

        _ = harness.receive(ClientFrames.request(stream: 3, endStream: false) + ClientFrames.data(stream: 3, count: 40))
        harness.machine.readComplete()
        #expect(harness.sent().map { [$0.type, UInt8($0.streamID), UInt8($0.value ?? 99)] } == [[8, 0, 40]])

        #expect(harness.receive(ClientFrames.windowUpdate(stream: 0, 0x7FFF_FFFF)) == [.connectionError(.flowControlError)])
        #expect(harness.sent().compactMap(\.goAway).map(\.errorCode) == [3])
    }

    @Test("a header block continues only in CONTINUATION frames of its own stream, and not forever")
    func continuation() {
        var harness = ServerConnectionHarness()
        let block = ClientFrames.requestBlock
        let split =
            ClientFrames.frame(1, flags: 0x1, stream: 1, payload: Array(block.prefix(1)))
            + ClientFrames.frame(9, flags: 0x4, stream: 1, payload: Array(block.dropFirst(1)))
        #expect(harness.receive(split) == [.headers(stream: 1, endStream: true)])

        var interleaved = ServerConnectionHarness()
        let bad =
            ClientFrames.frame(1, flags: 0x1, stream: 1, payload: Array(block.prefix(1)))
            + ClientFrames.frame(9, flags: 0x4, stream: 3, payload: [0x86])
        #expect(interleaved.receive(bad) == [.connectionError(.protocolError)])

        var endless = ServerConnectionHarness()
        let many = ClientFrames.frame(1, stream: 1, payload: [0x83]) + (0..<64).flatMap { _ in ClientFrames.frame(9, stream: 1, payload: []) }
        #expect(endless.receive(many) == [.connectionError(.enhanceYourCalm)])
    }

    @Test(
        "malformed frames end the connection with the right error code",
        arguments: [
            (Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), HTTP2ErrorCode.protocolError, false),  // not the preface
            (ClientFrames.frame(6, payload: [1, 2, 3, 4]), .frameSizeError, true),  // short PING
            (ClientFrames.frame(6, stream: 1, payload: Array(repeating: 0, count: 8)), .protocolError, true),  // PING on a stream
            (ClientFrames.frame(8, payload: [0, 0, 0, 0]), .protocolError, true),  // WINDOW_UPDATE of 0
            (ClientFrames.frame(8, payload: [0, 0, 1]), .frameSizeError, true),  // short WINDOW_UPDATE
            (ClientFrames.frame(2, stream: 1, payload: [0, 0, 0, 0]), .frameSizeError, true),  // short PRIORITY
            (ClientFrames.frame(3, stream: 1, payload: [0, 0, 0]), .frameSizeError, true),  // short RST_STREAM
            (ClientFrames.frame(4, stream: 1), .protocolError, true),  // SETTINGS on a stream
            (ClientFrames.frame(4, payload: [0, 3, 0]), .frameSizeError, true),  // SETTINGS not a multiple of 6
            (ClientFrames.settings([(4, 0x8000_0000)]), .flowControlError, true),  // INITIAL_WINDOW_SIZE too large
            (ClientFrames.settings([(5, 100)]), .protocolError, true),  // MAX_FRAME_SIZE too small
            (ClientFrames.settings([(2, 2)]), .protocolError, true),  // ENABLE_PUSH other than 0 or 1
            (ClientFrames.frame(5, stream: 1, payload: [0, 0, 0, 2]), .protocolError, true),  // PUSH_PROMISE
            (ClientFrames.frame(9, flags: 0x4, stream: 1, payload: [0x83]), .protocolError, true),  // CONTINUATION out of the blue
            (ClientFrames.frame(0, payload: [1]), .protocolError, true),  // DATA on stream 0
            (ClientFrames.data(stream: 1, count: 1), .protocolError, true),  // DATA on an idle stream
            (ClientFrames.request(stream: 2), .protocolError, true),  // a stream the server would have to open
            (ClientFrames.request(stream: 0), .protocolError, true),  // HEADERS on stream 0
            (ClientFrames.frame(1, flags: 0x4, stream: 1, payload: [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]), .compressionError, true),  // bad HPACK
            (ClientFrames.frame(1, flags: 0x0C, stream: 1, payload: [5]), .protocolError, true),  // padding longer than the frame
            (ClientFrames.frame(7, payload: [0, 0, 0, 0]), .protocolError, true),  // short GOAWAY
            ([0x00, 0x40, 0x01, 0, 0, 0, 0, 0, 0], .frameSizeError, true),  // over our 16384-byte frame limit
        ]
    )
    func malformed(bytes: [UInt8], code: HTTP2ErrorCode, afterPreface: Bool) {
        var harness = ServerConnectionHarness(preface: afterPreface)
        _ = harness.sent()
        #expect(harness.receive(bytes) == [.connectionError(code)])
        #expect(harness.sent().compactMap(\.goAway).map(\.errorCode) == [UInt32(code.networkCode)])
        #expect(harness.machine.failed)
    }

    @Test("header names that are not lowercase ASCII reach the handler as sent; they do not stop the connection")
    func unusualHeaderNames() {
        var harness = ServerConnectionHarness()
        // Literal without indexing, new names: "\u{e9}t\u{e9}" (UTF-8), "X-Upper", and bytes that are not UTF-8.
        let names: [[UInt8]] = [Array("\u{e9}t\u{e9}".utf8), Array("X-Upper".utf8), [0xFF, 0xFE]]
        let block = ClientFrames.requestBlock + names.flatMap { [0x00, UInt8($0.count)] + $0 + [0x01, UInt8(ascii: "v")] }
        #expect(harness.receive(ClientFrames.frame(1, flags: 0x5, stream: 1, payload: block)) == [.headers(stream: 1, endStream: true)])
        #expect(!harness.machine.failed)
    }

    @Test("the preface may arrive in pieces; nothing is read before it is whole")
    func prefaceInPieces() {
        var harness = ServerConnectionHarness(preface: false)
        let bytes = HTTP2ServerFrameReader.preface + ClientFrames.request(stream: 1)
        #expect(harness.receive(Array(bytes.prefix(10))).isEmpty)
        #expect(!harness.reader.sawPreface)
        #expect(harness.receive(Array(bytes.dropFirst(10))) == [.headers(stream: 1, endStream: true)])
    }

    @Test("a PING is answered with an ACK of the same data and reported (it is counted); an ACK is neither")
    func ping() {
        var harness = ServerConnectionHarness()
        _ = harness.sent()
        let data: [UInt8] = [8, 7, 6, 5, 4, 3, 2, 1]
        #expect(harness.receive(ClientFrames.frame(6, payload: data)) == [.ping])
        #expect(harness.sent() == [ServerWireFrame(type: 6, flags: 0x1, streamID: 0, payload: data)])
        #expect(harness.receive(ClientFrames.frame(6, flags: 0x1, payload: data)).isEmpty)
        #expect(harness.sent().isEmpty)
    }
}

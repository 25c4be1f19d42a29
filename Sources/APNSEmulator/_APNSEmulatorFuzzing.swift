// SPDX-License-Identifier: Apache-2.0
import APNSTransport
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Not API: the fuzzer's entry into the emulator's HTTP/2 frame reader and connection state
/// machine (`FuzzTesting/`, which builds outside this package and so cannot see `package`
/// symbols). Nothing else may use it; it can change or go away in any release.
public enum _APNSEmulatorFuzzing {
    /// Feeds the client preface and then `bytes` to a fresh connection as what a client sent,
    /// in two reads: through the codec's reader and state machine, then the connection
    /// handler's, which answers every request that ends as the handler does (a 200, or a 400
    /// with a body), now and then with a fault (a lowered stream limit, a refused stream, a
    /// GOAWAY). Checks the flow-control and stream-limit invariants; traps on a broken one.
    public static func run(_ bytes: UnsafeRawBufferPointer) {
        Self.decodeHeaderBlocks(bytes)
        let allocator = ByteBufferAllocator()
        let settings: [(UInt16, Int)] = [(1, 4096), (3, 1), (4, 65_535), (5, 16_384), (6, 8000)]
        var codec = HTTP2ServerCodec.StateMachine(settings: settings, streamCap: 8, allocator: allocator)
        var handler = APNSConnectionHandler.StateMachine(maxConcurrentStreams: 8, dropStreamLimitAfterRejection: true, allocator: allocator)
        var reader = HTTP2ServerFrameReader()
        _ = codec.connectionActive()
        _ = codec.takeOutbound()
        var preface = allocator.buffer(bytes: HTTP2ServerFrameReader.preface)
        reader.append(&preface)
        var completed = 0

        func write(_ streamID: HTTP2StreamID, _ payload: HTTP2Frame.FramePayload) {
            _ = codec.write(HTTP2Frame(streamID: streamID, payload: payload))
        }
        func announce(_ limit: Int) {
            write(.rootStream, .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)])))
        }
        func refuse(_ streamID: HTTP2StreamID) {
            handler.refused(streamID)
            write(streamID, .rstStream(.refusedStream))
        }
        func respond(_ streamID: HTTP2StreamID, status: Int) {
            var headers = HPACKHeaders()
            headers.add(name: ":status", value: String(status))
            headers.add(name: "apns-id", value: "00000000-0000-0000-0000-000000000000", indexing: .nonIndexable)
            if status == 200 {
                write(streamID, .headers(.init(headers: headers, endStream: true)))
                return
            }
            write(streamID, .headers(.init(headers: headers, endStream: false)))
            let body = allocator.buffer(repeating: UInt8(ascii: "x"), count: 30_000 * (completed % 3))
            write(streamID, .data(.init(data: .byteBuffer(body), endStream: true)))
        }
        /// What ``APNSConnectionHandler`` does with a frame from the codec.
        func handle(_ frame: HTTP2Frame) {
            switch handler.frameReceived(frame) {
            case .none, .reset:
                return
            case .windowUpdate(let increment):
                write(frame.streamID, .windowUpdate(windowSizeIncrement: increment))
                return
            case .requestComplete(_, let windowUpdate):
                if let windowUpdate { write(frame.streamID, .windowUpdate(windowSizeIncrement: windowUpdate)) }
            }
            let streamID = frame.streamID
            completed += 1
            guard handler.admit(streamID) else { return refuse(streamID) }
            switch completed % 13 {
            case 5:
                let (limit, excess) = handler.streamLimitFault(completed % 3)
                announce(limit)
                for stream in excess { refuse(stream) }
                if limit == 0 { return refuse(streamID) }
            case 7:
                return refuse(streamID)
            case 11:
                let (answerFirst, boundary) = handler.goAwayFault(streamID)
                if answerFirst { respond(streamID, status: 503) }
                if handler.sendGoAway() { write(.rootStream, .goAway(lastStreamID: boundary, errorCode: .noError, opaqueData: nil)) }
                return
            default:
                break
            }
            let status = completed % 4 == 0 ? 400 : 200
            let limits = handler.processed(
                streamID, accepted: status == 200, status: status, firstAuthentication: completed == 1, authenticated: true
            )
            for limit in limits { announce(limit) }
            respond(streamID, status: status)
        }

        let split = bytes.count / 2
        for chunk in [bytes[..<split], bytes[split...]] {
            var incoming = allocator.buffer(bytes: chunk)
            reader.append(&incoming)
            while !codec.failed {
                let action: HTTP2ServerCodec.StateMachine.InboundAction
                do {
                    guard let frame = try reader.next() else { break }
                    action = codec.frameReceived(frame)
                } catch {
                    action = codec.readFailed(error)
                }
                if case .forward(let frame) = action { handle(frame) }
                precondition(codec.connectionOutboundWindow <= 0x7FFF_FFFF, "connection window over 2^31-1")
                precondition(codec.streams.values.allSatisfy { $0.outboundWindow <= 0x7FFF_FFFF }, "stream window over 2^31-1")
                precondition(codec.streams.count <= codec.streamCap, "more streams than the cap")
                precondition((0...8).contains(handler.advertisedLimit), "a stream limit outside 0...max")
            }
            codec.readComplete()
            reader.compact()
            _ = codec.takeOutbound()
        }
    }

    /// The bytes as two header blocks, one after the other on one connection's HPACK decoder
    /// (the state machine reaches it only through well-framed HEADERS). A decoded list never
    /// passes the limit.
    static func decodeHeaderBlocks(_ bytes: UnsafeRawBufferPointer) {
        var decoder = HeaderBlockDecoder(maxTableSize: 4096, maxHeaderListSize: 8000)
        let half = bytes.count / 2
        for part in [UnsafeRawBufferPointer(rebasing: bytes[..<half]), UnsafeRawBufferPointer(rebasing: bytes[half...])] {
            var size = 0
            try? decoder.decode(ByteBuffer(bytes: part)) { name, value, _ in size += name.utf8.count + value.utf8.count + 32 }
            precondition(size <= 8000, "a decoded header list passed its limit")
        }
    }
}

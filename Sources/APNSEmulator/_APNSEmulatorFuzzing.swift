// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Not API: the fuzzer's entry into the emulator's HTTP/2 frame reader and connection state
/// machine (`FuzzTesting/`, which builds outside this package and so cannot see `package`
/// symbols). Nothing else may use it; it can change or go away in any release.
public enum _APNSEmulatorFuzzing {
    /// Feeds the client preface and then `bytes` to a fresh connection as what a client sent,
    /// in two reads, answering every request that ends (as the connection handler does: a 200,
    /// or a 400 with a body, now and then a lowered stream limit, a reset or a GOAWAY), and
    /// checks the flow-control invariants. Traps on a broken invariant.
    public static func run(_ bytes: UnsafeRawBufferPointer) {
        let allocator = ByteBufferAllocator()
        let settings: [(UInt16, Int)] = [(1, 4096), (3, 1), (4, 65_535), (5, 16_384), (6, 8000)]
        var machine = HTTP2ServerCodec.StateMachine(settings: settings, streamCap: 8, allocator: allocator)
        var reader = HTTP2ServerFrameReader()
        _ = machine.connectionActive()
        _ = machine.takeOutbound()
        var preface = allocator.buffer(bytes: HTTP2ServerFrameReader.preface)
        reader.append(&preface)
        var answered = 0

        func answer(_ streamID: HTTP2StreamID) {
            answered += 1
            var headers = HPACKHeaders()
            switch answered % 5 {
            case 0:
                _ = machine.write(HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream)))
                return
            case 1, 2:
                headers.add(name: ":status", value: "200")
                headers.add(name: "apns-id", value: "00000000-0000-0000-0000-000000000000", indexing: .nonIndexable)
                _ = machine.write(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true))))
            default:
                headers.add(name: ":status", value: "400")
                headers.add(name: "content-type", value: "application/json")
                _ = machine.write(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: false))))
                let body = allocator.buffer(repeating: UInt8(ascii: "x"), count: 40_000 * (answered % 3))
                _ = machine.write(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true))))
            }
            if answered % 7 == 0 {
                let limit = answered % 3
                _ = machine.write(HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)]))))
            }
            if answered % 11 == 0 {
                _ = machine.write(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: streamID, errorCode: .noError, opaqueData: nil)))
            }
        }

        let split = bytes.count / 2
        for chunk in [bytes[..<split], bytes[split...]] {
            var incoming = allocator.buffer(bytes: chunk)
            reader.append(&incoming)
            while !machine.failed {
                let action: HTTP2ServerCodec.StateMachine.InboundAction
                do {
                    guard let frame = try reader.next() else { break }
                    action = machine.frameReceived(frame)
                } catch {
                    action = machine.readFailed(error)
                }
                switch action {
                case .none, .refused, .connectionError:
                    break
                case .forward(let frame):
                    switch frame.payload {
                    case .headers(let headers) where headers.endStream: answer(frame.streamID)
                    case .data(let data) where data.endStream: answer(frame.streamID)
                    default: break
                    }
                }
                precondition(machine.connectionOutboundWindow <= 0x7FFF_FFFF, "connection window over 2^31-1")
                precondition(machine.streams.values.allSatisfy { $0.outboundWindow <= 0x7FFF_FFFF }, "stream window over 2^31-1")
                precondition(machine.streams.count <= machine.streamCap, "more streams than the cap")
            }
            machine.readComplete()
            reader.compact()
            _ = machine.takeOutbound()
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import NIOHTTP2

@testable import APNSEmulator

/// One emulator connection on plain values: a client's bytes go through
/// ``HTTP2ServerFrameReader`` into ``HTTP2ServerCodec/StateMachine``; what it writes comes back
/// as ``ServerWireFrame``s.
struct ServerConnectionHarness {
    /// What the state machine asked for.
    enum Seen: Equatable {
        case headers(stream: Int, endStream: Bool)
        case data(stream: Int, bytes: Int, endStream: Bool)
        case rstStream(stream: Int, code: HTTP2ErrorCode)
        case refused(stream: Int)
        case ping
        case connectionError(HTTP2ErrorCode)
        case other
    }

    var machine: HTTP2ServerCodec.StateMachine
    var reader = HTTP2ServerFrameReader()

    /// Announces `limit` streams (as APNs does before authentication); `streamCap` applies until
    /// the client acknowledges.
    init(limit: Int = 1, streamCap: Int = 100, preface: Bool = true) {
        let settings: [(UInt16, Int)] = [(1, 4096), (3, limit), (4, 65_535), (5, 16_384), (6, 8000)]
        self.machine = HTTP2ServerCodec.StateMachine(settings: settings, streamCap: streamCap, allocator: ByteBufferAllocator())
        _ = self.machine.connectionActive()
        if preface { _ = self.receive(HTTP2ServerFrameReader.preface) }
    }

    /// Feeds bytes as one read; returns what the state machine asked for (`.none` left out).
    mutating func receive(_ bytes: [UInt8]) -> [Seen] {
        var buffer = ByteBuffer(bytes: bytes)
        self.reader.append(&buffer)
        var seen: [Seen] = []
        while !self.machine.failed {
            let action: HTTP2ServerCodec.StateMachine.InboundAction
            do {
                guard let frame = try self.reader.next() else { break }
                action = self.machine.frameReceived(frame)
            } catch {
                action = self.machine.readFailed(error)
            }
            switch action {
            case .none: break
            case .refused(let streamID): seen.append(.refused(stream: Int(streamID)))
            case .ping: seen.append(.ping)
            case .connectionError(let code): seen.append(.connectionError(code))
            case .forward(let frame):
                switch frame.payload {
                case .headers(let headers): seen.append(.headers(stream: Int(frame.streamID), endStream: headers.endStream))
                case .data(let data): seen.append(.data(stream: Int(frame.streamID), bytes: data.data.readableBytes, endStream: data.endStream))
                case .rstStream(let code): seen.append(.rstStream(stream: Int(frame.streamID), code: code))
                default: seen.append(.other)
                }
            }
        }
        return seen
    }

    /// The frames written since the last call.
    mutating func sent() -> [ServerWireFrame] {
        guard let bytes = self.machine.takeOutbound() else { return [] }
        return ServerWireFrame.split(Array(bytes.readableBytesView))
    }

    /// The connection handler's answer: HEADERS, and DATA when `body` is given.
    mutating func answer(stream: Int, status: String = "200", body: Int? = nil) {
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: status)
        let streamID = HTTP2StreamID(stream)
        _ = self.machine.write(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: body == nil))))
        if let body {
            let bytes = ByteBuffer(repeating: UInt8(ascii: "x"), count: body)
            _ = self.machine.write(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(bytes), endStream: true))))
        }
    }
}

/// A frame the emulator wrote.
struct ServerWireFrame: Equatable {
    var type: UInt8
    var flags: UInt8
    var streamID: UInt32
    var payload: [UInt8]

    /// For GOAWAY: last-stream-id and error code.
    var goAway: (lastStreamID: UInt32, errorCode: UInt32)? {
        guard self.type == 7, self.payload.count >= 8 else { return nil }
        return (Self.integer(self.payload[0..<4]) & 0x7FFF_FFFF, Self.integer(self.payload[4..<8]))
    }

    /// For RST_STREAM and WINDOW_UPDATE: the 32-bit value.
    var value: UInt32? { self.payload.count == 4 ? Self.integer(self.payload[...]) : nil }

    static func integer(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }

    static func split(_ bytes: [UInt8]) -> [ServerWireFrame] {
        var frames: [ServerWireFrame] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            let stream = Self.integer(bytes[index + 5..<index + 9]) & 0x7FFF_FFFF
            guard index + 9 + length <= bytes.count else { break }
            frames.append(
                ServerWireFrame(
                    type: bytes[index + 3], flags: bytes[index + 4], streamID: stream, payload: Array(bytes[index + 9..<index + 9 + length])))
            index += 9 + length
        }
        return frames
    }
}

/// Frames as a client would send them, byte by byte.
enum ClientFrames {
    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, payload: [UInt8] = []) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags] + Self.bytes(stream) + payload
    }

    static func bytes(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    static func settings(_ values: [(UInt16, UInt32)]) -> [UInt8] {
        Self.frame(4, payload: values.flatMap { withUnsafeBytes(of: $0.0.bigEndian) { Array($0) } + Self.bytes($0.1) })
    }

    static let settingsAck = Self.frame(4, flags: 0x1)

    /// `POST http /` from HPACK's static table.
    static let requestBlock: [UInt8] = [0x83, 0x86, 0x84]

    static func request(stream: UInt32, endStream: Bool = true) -> [UInt8] {
        Self.frame(1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, payload: Self.requestBlock)
    }

    static func data(stream: UInt32, count: Int, endStream: Bool = true) -> [UInt8] {
        Self.frame(0, flags: endStream ? 0x1 : 0, stream: stream, payload: Array(repeating: 0x7B, count: count))
    }

    static func windowUpdate(stream: UInt32, _ increment: UInt32) -> [UInt8] { Self.frame(8, stream: stream, payload: Self.bytes(increment)) }
}

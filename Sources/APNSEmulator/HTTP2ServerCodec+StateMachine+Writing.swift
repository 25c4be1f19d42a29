// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import NIOHTTP2

extension HTTP2ServerCodec.StateMachine {
    /// What became of a frame the connection handler wrote.
    enum WriteResult {
        case written
        /// Not written: fail the write's promise with this error.
        case failed(ChannelError)
    }

    /// Frame written by the connection handler: framed into the outgoing buffer, DATA as far
    /// as the client's windows allow (the rest when they open).
    mutating func write(_ frame: HTTP2Frame) -> WriteResult {
        guard !self.failed else { return .failed(.ioOnClosedChannel) }
        switch frame.payload {
        case .headers(let headers):
            guard let index = self.streams.index(forKey: frame.streamID) else { break }  // reset meanwhile
            self.writeHeaders(headers.headers, streamID: frame.streamID, endStream: headers.endStream)  // leaves the table as it is
            if headers.endStream {
                self.streams.values[index].localClosed = true
                self.closeIfDone(at: index)
            }
        case .data(let data):
            guard var stream = self.streams[frame.streamID] else { break }
            guard case .byteBuffer(let bytes) = data.data else {
                // File regions never come from the emulator; refuse rather than leave the stream open.
                self.writeFrame(.rstStream, flags: 0, streamID: frame.streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.internalError.networkCode)) }
                self.streams[frame.streamID] = nil
                return .failed(.operationUnsupported)
            }
            stream.queued.append((bytes, data.endStream))
            self.streams[frame.streamID] = stream
            self.drainQueue(frame.streamID)
        case .rstStream(let code):
            self.writeFrame(.rstStream, flags: 0, streamID: frame.streamID) { $0.writeInteger(UInt32(clamping: code.networkCode)) }
            self.streams[frame.streamID] = nil
            self.noteReset(frame.streamID)
        case .settings(.settings(let settings)):
            self.writeSettings(settings.map { (Self.identifier(of: $0.parameter), $0.value) })
        case .settings(.ack):
            self.writeFrame(.settings, flags: 0x1, streamID: .rootStream) { _ in }
        case .goAway(let requestedLast, let code, let opaqueData):
            let lastStreamID = min(requestedLast, self.goAwayLastStreamID ?? requestedLast)
            self.goAwayLastStreamID = lastStreamID
            self.writeFrame(.goAway, flags: 0, streamID: .rootStream) {
                $0.writeInteger(UInt32(Int32(lastStreamID)))
                $0.writeInteger(UInt32(clamping: code.networkCode))
                if var debug = opaqueData { $0.writeBuffer(&debug) }
            }
            for id in self.streams.keys where id > lastStreamID { self.streams[id] = nil }
        case .windowUpdate(let increment):
            guard increment > 0 else { break }
            if frame.streamID == .rootStream || self.streams[frame.streamID] != nil {
                self.writeFrame(.windowUpdate, flags: 0, streamID: frame.streamID) { $0.writeInteger(UInt32(min(increment, 0x7FFF_FFFF))) }
            }
        case .ping(let data, let ack):
            self.writeFrame(.ping, flags: ack ? 0x1 : 0, streamID: .rootStream) { $0.writeInteger(data.integer) }
        default:
            break
        }
        return .written
    }

    private mutating func localEnd(_ streamID: HTTP2StreamID) {
        guard var stream = self.streams[streamID] else { return }
        stream.localClosed = true
        self.streams[streamID] = stream
        self.closeIfDone(streamID)
    }

    /// Sends queued DATA as far as the windows allow, in frames no larger than the client accepts.
    mutating func drainQueue(_ streamID: HTTP2StreamID) {
        while var stream = self.streams[streamID], var (bytes, endStream) = stream.queued.first {
            let room = min(stream.outboundWindow, self.connectionOutboundWindow, self.peerMaxFrameSize)
            guard room > 0 || bytes.readableBytes == 0 else { return }
            let size = min(room, bytes.readableBytes)
            var chunk = bytes.readSlice(length: size)!
            let last = bytes.readableBytes == 0
            if last { stream.queued.removeFirst() } else { stream.queued[0] = (bytes, endStream) }
            stream.outboundWindow -= size
            self.connectionOutboundWindow -= size
            self.streams[streamID] = stream
            endStream = endStream && last
            self.writeFrame(.data, flags: endStream ? 0x1 : 0, streamID: streamID) { $0.writeBuffer(&chunk) }
            if endStream { self.localEnd(streamID) }
        }
    }

    /// Writes a header block as literal fields without indexing and without Huffman coding:
    /// per-request values (ids) would only churn the client's dynamic table.
    private mutating func writeHeaders(_ headers: HPACKHeaders, streamID: HTTP2StreamID, endStream: Bool) {
        let tableSizeUpdate = self.tableSizeUpdate
        self.tableSizeUpdate = nil
        self.writeFrame(.headers, flags: 0x4 | (endStream ? 0x1 : 0), streamID: streamID) { out in
            if let size = tableSizeUpdate { Self.writeHPACKInteger(size, prefixBits: 5, flags: 0x20, into: &out) }
            for (name, value, _) in headers {
                if name == ":status", value == "200" {
                    out.writeInteger(UInt8(0x88))  // static table entry 8
                    continue
                }
                if let index = Self.staticNameIndex(name) {
                    Self.writeHPACKInteger(index, prefixBits: 4, flags: 0x00, into: &out)
                } else {
                    out.writeInteger(UInt8(0x00))
                    Self.writeHPACKString(name, into: &out)
                }
                Self.writeHPACKString(value, into: &out)
            }
        }
    }

    /// The static-table names an answer uses (a switch: no hashing per field).
    private static func staticNameIndex(_ name: String) -> Int? {
        switch name {
        case ":status": 8
        case "content-type": 31
        case "content-length": 28
        default: nil
        }
    }

    private static func writeHPACKInteger(_ value: Int, prefixBits: Int, flags: UInt8, into out: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            out.writeInteger(flags | UInt8(value))
            return
        }
        out.writeInteger(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            out.writeInteger(UInt8(rest & 0x7F | 0x80))
            rest >>= 7
        }
        out.writeInteger(UInt8(rest))
    }

    private static func writeHPACKString(_ text: String, into out: inout ByteBuffer) {
        Self.writeHPACKInteger(text.utf8.count, prefixBits: 7, flags: 0x00, into: &out)
        out.writeString(text)
    }

    private static func identifier(of parameter: HTTP2SettingsParameter) -> UInt16 {
        switch parameter {
        case .headerTableSize: return 1
        case .enablePush: return 2
        case .maxConcurrentStreams: return 3
        case .initialWindowSize: return 4
        case .maxFrameSize: return 5
        case .maxHeaderListSize: return 6
        default: return 0
        }
    }

    /// Every SETTINGS frame sent queues the stream limit it announces (or nil), applied when the
    /// client acknowledges that frame; a higher limit than the one in force applies at once.
    mutating func writeSettings(_ settings: [(UInt16, Int)]) {
        let limit = settings.last { $0.0 == 3 }.map { min(max(0, $0.1), self.streamCap) }
        // A client that never acknowledges cannot make this queue grow without bound.
        if self.pendingLimits.count >= 64 { self.pendingLimits.removeFirst() }
        self.pendingLimits.append(limit)
        if let limit, limit > self.streamLimit { self.streamLimit = limit }
        self.writeFrame(.settings, flags: 0, streamID: .rootStream) { out in
            for (identifier, value) in settings where identifier != 0 {
                out.writeInteger(identifier)
                out.writeInteger(UInt32(clamping: identifier == 3 ? (limit ?? 0) : value))
            }
        }
    }

    mutating func writeFrame(_ type: FrameType, flags: UInt8, streamID: HTTP2StreamID, payload: (inout ByteBuffer) -> Void) {
        let start = self.out.writerIndex
        self.out.writeInteger(UInt32(0))  // length (3 bytes) + type, patched below
        self.out.writeInteger(flags)
        self.out.writeInteger(UInt32(Int32(streamID)))
        payload(&self.out)
        let length = self.out.writerIndex - start - 9
        self.out.setInteger(UInt32(length) << 8 | UInt32(type.rawValue), at: start)
    }
}

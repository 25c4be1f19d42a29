// SPDX-License-Identifier: Apache-2.0
import NIOCore

/// The HTTP/2 frame types the client knows (RFC 9113 §6); others are ignored.
enum HTTP2FrameType: UInt8 {
    case data = 0, headers = 1, priority = 2, rstStream = 3, settings = 4, pushPromise = 5, ping = 6
    case goAway = 7, windowUpdate = 8, continuation = 9
}

/// Cuts the bytes APNs sends into HTTP/2 frames: bytes in, frames out, nothing else. It checks
/// only the frame header's length against our `SETTINGS_MAX_FRAME_SIZE` (the default, 16384);
/// what a frame means is ``APNSConnection/StateMachine``'s business.
struct HTTP2FrameReader {
    /// One frame: its header's fields and its payload, a slice of what was read.
    struct Frame {
        var type: UInt8
        var flags: UInt8
        var streamID: UInt32
        var payload: ByteBuffer
    }

    enum Error: Swift.Error, Equatable {
        /// A frame longer than we allow (FRAME_SIZE_ERROR).
        case frameTooLarge(length: Int)
    }

    static let maxFrameSize = 16_384

    private var inbound: ByteBuffer?

    init() {}

    /// Bytes not yet cut into frames.
    var bufferedBytes: Int { self.inbound?.readableBytes ?? 0 }

    mutating func append(_ bytes: inout ByteBuffer) {
        if self.inbound == nil || self.inbound!.readableBytes == 0 {
            self.inbound = bytes
        } else {
            self.inbound!.writeBuffer(&bytes)
        }
    }

    /// The next whole frame, or nil until more bytes arrive.
    mutating func next() throws(Error) -> Frame? {
        guard var buffer = self.inbound, buffer.readableBytes >= 9 else { return nil }
        let header = buffer.readerIndex
        let length = Int(buffer.getInteger(at: header, as: UInt32.self)! >> 8)
        guard length <= Self.maxFrameSize else { throw .frameTooLarge(length: length) }
        guard buffer.readableBytes >= 9 + length else { return nil }
        let type = buffer.getInteger(at: header + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: header + 4, as: UInt8.self)!
        let streamID = buffer.getInteger(at: header + 5, as: UInt32.self)! & 0x7FFF_FFFF
        buffer.moveReaderIndex(forwardBy: 9)
        let payload = buffer.readSlice(length: length)!
        self.inbound = buffer
        return Frame(type: type, flags: flags, streamID: streamID, payload: payload)
    }

    /// Gives back the memory of frames already read, once enough of it piled up.
    mutating func compact() {
        if var buffer = self.inbound, buffer.readerIndex > 65_536 {
            self.inbound = nil
            buffer.discardReadBytes()
            self.inbound = buffer
        }
    }
}

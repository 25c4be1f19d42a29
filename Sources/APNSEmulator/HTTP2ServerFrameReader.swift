// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHTTP2

/// Cuts what a client sends into HTTP/2 frames: first the connection preface, then frames no
/// longer than our `SETTINGS_MAX_FRAME_SIZE`. Bytes in, frames out; what a frame means is
/// ``HTTP2ServerCodec/StateMachine``'s business. (The emulator's own reader: it shares nothing
/// with the client's, so it can catch the client's mistakes.)
struct HTTP2ServerFrameReader {
    struct Frame {
        var type: UInt8
        var flags: UInt8
        var streamID: HTTP2StreamID
        var payload: ByteBuffer
    }

    enum Error: Swift.Error, Equatable {
        /// The bytes do not start with the client connection preface (PROTOCOL_ERROR).
        case badPreface
        /// A frame longer than we allow (FRAME_SIZE_ERROR).
        case frameTooLarge(length: Int)
    }

    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let maxFrameSize = 16_384

    private var buffer: ByteBuffer?
    private(set) var sawPreface = false

    init() {}

    mutating func append(_ bytes: inout ByteBuffer) {
        if self.buffer == nil || self.buffer!.readableBytes == 0 {
            self.buffer = bytes
        } else {
            self.buffer!.writeBuffer(&bytes)
        }
    }

    /// The next whole frame, or nil until more bytes arrive.
    mutating func next() throws(Error) -> Frame? {
        guard var buffer = self.buffer else { return nil }
        if !self.sawPreface {
            guard buffer.readableBytes >= Self.preface.count else {
                if !Self.preface.starts(with: buffer.readableBytesView) { throw .badPreface }
                return nil
            }
            guard buffer.readBytes(length: Self.preface.count) == Self.preface else { throw .badPreface }
            self.sawPreface = true
            self.buffer = buffer
        }
        guard buffer.readableBytes >= 9 else { return nil }
        let header = buffer.readerIndex
        let length = Int(buffer.getInteger(at: header, as: UInt32.self)! >> 8)
        guard length <= Self.maxFrameSize else { throw .frameTooLarge(length: length) }
        guard buffer.readableBytes >= 9 + length else { return nil }
        let type = buffer.getInteger(at: header + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: header + 4, as: UInt8.self)!
        let streamID = HTTP2StreamID(Int32(bitPattern: buffer.getInteger(at: header + 5, as: UInt32.self)! & 0x7FFF_FFFF))
        buffer.moveReaderIndex(forwardBy: 9)
        let payload = buffer.readSlice(length: length)!
        self.buffer = buffer
        return Frame(type: type, flags: flags, streamID: streamID, payload: payload)
    }

    /// Gives back the memory of frames already read, once enough of it piled up.
    mutating func compact() {
        if var buffer = self.buffer, buffer.readerIndex > 65_536 {
            self.buffer = nil
            buffer.discardReadBytes()
            self.buffer = buffer
        }
    }
}

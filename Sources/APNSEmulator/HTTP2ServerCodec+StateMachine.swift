// SPDX-License-Identifier: Apache-2.0
import APNSTransport
import NIOCore
import NIOHPACK
import NIOHTTP2

extension HTTP2ServerCodec {
    /// The server side of RFC 9113 for one emulator connection, on plain values: frames from the
    /// client in, `HTTP2Frame`s for ``APNSConnectionHandler`` out; `HTTP2Frame`s from it in,
    /// bytes out (`takeOutbound()`). It checks framing and stream rules, decodes header blocks,
    /// keeps the receive windows open, answers SETTINGS and PING, enforces
    /// `MAX_CONCURRENT_STREAMS` with RST_STREAM(REFUSED_STREAM) and ends the connection with
    /// GOAWAY on a protocol error. ``HTTP2ServerCodec`` performs its actions and nothing else.
    struct StateMachine {
        static let maxHeaderListSize = 8000

        enum FrameType: UInt8 {
            case data = 0, headers = 1, priority = 2, rstStream = 3, settings = 4, pushPromise = 5, ping = 6
            case goAway = 7, windowUpdate = 8, continuation = 9
        }

        struct Stream {
            var remoteClosed = false
            var localClosed = false
            var outboundWindow: Int
            /// DATA waiting for the client to open its window.
            var queued: [(ByteBuffer, Bool)] = []
        }

        struct PendingHeaders {
            var streamID: HTTP2StreamID
            var block: ByteBuffer
            var endStream: Bool
        }

        /// What the handler does after a frame from the client.
        enum InboundAction {
            case none
            /// Pass the frame up to the connection handler.
            case forward(HTTP2Frame)
            /// A stream over the limit was refused (RST_STREAM is written): tell the handler.
            case refused(HTTP2StreamID)
            /// A PING from the client was answered (its ACK is written): tell the handler.
            case ping
            /// A protocol error: GOAWAY with the code is written; flush and close.
            case connectionError(HTTP2ErrorCode)
        }

        let initialSettings: [(UInt16, Int)]
        let streamCap: Int
        let allocator: ByteBufferAllocator
        var decoder: HeaderBlockDecoder
        var streams: [HTTP2StreamID: Stream] = [:]
        var lastClientStreamID: HTTP2StreamID = .rootStream
        var continuing: PendingHeaders?
        var continuationFrames = 0
        /// The stream limit in force, and limits sent but not yet acknowledged (lowered ones apply on ACK).
        var streamLimit: Int
        var pendingLimits: [Int?] = []
        var peerInitialWindow = 65_535
        var peerMaxFrameSize = 16_384
        var connectionOutboundWindow = 65_535
        var unacknowledgedBytes = 0
        var out: ByteBuffer
        /// A connection error ended the connection.
        var failed = false
        var sentSettings = false
        /// The smallest HEADER_TABLE_SIZE the client set since our last header block (RFC 7541 §4.2).
        var tableSizeUpdate: Int?
        var peerTableSize = 4096
        /// The last-stream-id of the first GOAWAY sent: later ones may not raise it.
        var goAwayLastStreamID: HTTP2StreamID?
        /// Streams this side reset lately: frames still in flight for them are ignored.
        var recentlyReset: [HTTP2StreamID] = []

        /// - Parameters:
        ///   - settings: what the server announces; `MAX_CONCURRENT_STREAMS` among them.
        ///   - streamCap: the most streams ever allowed, also before the client has acknowledged
        ///     the first SETTINGS (until then it cannot know the announced limit).
        init(settings: [(UInt16, Int)], streamCap: Int, allocator: ByteBufferAllocator) {
            self.initialSettings = settings
            self.decoder = HeaderBlockDecoder(maxTableSize: 4096, maxHeaderListSize: Self.maxHeaderListSize)
            self.streamCap = max(1, streamCap)
            self.streamLimit = max(1, streamCap)
            self.allocator = allocator
            self.out = allocator.buffer(capacity: 4096)
        }

        // MARK: events

        /// The connection is up: our SETTINGS, once. Returns whether they were written now.
        mutating func connectionActive() -> Bool {
            guard !self.sentSettings else { return false }
            self.sentSettings = true
            self.writeSettings(self.initialSettings)
            return true
        }

        /// The bytes written since the last call, for one write; nil when there are none.
        mutating func takeOutbound() -> ByteBuffer? {
            guard self.out.readableBytes > 0 else { return nil }
            let bytes = self.out
            self.out = self.allocator.buffer(capacity: 4096)
            return bytes
        }

        /// The end of a read: gives back the connection window received since the last update.
        mutating func readComplete() {
            if self.unacknowledgedBytes > 0 {
                let increment = UInt32(min(self.unacknowledgedBytes, 0x7FFF_FFFF))
                self.writeFrame(.windowUpdate, flags: 0, streamID: .rootStream) { $0.writeInteger(increment) }
                self.unacknowledgedBytes = 0
            }
        }

        /// The reader refused the bytes.
        mutating func readFailed(_ error: HTTP2ServerFrameReader.Error) -> InboundAction {
            switch error {
            case .badPreface: return self.connectionError(.protocolError)
            case .frameTooLarge: return self.connectionError(.frameSizeError)
            }
        }

        /// A protocol error: GOAWAY with `code` and the highest stream seen (or the lower
        /// last-stream-id of an earlier GOAWAY); the connection ends.
        mutating func connectionError(_ code: HTTP2ErrorCode) -> InboundAction {
            guard !self.failed else { return .none }
            self.failed = true
            let last = min(self.goAwayLastStreamID ?? self.lastClientStreamID, self.lastClientStreamID)
            self.writeFrame(.goAway, flags: 0, streamID: .rootStream) {
                $0.writeInteger(UInt32(Int32(last)))
                $0.writeInteger(UInt32(clamping: code.networkCode))
            }
            return .connectionError(code)
        }

        static func unpadded(_ payload: ByteBuffer, flags: UInt8) -> ByteBuffer? {
            guard flags & 0x8 != 0 else { return payload }
            var payload = payload
            guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else { return nil }
            return payload.readSlice(length: payload.readableBytes - Int(padding))
        }

        mutating func closeIfDone(_ streamID: HTTP2StreamID) {
            if let index = self.streams.index(forKey: streamID) { self.closeIfDone(at: index) }
        }

        /// By the stream's place in the table: every request passes here twice, and a lookup
        /// hashes its id.
        mutating func closeIfDone(at index: Dictionary<HTTP2StreamID, Stream>.Index) {
            let stream = self.streams.values[index]
            if stream.remoteClosed, stream.localClosed, stream.queued.isEmpty { self.streams.remove(at: index) }
        }

        mutating func noteReset(_ streamID: HTTP2StreamID) {
            self.recentlyReset.append(streamID)
            if self.recentlyReset.count > 128 { self.recentlyReset.removeFirst(self.recentlyReset.count - 128) }
        }
    }
}

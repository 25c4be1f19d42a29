// SPDX-License-Identifier: Apache-2.0
import APNSModels
import APNSTransport
import NIOCore

extension APNSConnection {
    /// The client side of RFC 9113 for one APNs connection, on plain values: frames and requests
    /// in, actions out. It owns the streams, the windows, the peer's settings, HPACK in both
    /// directions and the outgoing bytes (`takeOutbound()` hands them to the handler to write);
    /// ``APNSConnection`` performs the actions (the pool's callbacks, closing) and nothing else.
    struct StateMachine {
        struct Stream {
            var pending: Pending
            var token: ProviderToken?
            var status = 0
            var apnsID: String?
            var uniqueID: String?
            var body: ByteBuffer?
            /// DATA held back by flow control.
            var unsent: ByteBuffer?
            var window: Int
        }

        /// HTTP/2 error codes a connection error sends in its GOAWAY.
        enum ErrorCode: UInt32, Equatable {
            case `protocol` = 0x1, flowControl = 0x3, frameSize = 0x6, compression = 0x9, enhanceYourCalm = 0xB
        }

        /// What the handler does after a frame.
        enum FrameAction {
            case none
            /// A stream's answer is in: 200.
            case succeeded(Pending, APNSDelivery)
            /// A stream ended without a delivery (a rejection, a reset, an oversized answer).
            /// Boxed: the error is large and rare, and every action is moved by value.
            indirect case failed(Pending, APNSClientError)
            /// 403 ExpiredProviderToken: the pool refreshes the token and resends.
            indirect case tokenExpired(Pending, ProviderToken?)
            /// RST_STREAM(REFUSED_STREAM): never processed; resend it.
            case refused(Pending)
            /// The first SETTINGS: the connection takes streams.
            case ready(maxStreams: Int)
            /// GOAWAY from APNs: resend the streams above its last-stream-id, then drain.
            case goAway(GoAway)
            /// A protocol error: GOAWAY with `code` is written; flush and close.
            case connectionError(ErrorCode, String)
        }

        struct GoAway {
            /// Streams above the last-stream-id, oldest first: never processed.
            var unprocessed: [Pending]
            var failedBeforeReady: Bool
            var code: UInt32
            var reason: String
        }

        /// What the handler does with a request it submitted. (No payload: the request stays
        /// with the caller, so the hot path copies nothing.)
        enum SubmitAction: Equatable {
            /// Written into the outgoing buffer.
            case sent
            /// Not written: give it back to the pool as it was, after closing when `close` is set.
            case notSent(close: Bool)
        }

        /// Every stream handed back once when the connection ends.
        struct Termination {
            /// Streams whose answer had started (completed with what arrived), and ones at or
            /// below a GOAWAY's last-stream-id (failed: APNs may have acted on them).
            var outcomes: [FrameAction]
            /// Sent, never answered: APNs may or may not have processed them (an unknown outcome).
            var unanswered: [Pending]
            var becameReady: Bool
            var reason: String
        }

        static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        /// Our receive window for the whole connection: answers are small, so it never closes.
        static let connectionReceiveWindow = 1 << 24
        /// The largest answer body of a broadcast or channel-management request.
        static let maximumExtraAnswerBytes = 1 << 22
        /// Stream ids stop here, leaving room for a full batch: then the connection drains.
        static let lastUsableStreamID: UInt32 = 0x7FFF_0000

        var state: State = .connecting
        var becameReady = false
        var terminated = false
        /// The last-stream-id of a GOAWAY: streams at or below it may have been processed.
        var goAwayLastStreamID: UInt32?
        var streams: [UInt32: Stream] = [:]
        /// Streams with DATA waiting for window, oldest first.
        var blocked: [UInt32] = []
        var nextStreamID: UInt32 = 1
        var peerMaxStreams = 1
        /// Token connections: one stream until an answer that is not an authentication failure.
        var ramped: Bool
        var peerInitialWindow = 65_535
        var peerMaxFrameSize = 16_384
        var sendWindow = 65_535
        var encoder = APNSHeaderEncoder()
        var decoder: HeaderBlockDecoder
        var continuing: (streamID: UInt32, block: ByteBuffer, endStream: Bool)?
        var unacknowledgedBytes = 0
        var out: ByteBuffer
        let allocator: ByteBufferAllocator
        /// The provider token this connection sends (token auth).
        var token: ProviderToken?
        var pingSentAt: NIODeadline?
        /// What ended or is ending the connection, for logs and `connectionFailed` messages.
        var closeReason: String?

        /// The client's own cap on streams in flight (`maximumStreamsPerConnection`).
        let streamCap: Int

        init(usesToken: Bool, streamCap: Int = .max, allocator: ByteBufferAllocator) {
            self.ramped = !usesToken
            self.streamCap = streamCap
            self.decoder = HeaderBlockDecoder(maxTableSize: 4096, maxHeaderListSize: 16_384)
            self.allocator = allocator
            self.out = allocator.buffer(capacity: 16_384)
        }

        /// New streams this connection can take now.
        var capacity: Int {
            guard self.state == .ready else { return 0 }
            let limit = min(self.streamCap, self.ramped ? self.peerMaxStreams : min(1, self.peerMaxStreams))
            return max(0, limit - self.streams.count)
        }

        var inFlight: Int { self.streams.count }

        /// Draining with nothing left in flight: the handler closes.
        var isDrained: Bool { self.state == .draining && self.streams.isEmpty }

        // MARK: events

        /// The channel is up: the preface, our SETTINGS (no server push, no server-initiated
        /// streams) and the connection window.
        mutating func channelActive() {
            self.out.writeBytes(Self.preface)
            self.writeFrame(.settings, flags: 0, streamID: 0) { out in
                out.writeInteger(UInt16(2))
                out.writeInteger(UInt32(0))
                out.writeInteger(UInt16(3))
                out.writeInteger(UInt32(0))
            }
            self.writeFrame(.windowUpdate, flags: 0, streamID: 0) { $0.writeInteger(UInt32(Self.connectionReceiveWindow - 65_535)) }
        }

        /// The bytes written since the last call, for one write; nil when there are none.
        mutating func takeOutbound() -> ByteBuffer? {
            guard self.out.readableBytes > 0 else { return nil }
            let bytes = self.out
            self.out = self.allocator.buffer(capacity: max(4096, bytes.readableBytes))
            return bytes
        }

        /// The end of a read: gives back the receive window once a quarter of it is used.
        mutating func readComplete() {
            if self.unacknowledgedBytes >= Self.connectionReceiveWindow / 4 {
                let increment = UInt32(self.unacknowledgedBytes)
                self.writeFrame(.windowUpdate, flags: 0, streamID: 0) { $0.writeInteger(increment) }
                self.unacknowledgedBytes = 0
            }
        }

        /// Stops taking streams. Returns whether to close now (nothing in flight).
        mutating func drain(reason: String) -> Bool {
            guard self.state == .ready || self.state == .connecting else { return false }
            if self.closeReason == nil { self.closeReason = reason }
            self.state = .draining
            return self.isDrained
        }

        /// The client shuts down with nothing in flight: GOAWAY(NO_ERROR), then close.
        mutating func shutdown() {
            self.state = .draining
            self.writeFrame(.goAway, flags: 0, streamID: 0) { out in
                out.writeInteger(UInt32(0))
                out.writeInteger(UInt32(0))
            }
            self.closeReason = "the client shut down"
        }

        /// A PING to check the connection is alive. Returns whether one was written.
        mutating func ping(now: NIODeadline) -> Bool {
            guard self.state == .ready, self.pingSentAt == nil else { return false }
            self.pingSentAt = now
            self.writeFrame(.ping, flags: 0, streamID: 0) { $0.writeInteger(UInt64(now.uptimeNanoseconds)) }
            return true
        }

        /// Timeout: removes the streams whose deadline passed, resetting them with CANCEL.
        mutating func expire(now: NIODeadline) -> [Pending] {
            guard self.streams.values.contains(where: { $0.pending.deadline <= now }) else { return [] }
            var expired: [Pending] = []
            for (streamID, stream) in self.streams where stream.pending.deadline <= now {
                self.streams[streamID] = nil
                self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(0x8)) }
                expired.append(stream.pending)
            }
            self.blocked.removeAll { self.streams[$0] == nil }
            return expired
        }

        /// Close: hands every stream back once. Answered-but-unfinished ones complete, ones at
        /// or below a GOAWAY's last-stream-id fail (APNs may have acted on them), the rest are
        /// unanswered. Nil when the connection already ended.
        mutating func closed() -> Termination? {
            guard !self.terminated else { return nil }
            self.terminated = true
            self.state = .closed
            var termination = Termination(
                outcomes: [], unanswered: [], becameReady: self.becameReady, reason: self.closeReason ?? "the connection closed"
            )
            for (streamID, stream) in self.streams.sorted(by: { $0.key < $1.key }) {
                if stream.status >= 200 {
                    // The answer's status came; its body did not. Complete with what arrived.
                    termination.outcomes.append(self.finish(stream))
                } else if let last = self.goAwayLastStreamID, streamID <= last {
                    termination.outcomes.append(
                        .failed(
                            stream.pending,
                            APNSClientError(
                                code: .connectionFailed, message: "the connection closed after GOAWAY before the answer; it may have been delivered",
                                outcomeUnknown: true)
                        )
                    )
                } else {
                    termination.unanswered.append(stream.pending)
                }
            }
            self.streams.removeAll()
            self.blocked.removeAll()
            return termination
        }

        /// A protocol error: GOAWAY with `code`, and the connection ends.
        mutating func connectionError(_ code: ErrorCode, _ message: String) -> FrameAction {
            guard self.state != .closed else { return .none }
            self.closeReason = "HTTP/2 protocol error: \(message)"
            self.writeFrame(.goAway, flags: 0, streamID: 0) { out in
                out.writeInteger(UInt32(0))
                out.writeInteger(code.rawValue)
            }
            self.state = .closed
            return .connectionError(code, message)
        }

        /// The reader refused the bytes.
        mutating func readFailed(_ error: HTTP2FrameReader.Error) -> FrameAction {
            switch error {
            case .frameTooLarge: return self.connectionError(.frameSize, "a frame over our 16384-byte limit")
            }
        }

        // MARK: framing

        static func unpadded(_ payload: ByteBuffer, flags: UInt8) -> ByteBuffer? {
            guard flags & 0x8 != 0 else { return payload }
            var payload = payload
            guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else { return nil }
            return payload.readSlice(length: payload.readableBytes - Int(padding))
        }

        mutating func writeFrameHeader(length: Int, type: HTTP2FrameType, flags: UInt8, streamID: UInt32) {
            self.out.writeInteger(UInt32(length) << 8 | UInt32(type.rawValue))
            self.out.writeInteger(flags)
            self.out.writeInteger(streamID)
        }

        mutating func writeFrame(_ type: HTTP2FrameType, flags: UInt8, streamID: UInt32, payload: (inout ByteBuffer) -> Void) {
            let start = self.out.writerIndex
            self.writeFrameHeader(length: 0, type: type, flags: flags, streamID: streamID)
            payload(&self.out)
            let length = self.out.writerIndex - start - 9
            self.out.setInteger(UInt32(length) << 8 | UInt32(type.rawValue), at: start)
        }
    }
}

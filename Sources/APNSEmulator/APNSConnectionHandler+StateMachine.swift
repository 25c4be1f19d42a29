// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import NIOHTTP2

extension APNSConnectionHandler {
    /// A request on its way in: its headers and as much of its body as any APNs request may have.
    struct PendingStream {
        var headers: HPACKHeaders
        var body: ByteBuffer
        /// The body passed the largest size any APNs request may have; the rest is not kept.
        var oversized = false
        /// Flow-controlled bytes received on the stream so far.
        var received = 0
    }

    /// APNs's connection behaviour on plain values: requests read to their end, the stream-limit
    /// ramp, GOAWAY's boundary and when a draining connection may close. Judging requests
    /// (``RequestProcessor``), faults, timers and writes stay in ``APNSConnectionHandler``.
    struct StateMachine {
        /// No APNs request body may be larger (broadcasts and VoIP allow 5120 bytes).
        static let bodyCap = 5120

        /// What the handler does after a frame from the codec.
        enum FrameAction {
            case none
            /// Grant the client this much window on the stream: an oversized upload goes on.
            case windowUpdate(Int)
            /// The request ended (after granting `windowUpdate` when set): judge it, unless it
            /// came above GOAWAY's last-stream-id (``admit(_:)``).
            case requestComplete(PendingStream, windowUpdate: Int?)
            /// The client reset the stream: drop an answer held back for it.
            case reset
        }

        let maxConcurrentStreams: Int
        let dropStreamLimitAfterRejection: Bool
        var streams: [HTTP2StreamID: PendingStream] = [:]
        /// Streams processed whose answer is held back (injected latency).
        var delayed: Set<HTTP2StreamID> = []
        var advertisedLimit = 1
        var loweredByFault = false
        var highestStreamID: HTTP2StreamID = .rootStream
        var highestProcessedStreamID: HTTP2StreamID = .rootStream
        var goAwaySent = false
        /// GOAWAY's last-stream-id: streams above it are refused, unprocessed.
        var goAwayBoundary: HTTP2StreamID?
        let allocator: ByteBufferAllocator

        init(maxConcurrentStreams: Int, dropStreamLimitAfterRejection: Bool, allocator: ByteBufferAllocator) {
            self.maxConcurrentStreams = maxConcurrentStreams
            self.dropStreamLimitAfterRejection = dropStreamLimitAfterRejection
            self.allocator = allocator
        }

        /// Nothing in flight: no request being read, no answer held back.
        var isIdle: Bool { self.streams.isEmpty && self.delayed.isEmpty }

        // MARK: events

        /// Frame from the codec: collects the request (HEADERS, DATA up to the body cap) and
        /// says when it ended.
        mutating func frameReceived(_ frame: HTTP2Frame) -> FrameAction {
            let streamID = frame.streamID
            switch frame.payload {
            case .headers(let headers):
                if streamID > self.highestStreamID { self.highestStreamID = streamID }
                if self.streams[streamID] == nil {
                    self.streams[streamID] = PendingStream(headers: headers.headers, body: self.allocator.buffer(capacity: 0))
                }
                // (Trailers end a stream too.)
                guard headers.endStream, let pending = self.streams.removeValue(forKey: streamID) else { return .none }
                return .requestComplete(pending, windowUpdate: nil)
            case .data(let data):
                let length = data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
                // Taken out of the table (one lookup; the body then has one owner), put back below
                // unless this DATA ends the request, as an APNs request's one DATA frame does.
                guard let index = self.streams.index(forKey: streamID) else { return .none }
                var pending = self.streams.remove(at: index).value
                pending.received += length
                var windowUpdate: Int?
                if case .byteBuffer(var buffer) = data.data, !pending.oversized {
                    let room = Self.bodyCap + 1 - pending.body.readableBytes
                    if buffer.readableBytes > room {
                        pending.oversized = true
                        if room > 0, let slice = buffer.readSlice(length: room) { pending.body.writeImmutableBuffer(slice) }
                        // Larger than any APNs request: keep no more of it, but let the client finish
                        // its upload (granting window as it comes) and answer 413 at its end. Clients
                        // handle an answer before the end of their upload badly (curl 7.88 hangs).
                        windowUpdate = pending.received
                    } else {
                        pending.body.writeBuffer(&buffer)
                    }
                } else if pending.oversized, length > 0, !data.endStream {
                    windowUpdate = length
                }
                guard data.endStream else {
                    self.streams[streamID] = pending
                    return windowUpdate.map { .windowUpdate($0) } ?? .none
                }
                return .requestComplete(pending, windowUpdate: windowUpdate)
            case .rstStream:
                self.streams[streamID] = nil
                self.delayed.remove(streamID)
                return .reset
            default:
                return .none  // SETTINGS and PING are answered by the codec; PRIORITY is ignored, as APNs does.
            }
        }

        /// A request ended: false when it came above GOAWAY's last-stream-id, so it is refused
        /// unprocessed (the client may send it elsewhere).
        func admit(_ streamID: HTTP2StreamID) -> Bool {
            guard let boundary = self.goAwayBoundary else { return true }
            return streamID <= boundary
        }

        /// A request was judged: the stream-limit changes to announce, in order. The first
        /// authenticated request opens the full limit; with `dropStreamLimitAfterRejection` a
        /// rejection (not 410) drops it to 1 and an acceptance restores it.
        mutating func processed(_ streamID: HTTP2StreamID, accepted: Bool, status: Int, firstAuthentication: Bool, authenticated: Bool) -> [Int] {
            if streamID > self.highestProcessedStreamID { self.highestProcessedStreamID = streamID }
            var limits: [Int] = []
            if firstAuthentication, !self.loweredByFault, self.advertisedLimit < self.maxConcurrentStreams {
                limits.append(self.streamLimit(self.maxConcurrentStreams))
            }
            if self.dropStreamLimitAfterRejection, !self.loweredByFault, authenticated {
                if !accepted, status != 410 {
                    if self.advertisedLimit != 1 { limits.append(self.streamLimit(1)) }
                } else if accepted, self.advertisedLimit != self.maxConcurrentStreams {
                    limits.append(self.streamLimit(self.maxConcurrentStreams))
                }
            }
            return limits
        }

        /// A stream limit announced: returns it.
        mutating func streamLimit(_ limit: Int) -> Int {
            self.advertisedLimit = limit
            return limit
        }

        /// The stream-limit fault while judging `streamID`: the limit to announce, and the
        /// requests still being read that no longer fit (refused, unprocessed). Requests already
        /// processed (answers held back) and this one count against the limit but stay.
        mutating func streamLimitFault(_ limit: Int) -> (limit: Int, refuse: [HTTP2StreamID]) {
            self.loweredByFault = limit < self.maxConcurrentStreams
            let announced = self.streamLimit(max(0, limit))
            let processed = self.delayed.count + 1
            let refuse = Array(self.streams.keys.sorted().dropFirst(max(0, limit - processed)))
            return (announced, refuse)
        }

        /// A stream refused with REFUSED_STREAM.
        mutating func refused(_ streamID: HTTP2StreamID) {
            self.streams[streamID] = nil
            self.delayed.remove(streamID)
        }

        /// The GOAWAY fault while judging `streamID`: everything processed so far is at or below
        /// the boundary; this stream is not, unless a later one was already answered (then it is
        /// answered 503 Shutdown first, as it cannot be marked unprocessed).
        mutating func goAwayFault(_ streamID: HTTP2StreamID) -> (answerFirst: Bool, boundary: HTTP2StreamID) {
            let answerFirst = self.highestProcessedStreamID > streamID
            let boundary = max(self.highestProcessedStreamID, HTTP2StreamID(max(0, Int(streamID) - 2)))
            self.goAwayBoundary = boundary
            return (answerFirst, boundary)
        }

        /// Graceful shutdown or idle timeout: everything received is answered. Returns GOAWAY's
        /// last-stream-id.
        mutating func closing() -> HTTP2StreamID {
            self.goAwayBoundary = self.highestStreamID
            return self.highestStreamID
        }

        /// Whether to send a GOAWAY: only the first one goes out.
        mutating func sendGoAway() -> Bool {
            guard !self.goAwaySent else { return false }
            self.goAwaySent = true
            return true
        }

        /// An answer was held back (injected latency).
        mutating func answerDelayed(_ streamID: HTTP2StreamID) { self.delayed.insert(streamID) }

        /// A held-back answer is due: false when the stream was reset or refused meanwhile.
        mutating func delayedAnswerDue(_ streamID: HTTP2StreamID) -> Bool { self.delayed.remove(streamID) != nil }

        /// After GOAWAY: whether requests at or below its boundary are still being read or answered.
        var waitingBelowBoundary: Bool {
            let boundary = self.goAwayBoundary ?? .rootStream
            return self.streams.keys.contains { $0 <= boundary } || self.delayed.contains { $0 <= boundary }
        }
    }
}

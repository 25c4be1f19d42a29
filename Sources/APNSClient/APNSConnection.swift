// SPDX-License-Identifier: Apache-2.0
import APNSModels
import APNSTransport
import Logging
import NIOCore
import NIOHPACK
import NIOTLS
import CoreMetrics

/// One HTTP/2 connection to APNs: the client side of RFC 9113, cut to what APNs needs, written
/// straight onto the TLS handler without a generic stream layer.
///
/// The pool hands it requests while it has stream capacity; it writes each as one HEADERS
/// frame (HPACK per Apple's guidance, by ``APNSHeaderEncoder``) and one DATA frame into a
/// buffer that goes out in a single write per batch. Answers come back as the pool's callbacks:
/// success, rejection, or a resend for streams APNs never processed (REFUSED_STREAM, streams
/// above a GOAWAY's last-stream-id, a connection lost before the answer).
///
/// Stream capacity follows the server's SETTINGS. On token connections it is one stream until
/// the first answer that is not an authentication failure, as APNs itself allows.
/// Everything runs on the pool's event loop.
final class APNSConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum State: Equatable {
        /// TCP/TLS under way, or waiting for the server's first SETTINGS.
        case connecting
        /// Takes new streams.
        case ready
        /// Takes no new streams (GOAWAY, a provider token it may not switch to, stream ids used
        /// up); closes when its streams are answered.
        case draining
        case closed
    }

    private struct Stream {
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

    private enum FrameType: UInt8 {
        case data = 0, headers = 1, priority = 2, rstStream = 3, settings = 4, pushPromise = 5, ping = 6
        case goAway = 7, windowUpdate = 8, continuation = 9
    }

    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// Our receive window for the whole connection: answers are small, so it never closes.
    static let connectionReceiveWindow = 1 << 24

    let id: Int
    private let pool: ConnectionPool
    private(set) var state: State = .connecting
    /// The channel this connection runs on: the first to become active. Happy Eyeballs may add
    /// this handler to several attempts' pipelines; the others are ignored and closed by NIO.
    private var context: ChannelHandlerContext?
    private var becameReady = false
    private var terminated = false
    private var shutdownRequested = false
    /// The last-stream-id of a GOAWAY: streams at or below it may have been processed.
    private var goAwayLastStreamID: UInt32?
    /// Stream ids stop here, leaving room for a full batch: then the connection drains.
    static let lastUsableStreamID: UInt32 = 0x7FFF_0000
    private var streams: [UInt32: Stream] = [:]
    /// Streams with DATA waiting for window, oldest first.
    private var blocked: [UInt32] = []
    private var nextStreamID: UInt32 = 1
    private var peerMaxStreams = 1
    /// Token connections: one stream until an answer that is not an authentication failure.
    private var ramped: Bool
    private var peerInitialWindow = 65_535
    private var peerMaxFrameSize = 16_384
    private var sendWindow = 65_535
    private var encoder = APNSHeaderEncoder()
    private var decoder: HPACKDecoder
    private var inbound: ByteBuffer?
    private var continuing: (streamID: UInt32, block: ByteBuffer, endStream: Bool)?
    private var unacknowledgedBytes = 0
    private var out: ByteBuffer
    private var token: ProviderToken?
    private(set) var lastRead: NIODeadline
    private(set) var pingSentAt: NIODeadline?
    let openedAt: NIODeadline
    /// What ended or is ending the connection, for logs and `connectionFailed` messages.
    private(set) var closeReason: String?
    private var logger: Logger

    init(id: Int, pool: ConnectionPool, usesToken: Bool, logger: Logger, allocator: ByteBufferAllocator) {
        self.id = id
        self.pool = pool
        self.ramped = !usesToken
        self.decoder = HPACKDecoder(allocator: allocator, maxDynamicTableSize: 4096, maxHeaderListSize: 16_384)
        self.out = allocator.buffer(capacity: 16_384)
        self.openedAt = .now()
        self.lastRead = self.openedAt
        self.logger = logger
        self.logger[metadataKey: "apns.connection"] = "\(id)"
    }

    /// New streams this connection can take now.
    var capacity: Int {
        guard self.state == .ready else { return 0 }
        let limit = self.ramped ? self.peerMaxStreams : min(1, self.peerMaxStreams)
        return max(0, limit - self.streams.count)
    }

    var inFlight: Int { self.streams.count }

    // MARK: lifecycle

    func channelActive(context: ChannelHandlerContext) {
        guard self.context == nil else { return context.fireChannelActive() }
        self.context = context
        if self.shutdownRequested {
            self.closeReason = "the client shut down"
            context.close(promise: nil)
            return
        }
        self.out.writeBytes(Self.preface)
        // SETTINGS: no server push, no server-initiated streams.
        self.writeFrame(.settings, flags: 0, streamID: 0) { out in
            out.writeInteger(UInt16(2))
            out.writeInteger(UInt32(0))
            out.writeInteger(UInt16(3))
            out.writeInteger(UInt32(0))
        }
        self.writeFrame(.windowUpdate, flags: 0, streamID: 0) { $0.writeInteger(UInt32(Self.connectionReceiveWindow - 65_535)) }
        self.flush()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard context === self.context else { return }
        self.terminate()
        self.context = nil
    }

    /// Hands every stream back once: answered-but-unfinished ones complete, ones at or below a
    /// GOAWAY's last-stream-id fail (APNs may have acted on them), the rest go to the pool to be
    /// resent. Then the pool forgets this connection.
    private func terminate() {
        guard !self.terminated else { return }
        self.terminated = true
        self.state = .closed
        let reason = self.closeReason ?? "the connection closed"
        var unanswered: [Pending] = []
        for (streamID, stream) in self.streams.sorted(by: { $0.key < $1.key }) {
            if stream.status >= 200 {
                // The answer's status came; its body did not. Complete with what arrived.
                self.finish(stream)
            } else if let last = self.goAwayLastStreamID, streamID <= last {
                self.pool.failed(
                    stream.pending,
                    APNSClientError(code: .connectionFailed, message: "the connection closed after GOAWAY before the answer; it may have been delivered")
                )
            } else {
                unanswered.append(stream.pending)
            }
        }
        self.streams.removeAll()
        self.blocked.removeAll()
        self.pool.connectionClosed(self, becameReady: self.becameReady, unanswered: unanswered, reason: reason)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard context === self.context else { return }
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = event, let negotiated, negotiated != "h2" {
            // No ALPN at all is fine (HTTP/2 with prior knowledge, as APNs accepts); another protocol is not.
            self.closeReason = "the server chose \(negotiated) instead of h2"
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard context === self.context else { return context.close(promise: nil) }
        if self.closeReason == nil { self.closeReason = "\(error)" }
        self.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    /// Closes now; unanswered streams go back to the pool at once, without waiting for the TLS
    /// shutdown of a peer that may never answer.
    func close(reason: String) {
        if self.closeReason == nil { self.closeReason = reason }
        let context = self.context
        self.terminate()
        context?.close(promise: nil)
    }

    /// Stops taking streams; closes once the ones in flight are answered.
    func drain(reason: String) {
        guard self.state == .ready || self.state == .connecting else { return }
        if self.closeReason == nil { self.closeReason = reason }
        self.state = .draining
        self.closeIfDrained()
    }

    /// Sends GOAWAY(NO_ERROR) and closes: the client is shutting down and nothing is in flight.
    func shutdown() {
        self.shutdownRequested = true
        guard let context = self.context else { return }
        self.state = .draining
        self.writeFrame(.goAway, flags: 0, streamID: 0) { out in
            out.writeInteger(UInt32(0))
            out.writeInteger(UInt32(0))
        }
        self.flush()
        self.closeReason = "the client shut down"
        context.close(promise: nil)
    }

    private func closeIfDrained() {
        if self.state == .draining, self.streams.isEmpty {
            self.context?.close(promise: nil)
        }
    }

    // MARK: sending

    /// Writes one request as HEADERS + DATA into the outgoing buffer; `flush()` sends the batch.
    /// Only called while `capacity > 0`.
    func send(_ pending: Pending) {
        guard self.state == .ready, self.nextStreamID < Self.lastUsableStreamID else {
            if self.state == .ready { self.drain(reason: "stream ids used up") }
            self.pool.resend(pending, countingSend: false)
            return
        }
        var pending = pending
        var token: ProviderToken?
        if self.pool.tokenSource != nil {
            token = self.currentToken()
            if token == nil {
                // This connection may not switch to the shared token yet: a fresh one will carry it.
                self.pool.resend(pending, countingSend: false)
                return
            }
        }
        pending.sends += 1
        let streamID = self.nextStreamID
        self.nextStreamID += 2

        let request = pending.request
        let headers = request.headers
        let expiration: Int64?
        switch headers.expiration {
        case .storagePolicy: expiration = nil
        case .immediately: expiration = 0
        case .at(let seconds): expiration = seconds
        }
        let start = self.out.writerIndex
        self.out.writeInteger(UInt32(0))
        self.out.writeInteger(UInt8(0x4))  // END_HEADERS
        self.out.writeInteger(streamID)
        self.encoder.encodeDevicePush(
            authority: self.pool.authority,
            deviceToken: request.deviceToken.hex,
            authorization: token?.authorization,
            topic: headers.topic,
            pushType: headers.pushType.rawValue,
            priority: headers.priority?.rawValue,
            expiration: expiration,
            apnsID: headers.apnsID,
            collapseID: headers.collapseID,
            into: &self.out
        )
        let blockLength = self.out.writerIndex - start - 9
        if blockLength <= self.peerMaxFrameSize {
            self.out.setInteger(UInt32(blockLength) << 8 | UInt32(FrameType.headers.rawValue), at: start)
        } else {
            self.splitHeaderBlock(start: start, streamID: streamID)
        }

        var stream = Stream(pending: pending, token: token, window: self.peerInitialWindow)
        let size = request.payload.count
        if size <= stream.window, size <= self.sendWindow, size <= self.peerMaxFrameSize {
            stream.window -= size
            self.sendWindow -= size
            self.writeFrameHeader(length: size, type: .data, flags: 0x1, streamID: streamID)
            self.out.writeBytes(request.payload)
        } else {
            var unsent = ByteBuffer(bytes: request.payload)
            self.writeData(&unsent, stream: &stream, streamID: streamID)
            if unsent.readableBytes > 0 {
                stream.unsent = unsent
                self.blocked.append(streamID)
            }
        }
        self.streams[streamID] = stream
    }

    /// The provider token for the next request, or nil when this connection may not take the
    /// shared one yet (APNs refuses a token change within 20 minutes of the last on a connection).
    private func currentToken() -> ProviderToken? {
        guard let shared = self.pool.token else { return nil }
        guard let own = self.token else {
            self.token = shared
            return shared
        }
        if own.generation == shared.generation { return own }
        if shared.issuedAt - own.issuedAt >= ProviderTokenSource.minimumChangeIntervalSeconds {
            self.token = shared
            return shared
        }
        self.drain(reason: "the provider token changed too soon for this connection")
        return nil
    }

    /// A header block over the peer's frame size: HEADERS plus CONTINUATION frames.
    private func splitHeaderBlock(start: Int, streamID: UInt32) {
        let block = self.out.getSlice(at: start + 9, length: self.out.writerIndex - start - 9)!
        self.out.moveWriterIndex(to: start)
        var rest = block
        var first = true
        while rest.readableBytes > 0 {
            var chunk = rest.readSlice(length: min(self.peerMaxFrameSize, rest.readableBytes))!
            let last = rest.readableBytes == 0
            self.writeFrame(first ? .headers : .continuation, flags: last ? 0x4 : 0, streamID: streamID) { $0.writeBuffer(&chunk) }
            first = false
        }
    }

    /// Writes as much of `data` as the windows allow.
    private func writeData(_ data: inout ByteBuffer, stream: inout Stream, streamID: UInt32) {
        while data.readableBytes > 0 {
            let room = min(stream.window, self.sendWindow, self.peerMaxFrameSize)
            guard room > 0 else { return }
            var chunk = data.readSlice(length: min(room, data.readableBytes))!
            stream.window -= chunk.readableBytes
            self.sendWindow -= chunk.readableBytes
            let end = data.readableBytes == 0
            self.writeFrame(.data, flags: end ? 0x1 : 0, streamID: streamID) { $0.writeBuffer(&chunk) }
        }
    }

    private func resumeBlocked() {
        guard !self.blocked.isEmpty else { return }
        var still: [UInt32] = []
        for streamID in self.blocked {
            guard var stream = self.streams[streamID], var unsent = stream.unsent else { continue }
            self.writeData(&unsent, stream: &stream, streamID: streamID)
            stream.unsent = unsent.readableBytes > 0 ? unsent : nil
            if stream.unsent != nil { still.append(streamID) }
            self.streams[streamID] = stream
        }
        self.blocked = still
    }

    /// Sends what was written since the last flush, in one write.
    func flush() {
        guard let context = self.context, self.out.readableBytes > 0 else { return }
        let bytes = self.out
        self.out = context.channel.allocator.buffer(capacity: max(4096, bytes.readableBytes))
        context.writeAndFlush(NIOAny(bytes), promise: nil)
    }

    func ping(now: NIODeadline) {
        guard self.state == .ready, self.pingSentAt == nil else { return }
        self.pingSentAt = now
        self.writeFrame(.ping, flags: 0, streamID: 0) { $0.writeInteger(UInt64(now.uptimeNanoseconds)) }
        self.flush()
    }

    /// Fails the streams whose deadline passed, resetting them with CANCEL.
    func expire(now: NIODeadline) {
        guard self.streams.values.contains(where: { $0.pending.deadline <= now }) else { return }
        for (streamID, stream) in self.streams where stream.pending.deadline <= now {
            self.streams[streamID] = nil
            self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(0x8)) }
            self.pool.deadlineExceeded(stream.pending, sent: true)
        }
        self.blocked.removeAll { self.streams[$0] == nil }
        self.flush()
        self.closeIfDrained()
    }

    // MARK: receiving

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard self.state != .closed, context === self.context else { return }
        var incoming = self.unwrapInboundIn(data)
        self.lastRead = .now()
        if self.inbound == nil || self.inbound!.readableBytes == 0 {
            self.inbound = incoming
        } else {
            self.inbound!.writeBuffer(&incoming)
        }
        while self.state != .closed, var buffer = self.inbound, buffer.readableBytes >= 9 {
            let header = buffer.readerIndex
            let length = Int(buffer.getInteger(at: header, as: UInt32.self)! >> 8)
            guard length <= 16_384 else { return self.connectionError(.frameSize, "a frame over our 16384-byte limit") }
            guard buffer.readableBytes >= 9 + length else { break }
            let type = buffer.getInteger(at: header + 3, as: UInt8.self)!
            let flags = buffer.getInteger(at: header + 4, as: UInt8.self)!
            let streamID = buffer.getInteger(at: header + 5, as: UInt32.self)! & 0x7FFF_FFFF
            buffer.moveReaderIndex(forwardBy: 9)
            let payload = buffer.readSlice(length: length)!
            self.inbound = buffer
            self.frame(type: type, flags: flags, streamID: streamID, payload: payload)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard context === self.context else { return }
        if self.unacknowledgedBytes >= Self.connectionReceiveWindow / 4 {
            self.writeFrame(.windowUpdate, flags: 0, streamID: 0) { $0.writeInteger(UInt32(self.unacknowledgedBytes)) }
            self.unacknowledgedBytes = 0
        }
        if var buffer = self.inbound, buffer.readerIndex > 65_536 {
            buffer.discardReadBytes()
            self.inbound = buffer
        }
        // Answers freed streams: the pool refills every connection, then everything is flushed.
        self.pool.dispatch()
        self.flush()
        self.closeIfDrained()
    }

    private func frame(type: UInt8, flags: UInt8, streamID: UInt32, payload: ByteBuffer) {
        if var pending = self.continuing {
            guard type == FrameType.continuation.rawValue, streamID == pending.streamID else {
                return self.connectionError(.protocol, "expected CONTINUATION")
            }
            self.continuing = nil
            var fragment = payload
            pending.block.writeBuffer(&fragment)
            if flags & 0x4 != 0 {
                self.headersComplete(streamID: streamID, block: pending.block, endStream: pending.endStream)
            } else {
                guard pending.block.readableBytes <= 65_536 else { return self.connectionError(.enhanceYourCalm, "header block too large") }
                self.continuing = pending
            }
            return
        }
        switch FrameType(rawValue: type) {
        case .data:
            self.unacknowledgedBytes += payload.readableBytes
            guard streamID != 0, var data = Self.unpadded(payload, flags: flags) else {
                return self.connectionError(.protocol, "bad DATA frame")
            }
            guard var stream = self.streams[streamID] else { return }  // reset by us (deadline)
            if stream.body == nil {
                stream.body = data
            } else {
                stream.body!.writeBuffer(&data)
            }
            guard stream.body!.readableBytes <= 65_536 else {
                self.streams[streamID] = nil
                self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(0x8)) }
                self.pool.failed(stream.pending, APNSClientError(code: .connectionFailed, message: "APNs sent an oversized answer"))
                return
            }
            if flags & 0x1 != 0 {
                self.streams[streamID] = nil
                self.finish(stream, streamID: streamID)
            } else {
                self.streams[streamID] = stream
            }
        case .headers:
            guard streamID != 0, var block = Self.unpadded(payload, flags: flags) else {
                return self.connectionError(.protocol, "bad HEADERS frame")
            }
            if flags & 0x20 != 0 {
                guard block.readableBytes >= 5 else { return self.connectionError(.frameSize, "short HEADERS priority") }
                block.moveReaderIndex(forwardBy: 5)
            }
            if flags & 0x4 == 0 {
                self.continuing = (streamID, block, flags & 0x1 != 0)
            } else {
                self.headersComplete(streamID: streamID, block: block, endStream: flags & 0x1 != 0)
            }
        case .rstStream:
            guard payload.readableBytes == 4, streamID != 0 else { return self.connectionError(.frameSize, "bad RST_STREAM") }
            let code = payload.getInteger(at: payload.readerIndex, as: UInt32.self)!
            guard let stream = self.streams.removeValue(forKey: streamID) else { return }
            if code == 0x7 {  // REFUSED_STREAM: not processed, safe to send again
                self.pool.metrics.refusedStreams.increment()
                self.pool.resend(stream.pending, countingSend: true)
            } else {
                self.pool.failed(
                    stream.pending,
                    APNSClientError(code: .connectionFailed, message: "APNs reset the stream (HTTP/2 error \(code)); it may have been processed")
                )
            }
        case .settings:
            self.settings(flags: flags, streamID: streamID, payload: payload)
        case .ping:
            guard payload.readableBytes == 8, streamID == 0 else { return self.connectionError(.frameSize, "bad PING") }
            if flags & 0x1 == 0 {
                var echo = payload
                self.writeFrame(.ping, flags: 0x1, streamID: 0) { $0.writeBuffer(&echo) }
            } else {
                self.pingSentAt = nil
            }
        case .goAway:
            guard streamID == 0, payload.readableBytes >= 8 else { return self.connectionError(.frameSize, "bad GOAWAY") }
            var payload = payload
            let lastStreamID = payload.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
            let code = payload.readInteger(as: UInt32.self)!
            let debug = payload.readBytes(length: payload.readableBytes) ?? []
            self.goAway(lastStreamID: lastStreamID, code: code, debug: debug)
        case .windowUpdate:
            guard payload.readableBytes == 4 else { return self.connectionError(.frameSize, "bad WINDOW_UPDATE") }
            let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7FFF_FFFF)
            guard increment > 0 else { return self.connectionError(.protocol, "WINDOW_UPDATE of 0") }
            if streamID == 0 {
                guard self.sendWindow + increment <= 0x7FFF_FFFF else { return self.connectionError(.flowControl, "window overflow") }
                self.sendWindow += increment
            } else if var stream = self.streams[streamID] {
                stream.window += increment
                self.streams[streamID] = stream
            }
            self.resumeBlocked()
        case .pushPromise, .continuation:
            self.connectionError(.protocol, "unexpected frame type \(type)")
        case .priority, nil:
            break
        }
    }

    private func headersComplete(streamID: UInt32, block: ByteBuffer, endStream: Bool) {
        var block = block
        let headers: HPACKHeaders
        do {
            headers = try self.decoder.decodeHeaders(from: &block)
        } catch {
            return self.connectionError(.compression, "undecodable header block")
        }
        guard var stream = self.streams[streamID] else { return }  // reset by us; decoded to keep HPACK in step
        for (name, value, _) in headers {
            switch name {
            case ":status": stream.status = Int(value) ?? 0
            case "apns-id": stream.apnsID = value
            case "apns-unique-id": stream.uniqueID = value
            default: break
            }
        }
        if (100..<200).contains(stream.status), !endStream {
            stream.status = 0
            self.streams[streamID] = stream
            return
        }
        if endStream {
            self.streams[streamID] = nil
            self.finish(stream, streamID: streamID)
        } else {
            self.streams[streamID] = stream
        }
    }

    /// Completes a stream whose answer is in. If part of its DATA is still held back by flow
    /// control, the stream is reset so the server does not wait for the rest.
    private func finish(_ stream: Stream, streamID: UInt32? = nil) {
        if let streamID, stream.unsent != nil {
            self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(0x8)) }
            self.blocked.removeAll { $0 == streamID }
        }
        let pending = stream.pending
        if stream.status == 200 {
            self.ramped = true
            self.pool.succeeded(pending, APNSDelivery(apnsID: stream.apnsID, uniqueID: stream.uniqueID))
            return
        }
        let response = stream.body.flatMap { body in APNSErrorResponse(body: body.readableBytesView) }
        if stream.status != 403 { self.ramped = true }
        if response?.reason == .expiredProviderToken, stream.status == 403 {
            self.pool.providerTokenExpired(pending, token: stream.token, on: self)
            return
        }
        let status = stream.status
        self.pool.failed(
            pending,
            APNSClientError(
                code: .rejected,
                message: response.map { "APNs answered \(status) \($0.reason)" } ?? "APNs answered \(status) without a reason",
                status: status,
                reason: response?.reason,
                timestampMilliseconds: response?.timestampMilliseconds,
                apnsID: stream.apnsID
            )
        )
    }

    private func settings(flags: UInt8, streamID: UInt32, payload: ByteBuffer) {
        guard streamID == 0 else { return self.connectionError(.protocol, "SETTINGS on a stream") }
        if flags & 0x1 != 0 { return }  // ACK of ours
        guard payload.readableBytes % 6 == 0 else { return self.connectionError(.frameSize, "bad SETTINGS length") }
        var payload = payload
        var sawMaxStreams = false
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch identifier {
            case 1:
                self.encoder.setMaxTableSize(Int(value))
            case 3:
                sawMaxStreams = true
                self.peerMaxStreams = Int(value)
            case 4:
                guard value <= 0x7FFF_FFFF else { return self.connectionError(.flowControl, "INITIAL_WINDOW_SIZE too large") }
                let delta = Int(value) - self.peerInitialWindow
                self.peerInitialWindow = Int(value)
                for id in Array(self.streams.keys) { self.streams[id]!.window += delta }
            case 5:
                guard (16_384...16_777_215).contains(value) else { return self.connectionError(.protocol, "bad MAX_FRAME_SIZE") }
                self.peerMaxFrameSize = Int(value)
            default:
                break
            }
        }
        self.writeFrame(.settings, flags: 0x1, streamID: 0) { _ in }
        if self.state == .connecting {
            // Until told otherwise, HTTP/2 allows unlimited streams; stay careful with APNs's ramp.
            if !sawMaxStreams { self.peerMaxStreams = 100 }
            self.state = .ready
            self.becameReady = true
            self.logger.debug("connection ready", metadata: ["apns.max_streams": "\(self.peerMaxStreams)"])
            self.pool.connectionReady(self)
        }
        self.resumeBlocked()
    }

    private func goAway(lastStreamID: UInt32, code: UInt32, debug: [UInt8]) {
        let reason = APNSErrorResponse(body: debug)?.reason.rawValue ?? String(decoding: debug.prefix(200), as: UTF8.self)
        self.closeReason = "GOAWAY (HTTP/2 error \(code))" + (reason.isEmpty ? "" : ": \(reason)")
        self.logger.info("APNs sent GOAWAY", metadata: ["apns.goaway.reason": "\(reason)", "apns.goaway.code": "\(code)"])
        let wasConnecting = self.state == .connecting
        if self.state != .closed { self.state = .draining }
        self.goAwayLastStreamID = min(lastStreamID, self.goAwayLastStreamID ?? lastStreamID)
        // Streams above last-stream-id were never processed: they go to another connection.
        let unprocessed = self.streams.filter { $0.key > lastStreamID }.sorted { $0.key < $1.key }
        for (streamID, stream) in unprocessed {
            self.streams[streamID] = nil
            self.pool.resend(stream.pending, countingSend: true)
        }
        self.blocked.removeAll { self.streams[$0] == nil }
        self.pool.connectionDraining(self, failedBeforeReady: wasConnecting)
        self.closeIfDrained()
    }

    private enum ErrorCode: UInt32 {
        case `protocol` = 0x1, flowControl = 0x3, frameSize = 0x6, compression = 0x9, enhanceYourCalm = 0xB
    }

    private func connectionError(_ code: ErrorCode, _ message: String) {
        guard self.state != .closed else { return }
        self.logger.warning("HTTP/2 protocol error from APNs", metadata: ["error": "\(message)"])
        self.closeReason = "HTTP/2 protocol error: \(message)"
        self.writeFrame(.goAway, flags: 0, streamID: 0) { out in
            out.writeInteger(UInt32(0))
            out.writeInteger(code.rawValue)
        }
        self.flush()
        self.state = .closed
        self.context?.close(promise: nil)
    }

    // MARK: framing

    private static func unpadded(_ payload: ByteBuffer, flags: UInt8) -> ByteBuffer? {
        guard flags & 0x8 != 0 else { return payload }
        var payload = payload
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else { return nil }
        return payload.readSlice(length: payload.readableBytes - Int(padding))
    }

    private func writeFrameHeader(length: Int, type: FrameType, flags: UInt8, streamID: UInt32) {
        self.out.writeInteger(UInt32(length) << 8 | UInt32(type.rawValue))
        self.out.writeInteger(flags)
        self.out.writeInteger(streamID)
    }

    private func writeFrame(_ type: FrameType, flags: UInt8, streamID: UInt32, payload: (inout ByteBuffer) -> Void) {
        let start = self.out.writerIndex
        self.writeFrameHeader(length: 0, type: type, flags: flags, streamID: streamID)
        payload(&self.out)
        let length = self.out.writerIndex - start - 9
        self.out.setInteger(UInt32(length) << 8 | UInt32(type.rawValue), at: start)
    }
}

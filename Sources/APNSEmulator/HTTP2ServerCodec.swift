// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import NIOHTTP2

/// A lean HTTP/2 server framing layer for the emulator: bytes in, `HTTP2Frame`s up to
/// ``APNSConnectionHandler``; `HTTP2Frame`s down, bytes out.
///
/// The emulator's traffic is narrow — short requests in, answers of one HEADERS frame and at most
/// one small DATA frame out — so this layer does only what that needs, and does it cheaply: it
/// checks framing and stream rules (RFC 9113), decodes header blocks with NIOHPACK, keeps the
/// receive windows open, answers SETTINGS and PING, enforces `MAX_CONCURRENT_STREAMS` with
/// RST_STREAM(REFUSED_STREAM) as APNs does, and writes answers as literal, never-indexed,
/// unencoded header fields. Protocol errors end the connection with GOAWAY.
final class HTTP2ServerCodec: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = ByteBuffer

    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let maxFrameSize = 16_384
    static let maxHeaderListSize = 8000

    private enum FrameType: UInt8 {
        case data = 0, headers = 1, priority = 2, rstStream = 3, settings = 4, pushPromise = 5, ping = 6
        case goAway = 7, windowUpdate = 8, continuation = 9
    }

    private struct Stream {
        var remoteClosed = false
        var localClosed = false
        var outboundWindow: Int
        /// DATA waiting for the client to open its window.
        var queued: [(ByteBuffer, Bool)] = []
    }

    private struct PendingHeaders {
        var streamID: HTTP2StreamID
        var block: ByteBuffer
        var endStream: Bool
    }

    private let initialSettings: [(UInt16, Int)]
    private var buffer: ByteBuffer?
    private var sawPreface = false
    private var decoder: HPACKDecoder
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var lastClientStreamID: HTTP2StreamID = .rootStream
    private var continuing: PendingHeaders?
    /// The stream limit in force, and limits sent but not yet acknowledged (lowered ones apply on ACK).
    private var streamLimit: Int
    private var pendingLimits: [Int?] = []
    private var peerInitialWindow = 65_535
    private var peerMaxFrameSize = 16_384
    private var connectionOutboundWindow = 65_535
    private var unacknowledgedBytes = 0
    private var out: ByteBuffer
    private var failed = false
    private var sentSettings = false
    private let streamCap: Int
    /// Reads held back while the client does not read our answers (backpressure).
    private var readPending = false
    /// The smallest HEADER_TABLE_SIZE the client set since our last header block (RFC 7541 §4.2).
    private var tableSizeUpdate: Int?
    private var peerTableSize = 4096
    /// The last-stream-id of the first GOAWAY sent: later ones may not raise it.
    private var goAwayLastStreamID: HTTP2StreamID?
    /// Streams this side reset lately: frames still in flight for them are ignored.
    private var recentlyReset: [HTTP2StreamID] = []
    private var continuationFrames = 0

    /// - Parameters:
    ///   - settings: what the server announces; `MAX_CONCURRENT_STREAMS` among them.
    ///   - streamCap: the most streams ever allowed, also before the client has acknowledged
    ///     the first SETTINGS (until then it cannot know the announced limit).
    init(settings: [(UInt16, Int)], streamCap: Int, allocator: ByteBufferAllocator) {
        self.initialSettings = settings
        self.decoder = HPACKDecoder(allocator: allocator, maxDynamicTableSize: 4096, maxHeaderListSize: Self.maxHeaderListSize)
        self.streamCap = max(1, streamCap)
        self.streamLimit = max(1, streamCap)
        self.out = allocator.buffer(capacity: 4096)
    }

    func channelActive(context: ChannelHandlerContext) {
        self.sendSettingsOnce(context: context)
        context.fireChannelActive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.sendSettingsOnce(context: context) }
    }

    private func sendSettingsOnce(context: ChannelHandlerContext) {
        guard !self.sentSettings else { return }
        self.sentSettings = true
        self.writeSettings(self.initialSettings)
        self.flushOut(context: context)
    }

    // MARK: backpressure

    /// No more reading while our answers pile up unread: a client that never reads cannot make
    /// the emulator buffer without bound.
    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.read()
        } else {
            self.readPending = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, self.readPending {
            self.readPending = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.failed else { return }
        var incoming = self.unwrapInboundIn(data)
        if self.buffer == nil || self.buffer!.readableBytes == 0 {
            self.buffer = incoming
        } else {
            self.buffer!.writeBuffer(&incoming)
        }
        if !self.sawPreface {
            guard self.buffer!.readableBytes >= Self.preface.count else {
                if !Self.preface.starts(with: self.buffer!.readableBytesView) { self.connectionError(context: context, .protocolError) }
                return
            }
            guard self.buffer!.readBytes(length: Self.preface.count) == Self.preface else {
                self.connectionError(context: context, .protocolError)
                return
            }
            self.sawPreface = true
        }
        while !self.failed, var buffer = self.buffer, buffer.readableBytes >= 9 {
            let header = buffer.readerIndex
            let length = Int(buffer.getInteger(at: header, as: UInt32.self)! >> 8)
            guard length <= Self.maxFrameSize else {
                self.connectionError(context: context, .frameSizeError)
                return
            }
            guard buffer.readableBytes >= 9 + length else { break }
            let type = buffer.getInteger(at: header + 3, as: UInt8.self)!
            let flags = buffer.getInteger(at: header + 4, as: UInt8.self)!
            let streamID = HTTP2StreamID(Int32(bitPattern: buffer.getInteger(at: header + 5, as: UInt32.self)! & 0x7FFF_FFFF))
            buffer.moveReaderIndex(forwardBy: 9)
            let payload = buffer.readSlice(length: length)!
            self.buffer = buffer
            self.frame(context: context, type: type, flags: flags, streamID: streamID, payload: payload)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Keep the connection window open: give back what was received since the last update.
        if self.unacknowledgedBytes > 0 {
            self.writeFrame(.windowUpdate, flags: 0, streamID: .rootStream) { $0.writeInteger(UInt32(min(self.unacknowledgedBytes, 0x7FFF_FFFF))) }
            self.unacknowledgedBytes = 0
        }
        if var buffer = self.buffer, buffer.readerIndex > 65_536 {
            buffer.discardReadBytes()
            self.buffer = buffer
        }
        // The connection handler answers and flushes; whatever is left goes out after it.
        context.fireChannelReadComplete()
        if self.out.readableBytes > 0 { self.flushOut(context: context) }
    }

    private func frame(context: ChannelHandlerContext, type: UInt8, flags: UInt8, streamID: HTTP2StreamID, payload: ByteBuffer) {
        if var pending = self.continuing {
            guard type == FrameType.continuation.rawValue, streamID == pending.streamID else {
                self.connectionError(context: context, .protocolError)
                return
            }
            self.continuing = nil  // so the block below is uniquely owned and grows in place
            var fragment = payload
            pending.block.writeBuffer(&fragment)
            self.continuationFrames += 1
            if flags & 0x4 != 0 {
                self.headersComplete(context: context, streamID: streamID, block: pending.block, endStream: pending.endStream)
            } else {
                guard pending.block.readableBytes <= Self.maxHeaderListSize * 2, self.continuationFrames < 64 else {
                    self.connectionError(context: context, .enhanceYourCalm)
                    return
                }
                self.continuing = pending
            }
            return
        }
        switch FrameType(rawValue: type) {
        case .data:
            self.unacknowledgedBytes += payload.readableBytes
            guard streamID != .rootStream else { return self.connectionError(context: context, .protocolError) }
            guard var data = self.unpadded(payload, flags: flags) else { return self.connectionError(context: context, .protocolError) }
            let padding = flags & 0x8 != 0 ? payload.readableBytes - data.readableBytes - 1 : nil
            guard var stream = self.streams[streamID] else {
                // Idle stream: a protocol error; one this side reset: ignored; otherwise closed.
                if streamID > self.lastClientStreamID || !streamID.isClientInitiated {
                    self.connectionError(context: context, .protocolError)
                } else if !self.recentlyReset.contains(streamID) {
                    self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.streamClosed.networkCode)) }
                }
                return
            }
            guard !stream.remoteClosed else {
                self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.streamClosed.networkCode)) }
                return
            }
            let endStream = flags & 0x1 != 0
            if endStream {
                stream.remoteClosed = true
                self.streams[streamID] = stream
                self.closeIfDone(streamID)
            }
            let content = data.readSlice(length: data.readableBytes)!
            context.fireChannelRead(
                self.wrapInboundOut(
                    HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(content), endStream: endStream, paddingBytes: padding)))
                )
            )
        case .headers:
            guard streamID != .rootStream, var block = self.unpadded(payload, flags: flags) else {
                return self.connectionError(context: context, .protocolError)
            }
            if flags & 0x20 != 0 {  // PRIORITY: 5 bytes we ignore, as APNs does
                guard block.readableBytes >= 5 else { return self.connectionError(context: context, .frameSizeError) }
                block.moveReaderIndex(forwardBy: 5)
            }
            let endStream = flags & 0x1 != 0
            if flags & 0x4 == 0 {
                self.continuationFrames = 0
                self.continuing = PendingHeaders(streamID: streamID, block: block, endStream: endStream)
            } else {
                self.headersComplete(context: context, streamID: streamID, block: block, endStream: endStream)
            }
        case .priority:
            guard payload.readableBytes == 5 else { return self.connectionError(context: context, .frameSizeError) }
        case .rstStream:
            guard payload.readableBytes == 4 else { return self.connectionError(context: context, .frameSizeError) }
            guard streamID != .rootStream, streamID <= self.lastClientStreamID else { return self.connectionError(context: context, .protocolError) }
            if self.streams.removeValue(forKey: streamID) != nil {
                let code = HTTP2ErrorCode(networkCode: Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)!))
                context.fireChannelRead(self.wrapInboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(code))))
            }
        case .settings:
            self.settings(context: context, flags: flags, streamID: streamID, payload: payload)
        case .ping:
            guard payload.readableBytes == 8 else { return self.connectionError(context: context, .frameSizeError) }
            guard streamID == .rootStream else { return self.connectionError(context: context, .protocolError) }
            if flags & 0x1 == 0 {
                var echo = payload
                self.writeFrame(.ping, flags: 0x1, streamID: .rootStream) { $0.writeBuffer(&echo) }
            }
        case .goAway:
            // The client is leaving; what it sent is still answered.
            guard streamID == .rootStream, payload.readableBytes >= 8 else { return self.connectionError(context: context, .protocolError) }
        case .windowUpdate:
            guard payload.readableBytes == 4 else { return self.connectionError(context: context, .frameSizeError) }
            let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7FFF_FFFF)
            guard increment > 0 else { return self.connectionError(context: context, .protocolError) }
            if streamID == .rootStream {
                guard self.connectionOutboundWindow + increment <= 0x7FFF_FFFF else {
                    return self.connectionError(context: context, .flowControlError)
                }
                self.connectionOutboundWindow += increment
                for id in self.streams.keys where !(self.streams[id]?.queued.isEmpty ?? true) { self.drainQueue(id) }
            } else if var stream = self.streams[streamID] {
                guard stream.outboundWindow + increment <= 0x7FFF_FFFF else {
                    return self.connectionError(context: context, .flowControlError)
                }
                stream.outboundWindow += increment
                self.streams[streamID] = stream
                self.drainQueue(streamID)
            }
        case .pushPromise, .continuation:
            self.connectionError(context: context, .protocolError)
        case nil:
            break  // Unknown frame types are ignored.
        }
    }

    private func headersComplete(context: ChannelHandlerContext, streamID: HTTP2StreamID, block: ByteBuffer, endStream: Bool) {
        var block = block
        let headers: HPACKHeaders
        do {
            headers = try self.decoder.decodeHeaders(from: &block)
        } catch {
            return self.connectionError(context: context, .compressionError)
        }
        if self.recentlyReset.contains(streamID) { return }  // decoded (HPACK stays in step), then ignored
        if var stream = self.streams[streamID] {
            // Trailers: only to end a stream that is still open.
            guard !stream.remoteClosed, endStream else { return self.connectionError(context: context, .protocolError) }
            stream.remoteClosed = true
            self.streams[streamID] = stream
            self.closeIfDone(streamID)
            context.fireChannelRead(self.wrapInboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))))
            return
        }
        guard streamID.isClientInitiated, streamID > self.lastClientStreamID else {
            return self.connectionError(context: context, .protocolError)
        }
        self.lastClientStreamID = streamID
        guard self.streams.count < self.streamLimit else {
            self.noteReset(streamID)
            self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.refusedStream.networkCode)) }
            context.fireUserInboundEventTriggered(RefusedStreamEvent(streamID: streamID))
            return
        }
        self.streams[streamID] = Stream(remoteClosed: endStream, outboundWindow: self.peerInitialWindow)
        context.fireChannelRead(self.wrapInboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: endStream)))))
    }

    private func settings(context: ChannelHandlerContext, flags: UInt8, streamID: HTTP2StreamID, payload: ByteBuffer) {
        guard streamID == .rootStream else { return self.connectionError(context: context, .protocolError) }
        if flags & 0x1 != 0 {
            guard payload.readableBytes == 0 else { return self.connectionError(context: context, .frameSizeError) }
            if !self.pendingLimits.isEmpty, let limit = self.pendingLimits.removeFirst() { self.streamLimit = limit }
            return
        }
        guard payload.readableBytes % 6 == 0 else { return self.connectionError(context: context, .frameSizeError) }
        var payload = payload
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch identifier {
            case 4:  // INITIAL_WINDOW_SIZE: adjusts every open stream's window
                guard value <= 0x7FFF_FFFF else { return self.connectionError(context: context, .flowControlError) }
                let delta = Int(value) - self.peerInitialWindow
                self.peerInitialWindow = Int(value)
                for id in Array(self.streams.keys) {
                    self.streams[id]!.outboundWindow += delta
                    guard self.streams[id]!.outboundWindow <= 0x7FFF_FFFF else {
                        return self.connectionError(context: context, .flowControlError)
                    }
                    self.drainQueue(id)
                }
            case 5:  // MAX_FRAME_SIZE
                guard (16_384...16_777_215).contains(value) else { return self.connectionError(context: context, .protocolError) }
                self.peerMaxFrameSize = Int(value)
            case 2:  // ENABLE_PUSH: a client may only send 0 or 1
                guard value <= 1 else { return self.connectionError(context: context, .protocolError) }
            case 1:  // HEADER_TABLE_SIZE: our encoder never indexes, but a change must be signalled
                if Int(value) != self.peerTableSize {
                    self.peerTableSize = Int(value)
                    self.tableSizeUpdate = min(self.tableSizeUpdate ?? Int(value), Int(value))
                }
            default:
                break
            }
        }
        self.writeFrame(.settings, flags: 0x1, streamID: .rootStream) { _ in }
    }

    private func unpadded(_ payload: ByteBuffer, flags: UInt8) -> ByteBuffer? {
        guard flags & 0x8 != 0 else { return payload }
        var payload = payload
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else { return nil }
        return payload.readSlice(length: payload.readableBytes - Int(padding))
    }

    private func closeIfDone(_ streamID: HTTP2StreamID) {
        if let stream = self.streams[streamID], stream.remoteClosed, stream.localClosed, stream.queued.isEmpty {
            self.streams[streamID] = nil
        }
    }

    private func connectionError(context: ChannelHandlerContext, _ code: HTTP2ErrorCode) {
        guard !self.failed else { return }
        self.failed = true
        let last = min(self.goAwayLastStreamID ?? self.lastClientStreamID, self.lastClientStreamID)
        self.writeFrame(.goAway, flags: 0, streamID: .rootStream) {
            $0.writeInteger(UInt32(Int32(last)))
            $0.writeInteger(UInt32(clamping: code.networkCode))
        }
        self.flushOut(context: context)
        context.close(promise: nil)
    }

    // MARK: outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = self.unwrapOutboundIn(data)
        guard !self.failed else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch frame.payload {
        case .headers(let headers):
            guard self.streams[frame.streamID] != nil else { break }  // reset meanwhile
            self.writeHeaders(headers.headers, streamID: frame.streamID, endStream: headers.endStream)
            if headers.endStream { self.localEnd(frame.streamID) }
        case .data(let data):
            guard var stream = self.streams[frame.streamID] else { break }
            guard case .byteBuffer(let bytes) = data.data else {
                // File regions never come from the emulator; refuse rather than leave the stream open.
                self.writeFrame(.rstStream, flags: 0, streamID: frame.streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.internalError.networkCode)) }
                self.streams[frame.streamID] = nil
                promise?.fail(ChannelError.operationUnsupported)
                return
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
        promise?.succeed(())
    }

    func flush(context: ChannelHandlerContext) {
        self.flushOut(context: context)
    }

    private func noteReset(_ streamID: HTTP2StreamID) {
        self.recentlyReset.append(streamID)
        if self.recentlyReset.count > 128 { self.recentlyReset.removeFirst(self.recentlyReset.count - 128) }
    }

    private func localEnd(_ streamID: HTTP2StreamID) {
        guard var stream = self.streams[streamID] else { return }
        stream.localClosed = true
        self.streams[streamID] = stream
        self.closeIfDone(streamID)
    }

    /// Sends queued DATA as far as the windows allow, in frames no larger than the client accepts.
    private func drainQueue(_ streamID: HTTP2StreamID) {
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
    private func writeHeaders(_ headers: HPACKHeaders, streamID: HTTP2StreamID, endStream: Bool) {
        let tableSizeUpdate = self.tableSizeUpdate
        self.tableSizeUpdate = nil
        self.writeFrame(.headers, flags: 0x4 | (endStream ? 0x1 : 0), streamID: streamID) { out in
            if let size = tableSizeUpdate { Self.writeHPACKInteger(size, prefixBits: 5, flags: 0x20, into: &out) }
            for (name, value, _) in headers {
                if name == ":status", value == "200" {
                    out.writeInteger(UInt8(0x88))  // static table entry 8
                    continue
                }
                if let index = Self.staticNames[name] {
                    Self.writeHPACKInteger(index, prefixBits: 4, flags: 0x00, into: &out)
                } else {
                    out.writeInteger(UInt8(0x00))
                    Self.writeHPACKString(name, into: &out)
                }
                Self.writeHPACKString(value, into: &out)
            }
        }
    }

    private static let staticNames: [String: Int] = [":status": 8, "content-type": 31, "content-length": 28]

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
    private func writeSettings(_ settings: [(UInt16, Int)]) {
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

    private func writeFrame(_ type: FrameType, flags: UInt8, streamID: HTTP2StreamID, payload: (inout ByteBuffer) -> Void) {
        let start = self.out.writerIndex
        self.out.writeInteger(UInt32(0))  // length (3 bytes) + type, patched below
        self.out.writeInteger(flags)
        self.out.writeInteger(UInt32(Int32(streamID)))
        payload(&self.out)
        let length = self.out.writerIndex - start - 9
        self.out.setInteger(UInt32(length) << 8 | UInt32(type.rawValue), at: start)
    }

    private func flushOut(context: ChannelHandlerContext) {
        guard self.out.readableBytes > 0 else {
            context.flush()
            return
        }
        let bytes = self.out
        self.out = context.channel.allocator.buffer(capacity: 4096)
        context.writeAndFlush(self.wrapOutboundOut(bytes), promise: nil)
    }
}

/// A stream the codec refused with REFUSED_STREAM because the client exceeded the stream limit.
struct RefusedStreamEvent: Sendable {
    var streamID: HTTP2StreamID
}

// SPDX-License-Identifier: Apache-2.0
import APNSTransport
import NIOCore
import NIOHPACK
import NIOHTTP2

extension HTTP2ServerCodec.StateMachine {
    /// Frame received from the client: applies it and says what the handler does next.
    /// Replies the protocol requires (SETTINGS ACK, PING ACK, RST_STREAM, GOAWAY) go into the
    /// outgoing buffer.
    mutating func frameReceived(_ frame: HTTP2ServerFrameReader.Frame) -> InboundAction {
        guard !self.failed else { return .none }
        let (type, flags, streamID, payload) = (frame.type, frame.flags, frame.streamID, frame.payload)
        if var pending = self.continuing {
            guard type == FrameType.continuation.rawValue, streamID == pending.streamID else {
                return self.connectionError(.protocolError)
            }
            self.continuing = nil  // so the block below is uniquely owned and grows in place
            var fragment = payload
            pending.block.writeBuffer(&fragment)
            self.continuationFrames += 1
            if flags & 0x4 != 0 {
                return self.headersComplete(streamID: streamID, block: pending.block, endStream: pending.endStream)
            }
            guard pending.block.readableBytes <= Self.maxHeaderListSize * 2, self.continuationFrames < 64 else {
                return self.connectionError(.enhanceYourCalm)
            }
            self.continuing = pending
            return .none
        }
        switch FrameType(rawValue: type) {
        case .data:
            self.unacknowledgedBytes += payload.readableBytes
            guard streamID != .rootStream else { return self.connectionError(.protocolError) }
            guard var data = Self.unpadded(payload, flags: flags) else { return self.connectionError(.protocolError) }
            let padding = flags & 0x8 != 0 ? payload.readableBytes - data.readableBytes - 1 : nil
            guard let index = self.streams.index(forKey: streamID) else {
                // Idle stream: a protocol error; one this side reset: ignored; otherwise closed.
                if streamID > self.lastClientStreamID || !streamID.isClientInitiated {
                    return self.connectionError(.protocolError)
                } else if !self.recentlyReset.contains(streamID) {
                    self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.streamClosed.networkCode)) }
                }
                return .none
            }
            guard !self.streams.values[index].remoteClosed else {
                self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.streamClosed.networkCode)) }
                return .none
            }
            let endStream = flags & 0x1 != 0
            if endStream {
                // In place, by its place in the table: one lookup for the frame.
                self.streams.values[index].remoteClosed = true
                self.closeIfDone(at: index)
            }
            let content = data.readSlice(length: data.readableBytes)!
            return .forward(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(content), endStream: endStream, paddingBytes: padding))))
        case .headers:
            guard streamID != .rootStream, var block = Self.unpadded(payload, flags: flags) else {
                return self.connectionError(.protocolError)
            }
            if flags & 0x20 != 0 {  // PRIORITY: 5 bytes we ignore, as APNs does
                guard block.readableBytes >= 5 else { return self.connectionError(.frameSizeError) }
                block.moveReaderIndex(forwardBy: 5)
            }
            let endStream = flags & 0x1 != 0
            if flags & 0x4 == 0 {
                self.continuationFrames = 0
                self.continuing = PendingHeaders(streamID: streamID, block: block, endStream: endStream)
                return .none
            }
            return self.headersComplete(streamID: streamID, block: block, endStream: endStream)
        case .priority:
            guard payload.readableBytes == 5 else { return self.connectionError(.frameSizeError) }
            return .none
        case .rstStream:
            guard payload.readableBytes == 4 else { return self.connectionError(.frameSizeError) }
            guard streamID != .rootStream, streamID <= self.lastClientStreamID else { return self.connectionError(.protocolError) }
            guard self.streams.removeValue(forKey: streamID) != nil else { return .none }
            let code = HTTP2ErrorCode(networkCode: Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)!))
            return .forward(HTTP2Frame(streamID: streamID, payload: .rstStream(code)))
        case .settings:
            return self.settings(flags: flags, streamID: streamID, payload: payload)
        case .ping:
            guard payload.readableBytes == 8 else { return self.connectionError(.frameSizeError) }
            guard streamID == .rootStream else { return self.connectionError(.protocolError) }
            guard flags & 0x1 == 0 else { return .none }  // an ACK: nothing to answer
            var echo = payload
            self.writeFrame(.ping, flags: 0x1, streamID: .rootStream) { $0.writeBuffer(&echo) }
            return .ping
        case .goAway:
            // The client is leaving; what it sent is still answered.
            guard streamID == .rootStream, payload.readableBytes >= 8 else { return self.connectionError(.protocolError) }
            return .none
        case .windowUpdate:
            guard payload.readableBytes == 4 else { return self.connectionError(.frameSizeError) }
            let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7FFF_FFFF)
            guard increment > 0 else { return self.connectionError(.protocolError) }
            if streamID == .rootStream {
                guard self.connectionOutboundWindow + increment <= 0x7FFF_FFFF else { return self.connectionError(.flowControlError) }
                self.connectionOutboundWindow += increment
                for id in self.streams.keys where !(self.streams[id]?.queued.isEmpty ?? true) { self.drainQueue(id) }
            } else if var stream = self.streams[streamID] {
                guard stream.outboundWindow + increment <= 0x7FFF_FFFF else { return self.connectionError(.flowControlError) }
                stream.outboundWindow += increment
                self.streams[streamID] = stream
                self.drainQueue(streamID)
            }
            return .none
        case .pushPromise, .continuation:
            return self.connectionError(.protocolError)
        case nil:
            return .none  // Unknown frame types are ignored.
        }
    }

    private mutating func headersComplete(streamID: HTTP2StreamID, block: ByteBuffer, endStream: Bool) -> InboundAction {
        var fields: [(String, String)] = []
        fields.reserveCapacity(12)
        do {
            try self.decoder.decode(block) { name, value, _ in fields.append((name, value)) }
        } catch {
            return self.connectionError(.compressionError)
        }
        // Not `HPACKHeaders.add`: it traps on a name that is not ASCII, and names come from the client.
        let headers = HPACKHeaders(fields)
        if self.recentlyReset.contains(streamID) { return .none }  // decoded (HPACK stays in step), then ignored
        if var stream = self.streams[streamID] {
            // Trailers: only to end a stream that is still open.
            guard !stream.remoteClosed, endStream else { return self.connectionError(.protocolError) }
            stream.remoteClosed = true
            self.streams[streamID] = stream
            self.closeIfDone(streamID)
            return .forward(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true))))
        }
        guard streamID.isClientInitiated, streamID > self.lastClientStreamID else {
            return self.connectionError(.protocolError)
        }
        self.lastClientStreamID = streamID
        guard self.streams.count < self.streamLimit else {
            self.noteReset(streamID)
            self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(HTTP2ErrorCode.refusedStream.networkCode)) }
            return .refused(streamID)
        }
        self.streams[streamID] = Stream(remoteClosed: endStream, outboundWindow: self.peerInitialWindow)
        return .forward(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: endStream))))
    }

    private mutating func settings(flags: UInt8, streamID: HTTP2StreamID, payload: ByteBuffer) -> InboundAction {
        guard streamID == .rootStream else { return self.connectionError(.protocolError) }
        if flags & 0x1 != 0 {
            guard payload.readableBytes == 0 else { return self.connectionError(.frameSizeError) }
            if !self.pendingLimits.isEmpty, let limit = self.pendingLimits.removeFirst() { self.streamLimit = limit }
            return .none
        }
        guard payload.readableBytes % 6 == 0 else { return self.connectionError(.frameSizeError) }
        var payload = payload
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch identifier {
            case 4:  // INITIAL_WINDOW_SIZE: adjusts every open stream's window
                guard value <= 0x7FFF_FFFF else { return self.connectionError(.flowControlError) }
                let delta = Int(value) - self.peerInitialWindow
                self.peerInitialWindow = Int(value)
                for id in Array(self.streams.keys) {
                    self.streams[id]!.outboundWindow += delta
                    guard self.streams[id]!.outboundWindow <= 0x7FFF_FFFF else { return self.connectionError(.flowControlError) }
                    self.drainQueue(id)
                }
            case 5:  // MAX_FRAME_SIZE
                guard (16_384...16_777_215).contains(value) else { return self.connectionError(.protocolError) }
                self.peerMaxFrameSize = Int(value)
            case 2:  // ENABLE_PUSH: a client may only send 0 or 1
                guard value <= 1 else { return self.connectionError(.protocolError) }
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
        return .none
    }
}

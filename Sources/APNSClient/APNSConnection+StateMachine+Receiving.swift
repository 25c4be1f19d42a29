// SPDX-License-Identifier: Apache-2.0
import APNSModels
import APNSTransport
import NIOCore

extension APNSConnection.StateMachine {
    /// Frame received: applies it and says what the handler does next. Replies the protocol
    /// requires (SETTINGS ACK, PING ACK, RST_STREAM, GOAWAY) go into the outgoing buffer.
    mutating func frameReceived(_ frame: HTTP2FrameReader.Frame) -> FrameAction {
        guard self.state != .closed else { return .none }
        let (type, flags, streamID, payload) = (frame.type, frame.flags, frame.streamID, frame.payload)
        if var pending = self.continuing {
            guard type == HTTP2FrameType.continuation.rawValue, streamID == pending.streamID else {
                return self.connectionError(.protocol, "expected CONTINUATION")
            }
            self.continuing = nil
            var fragment = payload
            pending.block.writeBuffer(&fragment)
            if flags & 0x4 != 0 {
                return self.headersComplete(streamID: streamID, block: pending.block, endStream: pending.endStream)
            }
            guard pending.block.readableBytes <= 65_536 else { return self.connectionError(.enhanceYourCalm, "header block too large") }
            self.continuing = pending
            return .none
        }
        switch HTTP2FrameType(rawValue: type) {
        case .data:
            self.unacknowledgedBytes += payload.readableBytes
            guard streamID != 0, var data = Self.unpadded(payload, flags: flags) else {
                return self.connectionError(.protocol, "bad DATA frame")
            }
            guard var stream = self.streams.removeValue(forKey: streamID) else { return .none }  // reset by us (deadline)
            if stream.body == nil {
                stream.body = data
            } else {
                stream.body!.writeBuffer(&data)
            }
            // A device push's answer is a short reason; a channel list may be large (10,000 ids).
            let extra = stream.pending.fixed.extra != nil
            guard stream.body!.readableBytes <= (extra ? Self.maximumExtraAnswerBytes : 65_536) else {
                self.blocked.removeAll { $0 == streamID }
                self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(0x8)) }
                return .failed(stream.pending, APNSClientError(code: .connectionFailed, message: "APNs sent an oversized answer"))
            }
            if flags & 0x1 != 0 { return self.finish(stream, streamID: streamID) }
            if extra, payload.readableBytes > 0 {
                // Over 64 KiB only these answers need the stream's window opened again.
                let increment = UInt32(payload.readableBytes)
                self.writeFrame(.windowUpdate, flags: 0, streamID: streamID) { $0.writeInteger(increment) }
            }
            self.streams[streamID] = stream
            return .none
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
                return .none
            }
            return self.headersComplete(streamID: streamID, block: block, endStream: flags & 0x1 != 0)
        case .rstStream:
            guard payload.readableBytes == 4, streamID != 0 else { return self.connectionError(.frameSize, "bad RST_STREAM") }
            let code = payload.getInteger(at: payload.readerIndex, as: UInt32.self)!
            guard let stream = self.streams.removeValue(forKey: streamID) else { return .none }
            self.blocked.removeAll { $0 == streamID }
            if code == 0x7 {  // REFUSED_STREAM: not processed, safe to send again
                return .refused(stream.pending)
            }
            return .failed(
                stream.pending,
                APNSClientError(
                    code: .connectionFailed, message: "APNs reset the stream (HTTP/2 error \(code)); it may have been processed",
                    outcomeUnknown: true)
            )
        case .settings:
            return self.settings(flags: flags, streamID: streamID, payload: payload)
        case .ping:
            guard payload.readableBytes == 8, streamID == 0 else { return self.connectionError(.frameSize, "bad PING") }
            if flags & 0x1 == 0 {
                var echo = payload
                self.writeFrame(.ping, flags: 0x1, streamID: 0) { $0.writeBuffer(&echo) }
            } else {
                self.pingSentAt = nil
            }
            return .none
        case .goAway:
            guard streamID == 0, payload.readableBytes >= 8 else { return self.connectionError(.frameSize, "bad GOAWAY") }
            var payload = payload
            let lastStreamID = payload.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
            let code = payload.readInteger(as: UInt32.self)!
            let debug = payload.readBytes(length: payload.readableBytes) ?? []
            return self.goAway(lastStreamID: lastStreamID, code: code, debug: debug)
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
            return .none
        case .pushPromise, .continuation:
            return self.connectionError(.protocol, "unexpected frame type \(type)")
        case .priority, nil:
            return .none
        }
    }

    @inline(__always)
    private mutating func headersComplete(streamID: UInt32, block: ByteBuffer, endStream: Bool) -> FrameAction {
        var status: Int?
        var apnsID: String?
        var uniqueID: String?
        var channelID: String?
        do {
            try self.decoder.decode(block) { name, value, _ in
                // By length first: each name is compared with one candidate at most.
                switch name.utf8.count {
                case 7: if name == ":status" { status = Int(value) ?? 0 } else if name == "apns-id" { apnsID = value }
                case 14: if name == "apns-unique-id" { uniqueID = value }
                case 15:
                    if name == "apns-request-id" {
                        apnsID = value  // broadcast and channel management
                    } else if name == "apns-channel-id" {
                        channelID = value
                    }
                default: break
                }
            }
        } catch {
            return self.connectionError(.compression, "undecodable header block")
        }
        // Taken out of the table (not copied): most answers end here, with END_STREAM.
        guard var stream = self.streams.removeValue(forKey: streamID) else { return .none }  // reset by us; decoded to keep HPACK in step
        if let status { stream.status = status }
        if let apnsID { stream.apnsID = apnsID }
        if let uniqueID { stream.uniqueID = uniqueID }
        if let channelID { stream.pending.fixed.extra?.received(channelID: channelID) }
        if (100..<200).contains(stream.status), !endStream {
            stream.status = 0
            self.streams[streamID] = stream
            return .none
        }
        if endStream { return self.finish(stream, streamID: streamID) }
        self.streams[streamID] = stream
        return .none
    }

    /// Completes a stream whose answer is in. If part of its DATA is still held back by flow
    /// control, the stream is reset so the server does not wait for the rest.
    @inline(__always)
    mutating func finish(_ stream: consuming Stream, streamID: UInt32? = nil) -> FrameAction {
        if let streamID, stream.unsent != nil {
            self.writeFrame(.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(0x8)) }
            self.blocked.removeAll { $0 == streamID }
        }
        let pending = stream.pending
        if stream.status == 200 || (pending.fixed.extra != nil && (201...204).contains(stream.status)) {
            pending.fixed.extra?.answered(status: stream.status, body: stream.body)
            self.ramped = true
            return .succeeded(pending, APNSDelivery(apnsID: stream.apnsID, uniqueID: stream.uniqueID))
        }
        let response = stream.body.flatMap { body in APNSErrorResponse(body: body.readableBytesView) }
        if stream.status != 403 { self.ramped = true }
        if response?.reason == .expiredProviderToken, stream.status == 403 {
            return .tokenExpired(pending, stream.token)
        }
        let status = stream.status
        return .failed(
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

    private mutating func settings(flags: UInt8, streamID: UInt32, payload: ByteBuffer) -> FrameAction {
        guard streamID == 0 else { return self.connectionError(.protocol, "SETTINGS on a stream") }
        if flags & 0x1 != 0 { return .none }  // ACK of ours
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
        self.resumeBlocked()
        guard self.state == .connecting else { return .none }
        // Until told otherwise, HTTP/2 allows unlimited streams; stay careful with APNs's ramp.
        if !sawMaxStreams { self.peerMaxStreams = 100 }
        self.state = .ready
        self.becameReady = true
        return .ready(maxStreams: self.peerMaxStreams)
    }

    private mutating func goAway(lastStreamID: UInt32, code: UInt32, debug: [UInt8]) -> FrameAction {
        let reason = APNSErrorResponse(body: debug)?.reason.rawValue ?? String(decoding: debug.prefix(200), as: UTF8.self)
        self.closeReason = "GOAWAY (HTTP/2 error \(code))" + (reason.isEmpty ? "" : ": \(reason)")
        let wasConnecting = self.state == .connecting
        self.state = .draining
        self.goAwayLastStreamID = min(lastStreamID, self.goAwayLastStreamID ?? lastStreamID)
        // Streams above last-stream-id were never processed: they go to another connection.
        let unprocessed = self.streams.filter { $0.key > lastStreamID }.sorted { $0.key < $1.key }
        for (streamID, _) in unprocessed { self.streams[streamID] = nil }
        self.blocked.removeAll { self.streams[$0] == nil }
        return .goAway(GoAway(unprocessed: unprocessed.map(\.value.pending), failedBeforeReady: wasConnecting, code: code, reason: reason))
    }
}

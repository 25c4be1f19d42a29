// SPDX-License-Identifier: Apache-2.0
import APNSModels
import APNSTransport
import NIOCore

extension APNSConnection.StateMachine {
    /// Request submitted: writes it as HEADERS + DATA into the outgoing buffer (one batch goes
    /// out in one write). The pool submits only while `capacity > 0`.
    /// - Parameters:
    ///   - usesToken: token authentication; `sharedToken` is the pool's current token.
    mutating func submit(_ pending: Pending, authority: String, usesToken: Bool, sharedToken: ProviderToken?) -> SubmitAction {
        guard self.state == .ready, self.nextStreamID < Self.lastUsableStreamID else {
            let close = self.state == .ready && self.drain(reason: "stream ids used up")
            return .notSent(close: close)
        }
        var pending = pending
        var token: ProviderToken?
        if usesToken {
            token = self.currentToken(shared: sharedToken)
            if token == nil {
                // This connection may not switch to the shared token yet: a fresh one will carry it.
                return .notSent(close: self.isDrained)
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
        if let extra = pending.fixed.extra {
            return self.submitExtra(extra, pending: pending, streamID: streamID, start: start, authority: authority, token: token)
        }
        self.out.writeInteger(UInt8(0x4))  // END_HEADERS
        self.out.writeInteger(streamID)
        self.encoder.encodeDevicePush(
            authority: authority,
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
            self.out.setInteger(UInt32(blockLength) << 8 | UInt32(HTTP2FrameType.headers.rawValue), at: start)
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
            self.writeBody(request.payload, stream: &stream, streamID: streamID)
        }
        self.streams[streamID] = stream
        return .sent
    }

    /// Writes as much of `payload` as the windows allow in DATA frames; the rest waits on the
    /// stream (blocked) for a WINDOW_UPDATE.
    private mutating func writeBody(_ payload: [UInt8], stream: inout Stream, streamID: UInt32) {
        var unsent = ByteBuffer(bytes: payload)
        self.writeData(&unsent, stream: &stream, streamID: streamID)
        if unsent.readableBytes > 0 {
            stream.unsent = unsent
            self.blocked.append(streamID)
        }
    }

    /// A broadcast or channel-management request: its own method, path and headers; without a
    /// body, END_STREAM on HEADERS. (Its header block is a few hundred bytes, under any frame size.)
    private mutating func submitExtra(
        _ extra: ExtraRequest, pending: Pending, streamID: UInt32, start: Int, authority: String, token: ProviderToken?
    ) -> SubmitAction {
        let payload = pending.request.payload
        self.out.writeInteger(UInt8(payload.isEmpty ? 0x5 : 0x4))  // END_HEADERS (+ END_STREAM without a body)
        self.out.writeInteger(streamID)
        var list: [(name: String, value: String, indexing: APNSHeaderEncoder.Indexing)] = [
            (":method", extra.method, .indexed), (":scheme", "https", .indexed), (":path", extra.path, .neverIndexed),
            (":authority", authority, .indexed),
        ]
        if let authorization = token?.authorization { list.append(("authorization", authorization, .indexed)) }
        list.append(contentsOf: extra.headers)
        self.encoder.encode(list, into: &self.out)
        self.out.setInteger(UInt32(self.out.writerIndex - start - 9) << 8 | UInt32(HTTP2FrameType.headers.rawValue), at: start)
        var stream = Stream(pending: pending, token: token, window: self.peerInitialWindow)
        if !payload.isEmpty { self.writeBody(payload, stream: &stream, streamID: streamID) }
        self.streams[streamID] = stream
        return .sent
    }

    /// The provider token for the next request, or nil when this connection may not take the
    /// shared one yet (APNs refuses a token change within 20 minutes of the last on a connection).
    private mutating func currentToken(shared: ProviderToken?) -> ProviderToken? {
        guard let shared else { return nil }
        guard let own = self.token else {
            self.token = shared
            return shared
        }
        if own.generation == shared.generation { return own }
        if shared.issuedAt - own.issuedAt >= ProviderTokenSource.minimumChangeIntervalSeconds {
            self.token = shared
            return shared
        }
        _ = self.drain(reason: "the provider token changed too soon for this connection")
        return nil
    }

    /// A header block over the peer's frame size: HEADERS plus CONTINUATION frames.
    private mutating func splitHeaderBlock(start: Int, streamID: UInt32) {
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
    mutating func writeData(_ data: inout ByteBuffer, stream: inout Stream, streamID: UInt32) {
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

    /// Window opened: sends DATA held back by flow control, oldest stream first.
    mutating func resumeBlocked() {
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
}

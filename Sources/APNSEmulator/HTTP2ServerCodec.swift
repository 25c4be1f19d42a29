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
///
/// The protocol lives in ``HTTP2ServerFrameReader`` and ``StateMachine``, on plain values; this
/// handler feeds them and performs what they decide, and adds backpressure.
final class HTTP2ServerCodec: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = ByteBuffer

    static let maxFrameSize = HTTP2ServerFrameReader.maxFrameSize
    static let maxHeaderListSize = StateMachine.maxHeaderListSize

    private var reader = HTTP2ServerFrameReader()
    private var stateMachine: StateMachine
    /// Reads held back while the client does not read our answers (backpressure).
    private var readPending = false

    /// - Parameters:
    ///   - settings: what the server announces; `MAX_CONCURRENT_STREAMS` among them.
    ///   - streamCap: the most streams ever allowed, also before the client has acknowledged
    ///     the first SETTINGS (until then it cannot know the announced limit).
    init(settings: [(UInt16, Int)], streamCap: Int, allocator: ByteBufferAllocator) {
        self.stateMachine = StateMachine(settings: settings, streamCap: streamCap, allocator: allocator)
    }

    func channelActive(context: ChannelHandlerContext) {
        if self.stateMachine.connectionActive() { self.flushOut(context: context) }
        context.fireChannelActive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive, self.stateMachine.connectionActive() { self.flushOut(context: context) }
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
        guard !self.stateMachine.failed else { return }
        var incoming = self.unwrapInboundIn(data)
        self.reader.append(&incoming)
        while !self.stateMachine.failed {
            let action: StateMachine.InboundAction
            do {
                guard let frame = try self.reader.next() else { break }
                action = self.stateMachine.frameReceived(frame)
            } catch {
                action = self.stateMachine.readFailed(error)
            }
            switch action {
            case .none:
                break
            case .forward(let frame):
                context.fireChannelRead(self.wrapInboundOut(frame))
            case .refused(let streamID):
                context.fireUserInboundEventTriggered(RefusedStreamEvent(streamID: streamID))
            case .ping:
                context.fireUserInboundEventTriggered(PingReceivedEvent())
            case .connectionError:
                self.flushOut(context: context)
                context.close(promise: nil)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.stateMachine.readComplete()
        self.reader.compact()
        // The connection handler answers and flushes; whatever is left goes out after it.
        context.fireChannelReadComplete()
        self.flushOut(context: context, onlyIfPending: true)
    }

    // MARK: outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.stateMachine.write(self.unwrapOutboundIn(data)) {
        case .written: promise?.succeed(())
        case .failed(let error): promise?.fail(error)
        }
    }

    func flush(context: ChannelHandlerContext) {
        self.flushOut(context: context)
    }

    private func flushOut(context: ChannelHandlerContext, onlyIfPending: Bool = false) {
        guard let bytes = self.stateMachine.takeOutbound() else {
            if !onlyIfPending { context.flush() }
            return
        }
        context.writeAndFlush(self.wrapOutboundOut(bytes), promise: nil)
    }
}

/// A stream the codec refused with REFUSED_STREAM because the client exceeded the stream limit.
struct RefusedStreamEvent: Sendable {
    var streamID: HTTP2StreamID
}

/// A PING the codec received from the client (and answered).
struct PingReceivedEvent: Sendable {}

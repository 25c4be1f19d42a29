// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request head does not arrive within `timeout` of its first byte,
/// after a `408 Request Timeout`: a client cannot hold a connection open by sending its head
/// slowly (the idle timeout does not see partial heads as idle once bytes keep coming).
///
/// Sits first in the pipeline, where it sees the raw bytes; ``RequestHeadObserver``, after the
/// HTTP decoder, tells it when a head was decoded and when a response ended. Both run on the
/// channel's event loop. The decisions are ``RequestHeadDeadline``'s.
final class RequestHeadTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    static let timeoutResponse = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"

    private var deadline: RequestHeadDeadline
    private var timer: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(timeout: TimeAmount) {
        self.deadline = RequestHeadDeadline(timeout: timeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.perform(self.deadline.bytesRead(now: .now()))
        context.fireChannelRead(data)
    }

    /// From ``RequestHeadObserver``.
    func headRead() { self.deadline.headRead() }

    /// From ``RequestHeadObserver``.
    func responseEnded() { self.deadline.responseEnded() }

    private func perform(_ action: RequestHeadDeadline.Action) {
        guard let context = self.context else { return }
        switch action {
        case .none:
            break
        case .setTimer(let deadline):
            self.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
                self.timer = nil
                self.perform(self.deadline.timerFired(now: .now()))
            }
        case .close:
            // Written from the head of the pipeline: straight to the socket, past the encoder.
            let response = context.channel.allocator.buffer(string: Self.timeoutResponse)
            context.writeAndFlush(NIOAny(response)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }
}

/// After the HTTP decoder: tells ``RequestHeadTimeoutHandler`` when a request head was decoded
/// and when a response ended. Passes everything through unchanged.
final class RequestHeadObserver: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: RequestHeadTimeoutHandler

    init(_ timeout: RequestHeadTimeoutHandler) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = self.unwrapInboundIn(data) { self.timeout.headRead() }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = self.unwrapOutboundIn(data) { self.timeout.responseEnded() }
        context.write(data, promise: promise)
    }
}

@available(*, unavailable)
extension RequestHeadTimeoutHandler: Sendable {}

@available(*, unavailable)
extension RequestHeadObserver: Sendable {}

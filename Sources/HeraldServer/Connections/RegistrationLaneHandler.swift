// SPDX-License-Identifier: Apache-2.0
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// One API connection's way to the ``RegistrationLane``: in the pipeline between Hummingbird's
/// connection state handler (which so still sees every request and answer, for its idle timeout
/// and graceful close) and the router's channel. The registrations the lane takes are read here
/// and answered here; every other part passes through. The order of answers is the
/// ``StateMachine``'s.
final class RegistrationLaneHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// What arrived while the lane was answering, in order.
    private enum Held {
        case part(HTTPRequestPart)
        case error(any Error)
        /// Such as the end of the client's input (a half-close), which ends the router's reading.
        case event(Any)
    }

    private let lane: RegistrationLane
    private var state: StateMachine
    private var held = CircularBuffer<Held>()
    /// A read asked for while the lane answers: done once it has.
    private var readPending = false
    /// The channel has closed and its pipeline gone: a late answer has nowhere to go.
    private var isRemoved = false

    /// The handler of the connection `channel`.
    init(lane: RegistrationLane, channel: any Channel) {
        self.lane = lane
        self.state = StateMachine(peer: channel.remoteAddress?.ipAddress)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.isRemoved = true
        self.held.removeAll()
    }

    /// Whether what arrives now is held: the lane is answering, or something arrived before it
    /// that still waits.
    private var holds: Bool { self.state.isAnswering || !self.held.isEmpty }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = self.unwrapInboundIn(data)
        if self.holds {
            self.held.append(.part(part))
        } else {
            self.handle(part, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.holds {
            self.held.append(.error(error))
        } else {
            context.fireErrorCaught(error)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if self.holds {
            self.held.append(.event(event))
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Reads wait while something read waits for the lane's answer, and while the connection
    /// cannot take more writes: a client that sends requests without reading the answers is not
    /// read from until it does, as the router's own writer would make it wait. While the lane
    /// answers with nothing behind it, the connection reads on (a client waiting for its answer
    /// sends nothing, and the socket's interest in reading is not taken away and given back for
    /// each registration); what one read brings while the lane answers is held, and the reads
    /// wait from then on.
    func read(context: ChannelHandlerContext) {
        if !self.held.isEmpty || !context.channel.isWritable {
            self.readPending = true
        } else {
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        context.fireChannelWritabilityChanged()
        self.readIfPending(context: context)
    }

    private func readIfPending(context: ChannelHandlerContext) {
        if self.readPending, self.held.isEmpty, context.channel.isWritable {
            self.readPending = false
            context.read()
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = self.unwrapOutboundIn(data) { self.state.routerAnswered() }
        context.write(data, promise: promise)
    }

    private func handle(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch self.state.read(part) {
        case .forward:
            context.fireChannelRead(self.wrapInboundOut(part))
        case .keep:
            break
        case .forwardParts(let parts):
            for part in parts { context.fireChannelRead(self.wrapInboundOut(part)) }
        case .submit(let request):
            let promise = context.eventLoop.makePromise(of: RegistrationLane.Answer.self)
            guard self.lane.submit(request, promise: promise) else {
                // The lane has stopped (the server is shutting down); `submit` completed the promise.
                self.route(context: context)
                return
            }
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { answer in
                bound.value.handler.answered(answer, context: bound.value.context)
            }
        }
    }

    private func answered(_ answer: RegistrationLane.Answer, context: ChannelHandlerContext) {
        guard !self.isRemoved else { return }
        switch answer {
        case .respond(let head, let body):
            self.state.answered()
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            context.write(self.wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        case .route:
            self.route(context: context)
        }
        self.resume(context: context)
    }

    private func route(context: ChannelHandlerContext) {
        for part in self.state.route() { context.fireChannelRead(self.wrapInboundOut(part)) }
        context.fireChannelReadComplete()
    }

    /// Goes on with what was held, until the lane takes another request; then reads again.
    private func resume(context: ChannelHandlerContext) {
        var forwarded = false
        while !self.state.isAnswering, let next = self.held.popFirst() {
            switch next {
            case .part(let part):
                self.handle(part, context: context)
            case .error(let error):
                context.fireErrorCaught(error)
            case .event(let event):
                context.fireUserInboundEventTriggered(event)
            }
            forwarded = true
        }
        if forwarded { context.fireChannelReadComplete() }
        self.readIfPending(context: context)
    }
}

@available(*, unavailable)
extension RegistrationLaneHandler: Sendable {}

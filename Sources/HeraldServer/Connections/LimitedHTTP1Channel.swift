// SPDX-License-Identifier: Apache-2.0
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// Hummingbird's HTTP/1.1 channel with Herald's connection limits: at most `connections.limit`
/// open connections (more are closed at once) and a request-head timeout
/// (``RequestHeadTimeoutHandler``). The idle timeout is `HTTP1Channel`'s own. With a `lane`,
/// registrations are answered by it (``RegistrationLaneHandler``), the rest by the router.
struct LimitedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let http1: HTTP1Channel
    let requestHeadTimeout: Duration?
    let connections: OpenConnections?
    let lane: RegistrationLane?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let accepted = self.connections?.open(logger: logger) ?? true
        if accepted, let connections = self.connections {
            channel.closeFuture.whenComplete { _ in connections.close() }
        }
        let requestHeadTimeout = self.requestHeadTimeout
        let lane = self.lane
        // Setting up never fails for a refused connection: a failed setup would end the
        // server's accept loop. It gets a pipeline that closes it as soon as it is active.
        return self.http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            guard accepted else {
                try pipeline.addHandler(RefuseConnectionHandler(), position: .first)
                return value
            }
            if let lane {
                try pipeline.addHandler(
                    RegistrationLaneHandler(lane: lane, channel: channel),
                    position: .after(try pipeline.handler(type: HTTPConnectionStateHandler.self)))
            }
            if let requestHeadTimeout {
                let timeout = RequestHeadTimeoutHandler(timeout: TimeAmount(requestHeadTimeout))
                try pipeline.addHandler(timeout, position: .first)
                let state = try pipeline.handler(type: HTTPConnectionStateHandler.self)
                try pipeline.addHandler(RequestHeadObserver(timeout), position: .before(state))
            }
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await self.http1.handle(value: value, logger: logger)
    }
}

/// The server's ``ConnectionCap`` under a lock, shared by every connection's setup.
final class OpenConnections: Sendable {
    private let cap: Mutex<ConnectionCap>

    init(limit: Int) {
        self.cap = Mutex(ConnectionCap(limit: limit))
    }

    var count: Int { self.cap.withLock { $0.open } }

    /// Counts a new connection; false when the cap is reached (it is not counted).
    func open(logger: Logger) -> Bool {
        switch self.cap.withLock({ $0.opened() }) {
        case .accept:
            return true
        case .refuse(let first):
            if first {
                logger.warning(
                    "API connection limit reached: closing new connections until some close",
                    metadata: ["herald.max_connections": "\(self.cap.withLock { $0.limit })"]
                )
            }
            return false
        }
    }

    func close() {
        self.cap.withLock { $0.closed() }
    }
}

/// A connection over the cap: closed as soon as it is active, anything it sent dropped.
final class RefuseConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.close(promise: nil) }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

@available(*, unavailable)
extension RefuseConnectionHandler: Sendable {}

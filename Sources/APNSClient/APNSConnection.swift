// SPDX-License-Identifier: Apache-2.0
import APNSModels
import CoreMetrics
import Logging
import NIOCore
import NIOTLS

/// One HTTP/2 connection to APNs: the client side of RFC 9113, cut to what APNs needs, written
/// straight onto the TLS handler without a generic stream layer.
///
/// The pool hands it requests while it has stream capacity; it writes each as one HEADERS
/// frame (HPACK per Apple's guidance, by ``APNSHeaderEncoder``) and one DATA frame into a
/// buffer that goes out in a single write per batch. Answers come back as the pool's callbacks:
/// success, rejection, a resend for streams APNs never processed (REFUSED_STREAM, streams above
/// a GOAWAY's last-stream-id), or an unknown outcome for streams written and unanswered when the
/// connection ends.
///
/// Stream capacity follows the server's SETTINGS. On token connections it is one stream until
/// the first answer that is not an authentication failure, as APNs itself allows.
/// Everything runs on the pool's event loop.
///
/// The protocol lives in ``HTTP2FrameReader`` (bytes to frames) and ``StateMachine`` (frames,
/// requests, timeouts and the close in; actions out), on plain values; this handler feeds them
/// and performs their actions: the pool's callbacks, writes and closing.
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

    let id: Int
    private let pool: ConnectionPool
    /// The HTTP/2 connection itself: this handler performs what it decides.
    private var stateMachine: StateMachine
    private var reader = HTTP2FrameReader()
    /// The channel this connection runs on: the first to become active. Happy Eyeballs may add
    /// this handler to several attempts' pipelines; the others are ignored and closed by NIO.
    private var context: ChannelHandlerContext?
    private var shutdownRequested = false
    private(set) var lastRead: NIODeadline
    let openedAt: NIODeadline
    private var logger: Logger

    init(id: Int, pool: ConnectionPool, usesToken: Bool, streamCap: Int, logger: Logger, allocator: ByteBufferAllocator) {
        self.id = id
        self.pool = pool
        self.stateMachine = StateMachine(usesToken: usesToken, streamCap: streamCap, allocator: allocator)
        self.openedAt = .now()
        self.lastRead = self.openedAt
        self.logger = logger
        self.logger[metadataKey: "apns.connection"] = "\(id)"
    }

    var state: State { self.stateMachine.state }
    /// New streams this connection can take now.
    var capacity: Int { self.stateMachine.capacity }
    var inFlight: Int { self.stateMachine.inFlight }
    var pingSentAt: NIODeadline? { self.stateMachine.pingSentAt }
    /// What ended or is ending the connection, for logs and `connectionFailed` messages.
    var closeReason: String? { self.stateMachine.closeReason }

    // MARK: lifecycle

    func channelActive(context: ChannelHandlerContext) {
        guard self.context == nil else { return context.fireChannelActive() }
        self.context = context
        if self.shutdownRequested {
            self.stateMachine.closeReason = "the client shut down"
            context.close(promise: nil)
            return
        }
        self.stateMachine.channelActive()
        self.flush()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard context === self.context else { return }
        self.terminate()
        self.context = nil
    }

    /// Hands every stream back once (see ``StateMachine/closed()``); then the pool forgets this
    /// connection.
    private func terminate() {
        guard let termination = self.stateMachine.closed() else { return }
        for outcome in termination.outcomes { self.perform(outcome) }
        self.pool.connectionClosed(self, becameReady: termination.becameReady, unanswered: termination.unanswered, reason: termination.reason)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard context === self.context else { return }
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = event, let negotiated, negotiated != "h2" {
            // No ALPN at all is fine (HTTP/2 with prior knowledge, as APNs accepts); another protocol is not.
            self.stateMachine.closeReason = "the server chose \(negotiated) instead of h2"
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard context === self.context else { return context.close(promise: nil) }
        if self.stateMachine.closeReason == nil { self.stateMachine.closeReason = "\(error)" }
        self.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    /// Closes now; unanswered streams go back to the pool at once, without waiting for the TLS
    /// shutdown of a peer that may never answer.
    func close(reason: String) {
        if self.stateMachine.closeReason == nil { self.stateMachine.closeReason = reason }
        let context = self.context
        self.terminate()
        context?.close(promise: nil)
    }

    /// Stops taking streams; closes once the ones in flight are answered.
    func drain(reason: String) {
        if self.stateMachine.drain(reason: reason) { self.context?.close(promise: nil) }
    }

    /// Sends GOAWAY(NO_ERROR) and closes: the client is shutting down and nothing is in flight.
    func shutdown() {
        self.shutdownRequested = true
        guard let context = self.context else { return }
        self.stateMachine.shutdown()
        self.flush()
        context.close(promise: nil)
    }

    private func closeIfDrained() {
        if self.stateMachine.isDrained { self.context?.close(promise: nil) }
    }

    // MARK: sending

    /// Writes one request as HEADERS + DATA into the outgoing buffer; `flush()` sends the batch.
    /// Only called while `capacity > 0`.
    func send(_ pending: Pending) {
        let action = self.stateMachine.submit(
            pending, authority: self.pool.authority, usesToken: self.pool.tokenSource != nil, sharedToken: self.pool.token
        )
        switch action {
        case .sent:
            break
        case .notSent(let close):
            if close { self.context?.close(promise: nil) }
            self.pool.resend(pending, countingSend: false)
        }
    }

    /// Sends what was written since the last flush, in one write.
    func flush() {
        guard let context = self.context, let bytes = self.stateMachine.takeOutbound() else { return }
        context.writeAndFlush(NIOAny(bytes), promise: nil)
    }

    func ping(now: NIODeadline) {
        if self.stateMachine.ping(now: now) { self.flush() }
    }

    /// Fails the streams whose deadline passed, resetting them with CANCEL.
    func expire(now: NIODeadline) {
        let expired = self.stateMachine.expire(now: now)
        guard !expired.isEmpty else { return }
        for pending in expired { self.pool.deadlineExceeded(pending, sent: true) }
        self.flush()
        self.closeIfDrained()
    }

    // MARK: receiving

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard self.stateMachine.state != .closed, context === self.context else { return }
        var incoming = self.unwrapInboundIn(data)
        self.lastRead = .now()
        self.reader.append(&incoming)
        while self.stateMachine.state != .closed {
            let action: StateMachine.FrameAction
            do {
                guard let frame = try self.reader.next() else { break }
                action = self.stateMachine.frameReceived(frame)
            } catch {
                action = self.stateMachine.readFailed(error)
            }
            self.perform(action)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard context === self.context else { return }
        self.stateMachine.readComplete()
        self.reader.compact()
        // Answers freed streams: the pool refills every connection, then everything is flushed.
        self.pool.dispatch()
        self.flush()
        self.closeIfDrained()
    }

    @inline(__always)
    private func perform(_ action: consuming StateMachine.FrameAction) {
        switch action {
        case .none:
            break
        case .succeeded(let pending, let delivery):
            self.pool.succeeded(pending, delivery)
        case .failed(let pending, let error):
            self.pool.failed(pending, error)
        case .tokenExpired(let pending, let token):
            self.pool.providerTokenExpired(pending, token: token, on: self)
        case .refused(let pending):
            self.pool.metrics.refusedStreams.increment()
            self.pool.resend(pending, countingSend: true, reason: "REFUSED_STREAM")
        case .ready(let maxStreams):
            self.logger.debug("connection ready", metadata: ["apns.max_streams": "\(maxStreams)"])
            self.pool.connectionReady(self)
        case .goAway(let goAway):
            self.logger.info("APNs sent GOAWAY", metadata: ["apns.goaway.reason": "\(goAway.reason)", "apns.goaway.code": "\(goAway.code)"])
            for pending in goAway.unprocessed { self.pool.resend(pending, countingSend: true, reason: "above GOAWAY's last-stream-id") }
            self.pool.connectionDraining(self, failedBeforeReady: goAway.failedBeforeReady)
            self.closeIfDrained()
        case .connectionError(_, let message):
            self.logger.warning("HTTP/2 protocol error from APNs", metadata: ["error": "\(message)"])
            self.flush()
            self.context?.close(promise: nil)
        }
    }
}

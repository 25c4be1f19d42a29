// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import NIOTLS

/// One APNs connection. It works on HTTP/2 frames directly (no child channel per stream), reads
/// each request to its end, lets ``RequestProcessor`` judge it, and writes the answer framed as
/// APNs frames it. It also plays APNs's connection behaviour: the stream-limit ramp, GOAWAY with
/// a JSON reason, idle timeouts and the injected faults. The stream bookkeeping behind that is
/// ``StateMachine``, on plain values; this handler judges requests, runs the timers and writes.
final class APNSConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let processor: RequestProcessor
    private let listener: APNSEmulator.Listener
    private let connectionID: Int
    private let seed: UInt64
    private var connection: ConnectionContext?
    private var context: ChannelHandlerContext?
    private var stateMachine: StateMachine
    /// Answers held back by injected latency (the state machine knows their streams).
    private var delayed: [HTTP2StreamID: Scheduled<Void>] = [:]
    private var needsFlush = false
    private var lastActivity = NIODeadline.now()
    private var idleCheck: Scheduled<Void>?

    private var configuration: APNSEmulator.Configuration { self.processor.configuration }

    init(processor: RequestProcessor, listener: APNSEmulator.Listener, connectionID: Int, seed: UInt64) {
        self.processor = processor
        self.listener = listener
        self.connectionID = connectionID
        self.seed = seed
        self.stateMachine = StateMachine(
            maxConcurrentStreams: processor.configuration.maxConcurrentStreams,
            dropStreamLimitAfterRejection: processor.configuration.dropStreamLimitAfterRejection,
            allocator: ByteBufferAllocator()
        )
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if !self.listener.tls, context.channel.isActive { self.connectionEstablished(context: context, certificate: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.idleCheck?.cancel()
        for task in self.delayed.values { task.cancel() }
        self.delayed.removeAll()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        if !self.listener.tls, self.connection == nil { self.connectionEstablished(context: context, certificate: nil) }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is RefusedStreamEvent {
            self.processor.state.count { $0.refusedStreams += 1 }
        } else if event is PingReceivedEvent {
            self.processor.state.count { $0.pingsReceived += 1 }
        } else if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted = tlsEvent {
            let der = (try? context.pipeline.syncOperations.nioSSL_peerCertificate()).flatMap { $0 }.flatMap { try? $0.toDERBytes() }
            let certificate = der.flatMap { ProviderCertificateInfo(derEncoded: $0) }
            if der != nil, certificate == nil {
                self.sendGoAway(context: context, reason: .badCertificate, code: .noError, lastStreamID: .rootStream)
                self.flushIfNeeded(context: context)
                context.close(promise: nil)
                return
            }
            self.connectionEstablished(context: context, certificate: certificate)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func connectionEstablished(context: ChannelHandlerContext, certificate: ProviderCertificateInfo?) {
        guard self.connection == nil else { return }
        self.connection = ConnectionContext(
            id: self.connectionID, environment: self.listener.environment, certificate: certificate, seed: self.seed
        )
        let extra = min(self.configuration.connectionWindowSize, 0x7FFF_FFFF) - 65_535
        if extra > 0 {
            self.write(context: context, HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: extra)))
        }
        if let certificate {
            guard certificate.environments.contains(self.listener.environment) else {
                self.sendGoAway(context: context, reason: .badCertificateEnvironment, code: .noError, lastStreamID: .rootStream)
                self.flushIfNeeded(context: context)
                context.close(promise: nil)
                return
            }
            // Certificate connections get the full stream limit right after the handshake.
            self.announceStreamLimit(context: context, self.stateMachine.streamLimit(self.configuration.maxConcurrentStreams))
        }
        self.flushIfNeeded(context: context)
        self.scheduleIdleCheck(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch self.stateMachine.frameReceived(frame) {
        case .none:
            break
        case .windowUpdate(let increment):
            self.write(context: context, HTTP2Frame(streamID: frame.streamID, payload: .windowUpdate(windowSizeIncrement: increment)))
        case .requestComplete(let pending, let windowUpdate):
            if let windowUpdate {
                self.write(context: context, HTTP2Frame(streamID: frame.streamID, payload: .windowUpdate(windowSizeIncrement: windowUpdate)))
            }
            self.complete(context: context, streamID: frame.streamID, pending: pending)
        case .reset:
            self.delayed.removeValue(forKey: frame.streamID)?.cancel()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushIfNeeded(context: context)
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2 has already answered protocol errors (RST_STREAM for a stream, GOAWAY for the
        // connection). A stream error leaves the connection usable; anything else ends this
        // connection, and only this one.
        if error is NIOHTTP2Errors.StreamError { return }
        self.flushIfNeeded(context: context)
        context.close(promise: nil)
    }

    // MARK: requests

    private func complete(context: ChannelHandlerContext, streamID: HTTP2StreamID, pending: PendingStream) {
        // The connection's state is changed in place (`&self.connection!`): a copy taken out and
        // stored back would retain and release each of its fields per request.
        guard self.connection != nil else { return }
        self.lastActivity = .now()
        guard self.stateMachine.admit(streamID) else {
            // Above GOAWAY's last-stream-id: never processed; the client may send it elsewhere.
            self.refuse(context: context, streamID: streamID)
            return
        }
        let headers = RequestHeaders(pending.headers)
        let route = RequestProcessor.route(headers.path)
        var delay: Int64 = 0
        if let fault = self.processor.state.takeFault(scope: RequestProcessor.scope(of: route)) {
            switch fault {
            case .status(let status, let reason):
                let id = self.processor.responseID(headers.requestID ?? headers.apnsID, &self.connection!)
                let idHeader = headers.path?.hasPrefix("/3/") == false ? "apns-request-id" : "apns-id"
                let outcome = self.processor.reject(reason, status: status, idHeader: idHeader, id: id)
                self.processor.state.recordRejection(reason)
                self.respond(context: context, streamID: streamID, outcome: outcome, headers: headers)
                return
            case .latency(let milliseconds):
                delay = milliseconds
            case .goAway(let reason):
                // Everything processed so far is at or below last-stream-id; this stream is not.
                let (answerFirst, boundary) = self.stateMachine.goAwayFault(streamID)
                if answerFirst {
                    // Answered out of order above it: this one cannot be marked unprocessed.
                    let outcome = self.processor.reject(
                        .shutdown, status: 503, idHeader: "apns-id", id: self.processor.responseID(headers.apnsID, &self.connection!))
                    self.respond(context: context, streamID: streamID, outcome: outcome, headers: headers)
                }
                self.sendGoAway(context: context, reason: reason, code: .noError, lastStreamID: boundary)
                self.flushIfNeeded(context: context)
                self.closeWhenDrained(context: context)
                return
            case .dropConnection:
                context.close(promise: nil)
                return
            case .refuseStream:
                self.refuse(context: context, streamID: streamID)
                return
            case .streamLimit(let limit):
                // Streams already processed (answers held back by latency) count against the
                // limit but are never refused: they were delivered. Unprocessed ones beyond it are.
                let (announced, excess) = self.stateMachine.streamLimitFault(limit)
                self.announceStreamLimit(context: context, announced)
                for streamID in excess { self.refuse(context: context, streamID: streamID) }
                if limit == 0 {
                    self.refuse(context: context, streamID: streamID)
                    return
                }
            }
        }
        let outcome = self.processor.process(headers, body: pending.body, connection: &self.connection!)
        let limits = self.stateMachine.processed(
            streamID, accepted: outcome.accepted, status: outcome.status, firstAuthentication: outcome.firstAuthentication,
            authenticated: self.connection?.authenticated ?? false
        )
        for limit in limits { self.announceStreamLimit(context: context, limit) }
        guard delay > 0 else {
            self.respond(context: context, streamID: streamID, outcome: outcome, headers: headers)
            return
        }
        let loop = context.eventLoop.assumeIsolated()
        self.stateMachine.answerDelayed(streamID)
        self.delayed[streamID] = loop.scheduleTask(in: .milliseconds(delay)) {
            self.delayed[streamID] = nil
            guard self.stateMachine.delayedAnswerDue(streamID), let context = self.context else { return }
            self.respond(context: context, streamID: streamID, outcome: outcome, headers: headers)
            self.flushIfNeeded(context: context)
        }
    }

    private func respond(context: ChannelHandlerContext, streamID: HTTP2StreamID, outcome: Outcome, headers: RequestHeaders) {
        var block = HPACKHeaders()
        block.reserveCapacity(outcome.headers.count + 1)
        block.add(name: ":status", value: String(outcome.status))
        for (name, value) in outcome.headers {
            // Per-request ids would only churn the peer's dynamic table.
            let unique = name == "apns-id" || name == "apns-unique-id" || name == "apns-request-id" || name == "apns-channel-id"
            block.add(name: name, value: value, indexing: unique ? .nonIndexable : .indexable)
        }
        self.write(context: context, HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: block, endStream: outcome.body == nil))))
        if let body = outcome.body {
            let buffer = context.channel.allocator.buffer(bytes: body)
            self.write(context: context, HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true))))
        }
        self.processor.state.log(
            RequestLogEntry(
                atMilliseconds: self.processor.clock.nowMilliseconds, connectionID: self.connectionID,
                method: headers.method ?? "", path: headers.path ?? "", status: outcome.status,
                reason: outcome.reason?.rawValue, pushType: headers.pushType, topic: headers.topic,
                apnsID: outcome.headers.first(where: { $0.0 == "apns-id" || $0.0 == "apns-request-id" })?.1
            )
        )
        if self.stateMachine.goAwayBoundary != nil { self.closeWhenDrained(context: context) }
    }

    private func refuse(context: ChannelHandlerContext, streamID: HTTP2StreamID) {
        self.stateMachine.refused(streamID)
        self.delayed.removeValue(forKey: streamID)?.cancel()
        self.processor.state.count { $0.refusedStreams += 1 }
        self.write(context: context, HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream)))
    }

    // MARK: connection control

    /// SETTINGS with `limit` as MAX_CONCURRENT_STREAMS (the state machine has recorded it).
    private func announceStreamLimit(context: ChannelHandlerContext, _ limit: Int) {
        self.write(
            context: context,
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)])))
        )
    }

    private func sendGoAway(context: ChannelHandlerContext, reason: APNSReason, code: HTTP2ErrorCode, lastStreamID: HTTP2StreamID) {
        guard self.stateMachine.sendGoAway() else { return }
        let debug = context.channel.allocator.buffer(bytes: APNSErrorResponse(reason: reason).body)
        self.write(
            context: context, HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: lastStreamID, errorCode: code, opaqueData: debug)))
    }

    /// Graceful shutdown: GOAWAY `{"reason":"Shutdown"}`, answer what was already received, close.
    func shutdown() {
        guard let context = self.context else { return }
        let lastStreamID = self.stateMachine.closing()
        self.sendGoAway(context: context, reason: .shutdown, code: .noError, lastStreamID: lastStreamID)
        self.flushIfNeeded(context: context)
        self.closeWhenDrained(context: context)
    }

    private func closeWhenDrained(context: ChannelHandlerContext) {
        if !self.stateMachine.waitingBelowBoundary {
            self.flushIfNeeded(context: context)
            context.close(promise: nil)
            return
        }
        // Give requests that were under way a moment to finish, then close regardless.
        context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) {
            self.context?.close(promise: nil)
        }
    }

    private func scheduleIdleCheck(context: ChannelHandlerContext) {
        guard let seconds = self.configuration.idleTimeoutSeconds, seconds > 0 else { return }
        let timeout = TimeAmount.seconds(seconds)
        // Never a deadline in the past: a busy connection is checked again a full timeout later.
        let deadline = max(self.lastActivity + timeout, .now() + .milliseconds(100))
        self.idleCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            guard let context = self.context else { return }
            if self.stateMachine.isIdle, self.lastActivity + timeout <= .now() {
                let lastStreamID = self.stateMachine.closing()
                self.sendGoAway(context: context, reason: .idleTimeout, code: .noError, lastStreamID: lastStreamID)
                self.flushIfNeeded(context: context)
                context.close(promise: nil)
            } else {
                if !self.stateMachine.isIdle { self.lastActivity = .now() }
                self.scheduleIdleCheck(context: context)
            }
        }
    }

    private func write(context: ChannelHandlerContext, _ frame: HTTP2Frame) {
        context.write(self.wrapOutboundOut(frame), promise: nil)
        self.needsFlush = true
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
    }
}

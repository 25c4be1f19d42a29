// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore
import NIOHTTP1
import NIOPosix

/// The control API's HTTP/1.1 server: JSON requests in, JSON answers out, plus a server-sent
/// events stream per device. See `docs/emulator.md` for every endpoint.
struct ControlServer: Sendable {
    let emulator: APNSEmulator

    func bind(host: String, port: Int) async throws -> any Channel {
        do {
            return try await ServerBootstrap(group: self.emulator.group)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(ControlHTTPHandler(api: ControlAPI(emulator: self.emulator)))
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch {
            throw EmulatorError(.bind, "cannot listen on \(host):\(port) for the control API", cause: error)
        }
    }
}

/// A control-API answer.
struct ControlResponse {
    var status: HTTPResponseStatus
    var contentType: String
    var body: [UInt8]
    /// Keep the connection open as a server-sent-events stream of this device's notifications.
    var streamDevice: String?

    static func json(_ status: HTTPResponseStatus, _ value: JSONValue) -> ControlResponse {
        var body = value.serialized()
        body.append(0x0A)
        return ControlResponse(status: status, contentType: "application/json", body: body, streamDevice: nil)
    }

    static func error(_ status: HTTPResponseStatus, _ code: String, _ message: String) -> ControlResponse {
        .json(status, .object([("error", .object([("code", .string(code)), ("message", .string(message))]))]))
    }
}

final class ControlHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maximumBodySize = 1 << 20

    private let api: ControlAPI
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var listenerID: Int?

    init(api: ControlAPI) {
        self.api = api
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = []
            self.tooLarge = false
        case .body(let buffer):
            if self.body.count + buffer.readableBytes > Self.maximumBodySize {
                self.tooLarge = true
            } else {
                self.body.append(contentsOf: buffer.readableBytesView)
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let response =
                self.tooLarge
                ? ControlResponse.error(.payloadTooLarge, "payload_too_large", "request bodies are limited to 1 MiB")
                : self.api.handle(method: head.method, uri: head.uri, body: self.body)
            self.respond(context: context, head: head, response: response)
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead, response: ControlResponse) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        if let token = response.streamDevice {
            headers.add(name: "cache-control", value: "no-cache")
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: ": connected\n\n")))), promise: nil)
            let channel = context.channel
            let onRemoved: @Sendable () -> Void = {
                channel.eventLoop.execute {
                    channel.write(
                        HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(string: "event: removed\ndata: {}\n\n"))), promise: nil)
                    channel.writeAndFlush(HTTPServerResponsePart.end(nil)).whenComplete { _ in channel.close(promise: nil) }
                }
            }
            self.listenerID = self.api.emulator.state.addListener(token: token, onRemoved: onRemoved) { notification in
                let event = "event: notification\ndata: \(ControlAPI.json(notification).jsonString)\n\n"
                channel.eventLoop.execute {
                    // A reader that does not keep up loses events rather than growing our buffers.
                    guard channel.isWritable else { return }
                    channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(string: event))), promise: nil)
                }
            }
            if self.listenerID == nil { onRemoved() }
            return
        }
        headers.add(name: "content-length", value: String(response.body.count))
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        let done = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
        if !keepAlive { done.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let id = self.listenerID { self.api.emulator.state.removeListener(id) }
        self.listenerID = nil
        context.fireChannelInactive()
    }
}

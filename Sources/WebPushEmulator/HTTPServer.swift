// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

/// Hummingbird's request context, keeping the connection so an event stream ends with it.
struct WebPushRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}

/// The one listener's HTTP routes: the push endpoints (`/apple/…`, `/wpush/v1|v2/…`,
/// `/fcm/send/…`) and `/emulator/…`. The WebSocket upgrade at `/` is ``WebPushEmulator/upgrade``.
struct WebPushResponder: HTTPResponder {
    typealias Context = WebPushRequestContext

    /// Push bodies are read up to this (more is refused 413 unread); control bodies too.
    static let maximumBodyBytes = 1 << 16

    let emulator: WebPushEmulator

    func respond(to request: Request, context: WebPushRequestContext) async throws -> Response {
        var request = request
        let method = request.method.rawValue
        let segments = request.uri.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var body: [UInt8] = []
        var bodyTooLarge = false
        do {
            body = Array(buffer: try await request.collectBody(upTo: Self.maximumBodyBytes))
        } catch {
            bodyTooLarge = true
        }
        if let (personality, prefix, token) = Self.pushRoute(segments) {
            var headers: [String: String] = [:]
            for field in request.headers {
                let name = field.name.canonicalName
                headers[name] = headers[name].map { $0 + ", " + field.value } ?? field.value
            }
            let push = PushRequest(
                method: method, personality: personality, pathPrefix: prefix, token: token, headers: headers, body: body,
                bodyTooLarge: bodyTooLarge
            )
            return Self.response(await PushEndpoint(emulator: self.emulator).handle(push))
        }
        guard segments.first == "emulator" else {
            return Self.response(PushAnswer(status: 404, headers: [], contentType: "text/plain; charset=utf-8", body: Array("Not Found\n".utf8)))
        }
        guard !bodyTooLarge else {
            return Self.json(status: 413, .object([("error", .object([("code", 413), ("message", "body too large")]))]))
        }
        switch ControlAPI(emulator: self.emulator).handle(method: method, path: Array(segments.dropFirst()), body: body) {
        case .json(let status, let json):
            return Self.json(status: status, json)
        case .events(let id, let stream):
            let state = self.emulator.state
            context.channel.closeFuture.whenComplete { _ in state.endStream(id) }
            let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache"]
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    // A comment first: a client that has read it knows it is subscribed.
                    try await writer.write(ByteBuffer(string: ": subscribed\n\n"))
                    for await event in stream {
                        try await writer.write(ByteBuffer(string: "event: message\ndata: \(event.json)\n\n"))
                    }
                    try await writer.finish(nil)
                }
            )
        }
    }

    /// `(personality, path prefix, token)` for a push endpoint's path.
    static func pushRoute(_ segments: [String]) -> (WebPushPersonality, String, String)? {
        switch segments.count {
        case 2 where segments[0] == "apple":
            (.apple, "/apple/", segments[1])
        case 3 where segments[0] == "wpush" && (segments[1] == "v1" || segments[1] == "v2"):
            (.mozilla, "/wpush/\(segments[1])/", segments[2])
        case 3 where segments[0] == "fcm" && segments[1] == "send":
            (.fcm, "/fcm/send/", segments[2])
        default:
            nil
        }
    }

    static func json(status: Int, _ json: JSONValue) -> Response {
        Response(
            status: .init(code: status), headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: json.serialized()))
        )
    }

    static func response(_ answer: PushAnswer) -> Response {
        var headers = HTTPFields()
        if let contentType = answer.contentType { headers[.contentType] = contentType }
        for (name, value) in answer.headers {
            if let name = HTTPField.Name(name) { headers.append(HTTPField(name: name, value: value)) }
        }
        return Response(status: .init(code: answer.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}

extension WebPushEmulator {
    /// Upgrades `GET /` to the autopush WebSocket protocol, echoing the subprotocol
    /// `push-notification` when the client asks for it (Firefox does).
    func upgrade(_ request: HTTPRequest) -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        let path = request.path ?? "/"
        guard path == "/" || path.hasPrefix("/?") else { return .dontUpgrade }
        var headers = HTTPFields()
        let offered = request.headerFields[values: .secWebSocketProtocol].flatMap { $0.split(separator: ",") }.map { $0.trimmingWhitespace }
        if offered.contains("push-notification") { headers[.secWebSocketProtocol] = "push-notification" }
        return .upgrade(headers) { [self] inbound, outbound, context in
            try await AutopushProtocol.serve(emulator: self, inbound: inbound, outbound: outbound, logger: context.logger)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Hummingbird
import Logging
import NIOCore

/// Hummingbird's request context, keeping the connection so a `drop` fault can close it.
struct FCMRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}

/// Thrown after a `drop` fault closed the connection, so nothing is written.
struct ConnectionDropped: Error {}

/// The one listener's routes: `POST /token`, `POST /v1/projects/{p}/messages:send`, `/emulator/…`.
struct FCMResponder: HTTPResponder {
    typealias Context = FCMRequestContext

    /// Bodies larger than this are refused (FCM's own limit is far below it).
    static let maximumBodyBytes = 1 << 20

    let emulator: FCMEmulator

    func respond(to request: Request, context: FCMRequestContext) async throws -> Response {
        var request = request
        let method = request.method.rawValue
        let path = request.uri.path
        let body: [UInt8]
        do {
            body = Array(buffer: try await request.collectBody(upTo: Self.maximumBodyBytes))
        } catch {
            return Self.response(
                .json(status: 413, body: GoogleError(code: 413, message: "Request body too large.", status: "FAILED_PRECONDITION").json))
        }
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map {
            TokenEndpoint.percentDecode($0) ?? String($0)
        }
        let reply: Reply
        switch segments.first {
        case "token" where segments.count == 1:
            guard method == "POST" else {
                reply = .json(status: 405, body: OAuthError(error: "invalid_request", description: "\(method) is not allowed").json)
                break
            }
            let answer = TokenEndpoint(state: self.emulator.state, clock: self.emulator.clock, ownTokenURL: self.emulator.tokenURLIfBound)
                .handle(body: body)
            reply = .json(status: answer.status, body: answer.json)
        case "v1" where segments.count == 4 && segments[1] == "projects" && segments[3] == "messages:send" && method == "POST":
            reply = SendEndpoint(state: self.emulator.state, clock: self.emulator.clock)
                .handle(project: segments[2], authorization: request.headers[.authorization], body: body)
        case "emulator":
            reply = ControlAPI(emulator: self.emulator).handle(method: method, path: Array(segments.dropFirst()), body: body)
        default:
            reply = .google(.notFound(path))
        }
        switch reply {
        case .drop:
            try? await context.channel.close()
            throw ConnectionDropped()
        case .events(let id, _):
            let state = self.emulator.state
            context.channel.closeFuture.whenComplete { _ in state.endStream(id) }
            return Self.response(reply)
        case .json:
            return Self.response(reply)
        }
    }

    static func response(_ reply: Reply) -> Response {
        switch reply {
        case .json(let status, let json, let extra):
            var headers: HTTPFields = [.contentType: "application/json; charset=UTF-8"]
            for (name, value) in extra {
                switch name {
                case "retry-after": headers[.retryAfter] = value
                case "www-authenticate": headers[.wwwAuthenticate] = value
                default: continue
                }
            }
            return Response(
                status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: json.serialized()))
            )
        case .events(_, let stream):
            let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache"]
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    // A comment first: a client that has read it knows it is subscribed.
                    try await writer.write(ByteBuffer(string: ": subscribed\n\n"))
                    for await record in stream {
                        try await writer.write(ByteBuffer(string: "event: message\ndata: \(record.json)\n\n"))
                    }
                    try await writer.finish(nil)
                }
            )
        case .drop:
            return Response(status: .internalServerError)
        }
    }
}

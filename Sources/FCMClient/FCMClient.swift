// SPDX-License-Identifier: Apache-2.0
public import APNSModels
import AsyncHTTPClient
public import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// A client of FCM HTTP v1 for one service account: OAuth access tokens from the account's key
/// (cached, renewed ahead of their expiry by ``renewAccessToken(within:)``, which a service
/// calls off the send path), messages posted over HTTP/2 (many streams on few connections; the
/// batch endpoint is gone), each answer classified as FCM documents it (``FCMError/action``).
public final class FCMClient: Sendable {
    public struct Configuration: Sendable {
        /// FCM's origin (`https://fcm.googleapis.com`); an emulator's otherwise.
        public var endpoint = "https://fcm.googleapis.com"
        /// Where assertions are exchanged instead of the key's `token_uri`.
        public var tokenURI: String?
        /// How long a message (or a token grant) may wait for its answer.
        public var requestTimeout: Duration = .seconds(10)
        /// Messages in flight at once for one `send`.
        public var concurrency = 128

        public init() {}
    }

    public let key: FCMServiceAccountKey
    let configuration: Configuration
    let http: HTTPClient
    let clock: any EpochClock
    let logger: Logger
    let sendURL: String
    /// The access token and when it expires (ms since 1970).
    private let token = Mutex<(value: String, expiresAt: Int64)?>(nil)
    /// Serializes grants: one request to the token endpoint at a time.
    private let granting = Mutex<Bool>(false)

    public init(key: FCMServiceAccountKey, configuration: Configuration = .init(), clock: any EpochClock = SystemEpochClock(), logger: Logger) {
        self.key = key
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        var http = HTTPClient.Configuration()
        http.timeout = .init(connect: .seconds(5), read: .seconds(Int64(configuration.requestTimeout.components.seconds) + 1))
        http.httpVersion = .automatic
        http.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        self.http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http, backgroundActivityLogger: logger)
        let endpoint = configuration.endpoint.hasSuffix("/") ? String(configuration.endpoint.dropLast()) : configuration.endpoint
        self.sendURL = "\(endpoint)/v1/projects/\(key.projectID)/messages:send"
    }

    public func shutdown() async {
        try? await self.http.shutdown()
    }

    /// When the access token in hand expires (ms since 1970); nil when there is none.
    public var accessTokenExpiry: Int64? { self.token.withLock { $0?.expiresAt } }

    /// Gets a new access token if the one in hand expires within `margin` (or there is none).
    public func renewAccessToken(within margin: Duration) async throws(FCMError) {
        let now = self.clock.nowMilliseconds
        if let expiry = self.accessTokenExpiry, expiry - now > margin.components.seconds * 1000 { return }
        _ = try await self.grant()
    }

    /// The access token to send with: the one in hand unless it has expired.
    func accessToken() async throws(FCMError) -> String {
        let now = self.clock.nowMilliseconds
        if let token = self.token.withLock({ $0 }), token.expiresAt > now { return token.value }
        return try await self.grant()
    }

    /// Exchanges a fresh assertion for an access token at the token endpoint.
    @discardableResult
    func grant() async throws(FCMError) -> String {
        let uri = self.configuration.tokenURI ?? self.key.tokenURI
        let now = self.clock.nowMilliseconds
        let assertion: String
        do {
            assertion = try self.key.assertion(now: now / 1000)
        } catch {
            throw FCMError(status: nil, code: "credentials_unusable", message: "the service account's key cannot sign")
        }
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let answer = try await self.post(uri, headers: headers, body: Array(body.utf8))
        let json = try? JSONValue.parse(answer.body)
        guard answer.status == 200, let value = json?["access_token"]?.stringValue, let lifetime = json?["expires_in"]?.intValue else {
            let error = json?["error"]?.stringValue ?? "HTTP_\(answer.status)"
            let description = json?["error_description"]?.stringValue ?? "the token endpoint answered \(answer.status)"
            // A refused key or assertion is the configuration's to fix; anything else may pass.
            let refused = error == "invalid_grant" || error == "invalid_client" || error == "unauthorized_client" || error == "invalid_scope"
            throw FCMError(
                status: answer.status, code: refused ? "credentials_unusable" : "token_grant_failed",
                message: "access token refused: \(error): \(description.prefix(200))")
        }
        self.token.withLock { $0 = (value, now + lifetime * 1000) }
        return value
    }

    /// Forgets `value` if it is still the token in hand (FCM called it invalid).
    private func forget(_ value: String) {
        self.token.withLock { if $0?.value == value { $0 = nil } }
    }

    /// Sends one message (the body of `messages:send`); its message id (`projects/…/messages/…`)
    /// or why not. A 401 gets a new access token and one more try (FCM processed nothing).
    public func send(_ body: [UInt8]) async -> Result<String, FCMError> {
        do {
            var token = try await self.accessToken()
            var answer = try await self.post(self.sendURL, headers: self.sendHeaders(token), body: body)
            if answer.status == 401 {
                self.forget(token)
                token = try await self.grant()
                answer = try await self.post(self.sendURL, headers: self.sendHeaders(token), body: body)
            }
            if answer.status == 200 {
                let name = (try? JSONValue.parse(answer.body))?["name"]?.stringValue ?? ""
                return .success(name)
            }
            return .failure(FCMError.parse(status: answer.status, body: answer.body, retryAfter: answer.retryAfter))
        } catch {
            return .failure(error)
        }
    }

    /// Sends every body, `configuration.concurrency` at a time, calling `answer` with each one's
    /// index in `bodies` and outcome as it comes (on the calling task).
    public func send(_ bodies: [[UInt8]], answer: (Int, Result<String, FCMError>) -> Void) async {
        await withTaskGroup(of: (Int, Result<String, FCMError>).self) { group in
            var next = 0
            let width = max(1, self.configuration.concurrency)
            while next < bodies.count, next < width {
                let index = next
                group.addTask { (index, await self.send(bodies[index])) }
                next += 1
            }
            for await (index, result) in group {
                answer(index, result)
                if next < bodies.count {
                    let index = next
                    group.addTask { (index, await self.send(bodies[index])) }
                    next += 1
                }
            }
        }
    }

    private func sendHeaders(_ token: String) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "authorization", value: "Bearer \(token)")
        headers.add(name: "content-type", value: "application/json; charset=UTF-8")
        return headers
    }

    /// One POST and its whole answer. A failure before the request was written throws a
    /// retryable error; after it, one whose outcome is unknown.
    private func post(_ url: String, headers: HTTPHeaders, body: [UInt8]) async throws(FCMError) -> Collector.Answer {
        let request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(url: url, method: .POST, headers: headers, body: .bytes(body))
        } catch {
            throw FCMError(status: nil, code: "credentials_unusable", message: "cannot make a request to \(url)")
        }
        let collector = Collector()
        let deadline = NIODeadline.now() + .milliseconds(self.configuration.requestTimeout.components.seconds * 1000)
        do {
            return try await self.http.execute(request: request, delegate: collector, deadline: deadline).futureResult.get()
        } catch {
            let written = collector.requestSent
            let timedOut = "\(error)".contains("deadlineExceeded") || "\(error)".contains("readTimeout")
            throw FCMError(
                status: nil, code: timedOut ? "timeout" : "connection_failed",
                message: written ? "no answer to a written request (\(error))" : "the request was not sent (\(error))", outcomeUnknown: written)
        }
    }

    /// Collects an answer and notes whether the request was written.
    final class Collector: HTTPClientResponseDelegate {
        struct Answer: Sendable {
            var status: Int
            var retryAfter: String?
            var body: [UInt8]
        }
        typealias Response = Answer

        private let state = Mutex<(sent: Bool, answer: Answer)>((false, Answer(status: 0, retryAfter: nil, body: [])))

        var requestSent: Bool { self.state.withLock { $0.sent } }

        func didSendRequest(task: HTTPClient.Task<Answer>) {
            self.state.withLock { $0.sent = true }
        }

        func didReceiveHead(task: HTTPClient.Task<Answer>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
            self.state.withLock {
                $0.answer.status = Int(head.status.code)
                $0.answer.retryAfter = head.headers.first(name: "retry-after")
            }
            return task.eventLoop.makeSucceededVoidFuture()
        }

        func didReceiveBodyPart(task: HTTPClient.Task<Answer>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
            self.state.withLock { state in
                // Answers are small; a runaway one is cut, not buffered.
                if state.answer.body.count < 1 << 16 { state.answer.body.append(contentsOf: buffer.readableBytesView) }
            }
            return task.eventLoop.makeSucceededVoidFuture()
        }

        func didFinishRequest(task: HTTPClient.Task<Answer>) throws -> Answer {
            self.state.withLock { $0.answer }
        }
    }
}

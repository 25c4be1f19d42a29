// SPDX-License-Identifier: Apache-2.0
import APNSModels
import CoreMetrics
import Dispatch
import HTTPTypes
import HeraldAPI
import HeraldCore
import HeraldPostgres
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// Registrations (`PUT /v1/apps/{app}/devices/{token}`, the request every installed app sends
/// on launch) answered beside the router rather than through it. A connection's
/// ``RegistrationLaneHandler`` reads the request; the lane checks it with the route's own
/// pieces (the authenticator, the scope, ``DevicesController``'s checks, the rate limit) and
/// writes it with the route's commit. What it skips is the framework's machinery around one
/// request (its request and context, the router, the middleware chain, the connection's async
/// iteration), which costs more than the registration's write (docs/performance.md).
///
/// The lane answers what the route answers alike: a key refused (401, the route's first check),
/// and once a registration is checked, the device written (200), the rate limit's refusal (429)
/// or the store's error. What the route would refuse between the two — a scope or app refused, a
/// body that does not decode or check — is handed to the router, which answers it as always.
/// Nothing has been written by then, so nothing happens twice.
final class RegistrationLane: Service {
    /// A registration request as the connection read it.
    struct Request: Sendable {
        var appID: String
        var token: String
        var authorization: String
        var forwardedFor: [String]
        /// The TCP peer's address.
        var peer: String?
        var body: ByteBuffer
        /// When its head was read (`DispatchTime`'s nanoseconds): the answer's duration counts
        /// from here, as the router's does from its head, so a wait in the lane's queue is in it.
        var arrived: UInt64
    }

    /// The lane's answer: a response to write, or the request handed to the router.
    enum Answer: Sendable {
        case respond(HTTPResponse, body: [UInt8])
        case route
    }

    /// The route the lane answers, as the router, its metrics and `openapi.yaml` name it.
    static let route = "/v1/apps/{app}/devices/{token}"
    /// Bodies up to this size are read for the lane; a larger one goes to the router (whose limit is ``API/bodyLimit``).
    static let bodyLimit = 64 << 10
    /// The route's operation in `openapi.yaml`: the statuses it may answer.
    static let operation = API.operationsByRoute["PUT \(route)"]

    private let authenticator: APIKeyAuthenticator
    private let scope: RequireScope
    private let devices: DevicesController
    private let refuseUndeclaredStatuses: Bool
    private let serverName: String
    private let logger: Logger
    private let dates = HTTPDateCache()
    private let metrics = LaneMetrics()
    /// One queue for each event loop of the server's: a connection's registrations are answered
    /// on its own loop, and handed over there (no thread between the two).
    private let queues: [Queue]

    /// A lane checking keys with `authenticator` (the router's, so that a key's use is written
    /// down once a minute whichever path it takes) and registrations with `devices`.
    /// The connections it serves are on `eventLoopGroup`'s loops (the API server's).
    init(
        authenticator: APIKeyAuthenticator, devices: DevicesController, eventLoopGroup: any EventLoopGroup, refuseUndeclaredStatuses: Bool,
        serverName: String, logger: Logger
    ) {
        self.authenticator = authenticator
        self.scope = RequireScope(.register, store: devices.store, clock: devices.clock)
        self.devices = devices
        self.queues = eventLoopGroup.makeIterator().map(Queue.init)
        self.refuseUndeclaredStatuses = refuseUndeclaredStatuses
        self.serverName = serverName
        self.logger = logger
    }

    /// Answers each submitted request in a task of its own, on its connection's event loop, until
    /// graceful shutdown; the requests taken by then are answered before it returns. One
    /// submitted later goes to the router.
    func run() async {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { loops in
                for queue in self.queues {
                    // A loop's queue is read on that loop, and its requests (child tasks, which
                    // keep the preference) are answered there.
                    loops.addTask(executorPreference: queue.executor) {
                        await withDiscardingTaskGroup { requests in
                            for await job in queue.jobs {
                                requests.addTask { job.reply.send(await self.answer(job.request)) }
                            }
                        }
                    }
                }
            }
        } onGracefulShutdown: {
            for queue in self.queues { queue.intake.finish() }
        }
    }

    /// Takes `request` to answer, then completes `promise` on its event loop (the connection's);
    /// false when the lane has stopped or does not serve that loop (the caller hands the
    /// request to the router).
    func submit(_ request: Request, promise: EventLoopPromise<Answer>) -> Bool {
        let reply = Reply(promise)
        let loop = promise.futureResult.eventLoop
        guard let queue = self.queues.first(where: { $0.executor.loop === loop }),
            case .enqueued = queue.intake.yield(Job(request: request, reply: reply))
        else {
            reply.abandon()
            return false
        }
        return true
    }

    /// The answer to one registration.
    func answer(_ request: Request) async -> Answer {
        self.metrics.active.increment()
        defer { self.metrics.active.decrement() }
        // The key first, as the router's authenticator does: a key refused is answered here, as
        // the router would (an unknown key costs a read, which the router would make again).
        // The client, named once for the failed-authentication gate and the rate limit.
        let address = self.authenticator.limits.clientAddress(peer: request.peer, forwardedFor: request.forwardedFor)
        let key: StoredAPIKey
        do {
            key = try await self.authenticator.key(authorization: request.authorization, address: address)
        } catch let refusal as AuthenticationRefusal {
            let body = refusal.error.jsonBody
            return self.answered(self.response(refusal.error.status, body: body, retryAfter: refusal.retryAfter), body: body, started: nil)
        } catch {
            return self.refused(error)
        }
        // The checks that write nothing: whatever they refuse, the router refuses the same way.
        let app: App
        let asked: DevicesController.Checked
        do {
            guard let found = try await self.scope.app(key: key, appID: request.appID, allowedWhileDeleting: false) else {
                throw HeraldError.notFound("app")
            }
            app = found
            let token = try Validate.token(request.token)
            let json = try APIRequestDecoder.parse(request.body.readableBytesView)
            let body = try DeviceRegistrationRequest(plainJSON: json) ?? APIRequestDecoder.decode(DeviceRegistrationRequest.self, json: json)
            asked = try self.devices.registration(body, app: app, key: key, address: .apns(token, environment: .production))
        } catch {
            self.metrics.routed.increment()
            return .route
        }
        self.metrics.answered(app.id).increment()
        do {
            if let gate = self.devices.rateLimit,
                let refused = try await gate.check(.register, key: key, address: address, app: app)
            {
                let body = refused.error.jsonBody
                return self.answered(
                    self.response(refused.error.status, body: body, retryAfter: refused.retryAfter), body: body, started: request.arrived)
            }
            let device = try await self.devices.commit(asked, app: app)
            let body = try APIJSONEncoder().encode(device)
            return self.answered(self.response(.ok, body: body), body: body, started: request.arrived)
        } catch {
            return self.refused(error)
        }
    }

    /// A thrown error's answer, as the route's middlewares make it: Herald's errors with their
    /// status, anything else a logged 500; counted as an error.
    private func refused(_ error: any Error) -> Answer {
        let refusal: HeraldError
        if let error = error as? HeraldError {
            refusal = error
        } else {
            self.logger.error("request failed", metadata: ["error": "\(error)"])
            refusal = HeraldError.internalFailure
        }
        self.metrics.endpoint(refusal.status).errors.increment()
        return self.answered(self.response(refusal.status, body: refusal.jsonBody), body: refusal.jsonBody, started: nil)
    }

    /// The answer counted as the router's metrics count it (its duration only for an answer that
    /// was not an error), then as the server sends it: a server started with
    /// ``ServerConfiguration/refuseUndeclaredStatuses`` answers an undeclared status with a 500.
    private func answered(_ response: HTTPResponse, body: [UInt8], started: UInt64?) -> Answer {
        let endpoint = self.metrics.endpoint(response.status)
        endpoint.requests.increment()
        if let started { endpoint.duration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started)) }
        if self.refuseUndeclaredStatuses, let operation = Self.operation, let error = API.undeclared(response.status, of: operation) {
            return .respond(self.response(error.status, body: error.jsonBody), body: error.jsonBody)
        }
        return .respond(response, body: body)
    }

    /// A JSON answer with the headers the router's answers carry, in their order.
    private func response(_ status: HTTPResponse.Status, body: [UInt8], retryAfter: Int? = nil) -> HTTPResponse {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.count)
        if let retryAfter { fields[.retryAfter] = String(retryAfter) }
        fields[.date] = self.dates.now
        fields[.server] = self.serverName
        return HTTPResponse(status: status, headerFields: fields)
    }

    private struct Job: Sendable {
        let request: Request
        let reply: Reply
    }

    /// The requests submitted by one event loop's connections, and that loop as an executor.
    private struct Queue: Sendable {
        let executor: EventLoopTaskExecutor
        let jobs: AsyncStream<Job>
        let intake: AsyncStream<Job>.Continuation

        init(_ loop: any EventLoop) {
            self.executor = EventLoopTaskExecutor(loop)
            (self.jobs, self.intake) = AsyncStream.makeStream()
        }
    }

    /// A request's promise, completed exactly once: with the lane's answer, or — when the lane
    /// drops it unanswered (cancelled before its turn) — handing the request to the router.
    private final class Reply: Sendable {
        private let promise: EventLoopPromise<Answer>
        private let sent = Atomic(false)

        init(_ promise: EventLoopPromise<Answer>) {
            self.promise = promise
        }

        func send(_ answer: Answer) {
            if !self.sent.exchange(true, ordering: .acquiringAndReleasing) { self.promise.succeed(answer) }
        }

        func abandon() {
            self.send(.route)
        }

        deinit {
            self.abandon()
        }
    }
}

extension RegistrationLane {
    /// The registration a request head asks the lane for, if it is one the lane takes:
    /// `PUT /v1/apps/{app}/devices/{token}` (any query ignored, as the router does), both names
    /// plain (letters, digits, `.`, `_`, `-`: nothing to decode), with an `Authorization` header
    /// and neither `Expect` nor `Connection: close`. Anything else is the router's.
    static func registration(_ head: HTTPRequest) -> (appID: String, token: String, authorization: String)? {
        guard head.method == .put, let target = head.path, let authorization = head.headerFields[.authorization],
            head.headerFields[.expect] == nil, !Self.asksToClose(head)
        else { return nil }
        // Read as bytes: the path is ASCII when it is one the lane takes, and a walk by Character
        // (grapheme breaking) would cost more than the rest of the match.
        var path = target
        return path.withUTF8 { bytes -> (appID: String, token: String, authorization: String)? in
            let prefix: StaticString = "/v1/apps/"
            let middle: StaticString = "/devices/"
            guard bytes.count > prefix.utf8CodeUnitCount, Self.matches(bytes, at: 0, prefix) else { return nil }
            let appStart = prefix.utf8CodeUnitCount
            var appEnd = appStart
            while appEnd < bytes.count, Self.isPlain(bytes[appEnd]) { appEnd += 1 }
            guard appEnd > appStart, appEnd - appStart <= 256, Self.matches(bytes, at: appEnd, middle) else { return nil }
            let tokenStart = appEnd + middle.utf8CodeUnitCount
            var tokenEnd = tokenStart
            while tokenEnd < bytes.count, Self.isPlain(bytes[tokenEnd]) { tokenEnd += 1 }
            // The token ends the path, or a query (ignored, as the router does) follows it.
            guard tokenEnd > tokenStart, tokenEnd - tokenStart <= 256, tokenEnd == bytes.count || bytes[tokenEnd] == UInt8(ascii: "?") else {
                return nil
            }
            return (
                String(decoding: UnsafeBufferPointer(rebasing: bytes[appStart..<appEnd]), as: UTF8.self),
                String(decoding: UnsafeBufferPointer(rebasing: bytes[tokenStart..<tokenEnd]), as: UTF8.self), authorization
            )
        }
    }

    /// Whether the request asks for the connection to close after its answer.
    static func asksToClose(_ head: HTTPRequest) -> Bool {
        head.headerFields[.connection]?.lowercased().contains("close") == true
    }

    private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int, _ text: StaticString) -> Bool {
        guard bytes.count - offset >= text.utf8CodeUnitCount else { return false }
        for index in 0..<text.utf8CodeUnitCount where bytes[offset + index] != text.utf8Start[index] { return false }
        return true
    }

    /// Letters, digits, `.`, `_`, `-`: a name with nothing to decode.
    private static func isPlain(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

/// The router's request metrics (Hummingbird's `MetricsMiddleware`: the same names and
/// dimensions) for the lane's answers, and how many registrations the lane answered for each
/// app (`herald_registration_lane_total{app, outcome="answered"}`: only apps a key was checked
/// for) or handed to the router (`outcome="routed"`).
private final class LaneMetrics: Sendable {
    struct Endpoint: Sendable {
        let requests: Counter
        let duration: CoreMetrics.Timer
        let errors: Counter
    }

    let active = Meter(label: "http.server.active_requests", dimensions: [("http.request.method", "PUT")])
    let routed = Counter(label: "herald_registration_lane_total", dimensions: [("outcome", "routed")])
    private let endpoints = Mutex<[Int: Endpoint]>([:])
    private let apps = Mutex<[String: Counter]>([:])

    func answered(_ app: String) -> Counter {
        self.apps.withLock { apps in
            if let known = apps[app] { return known }
            let made = Counter(label: "herald_registration_lane_total", dimensions: [("app", app), ("outcome", "answered")])
            apps[app] = made
            return made
        }
    }

    func endpoint(_ status: HTTPResponse.Status) -> Endpoint {
        self.endpoints.withLock { endpoints in
            if let known = endpoints[status.code] { return known }
            let dimensions = [("http.route", RegistrationLane.route), ("http.request.method", "PUT")]
            let made = Endpoint(
                requests: Counter(label: "hb.requests", dimensions: dimensions + [("http.response.status_code", String(status.code))]),
                duration: CoreMetrics.Timer(
                    label: "http.server.request.duration", dimensions: dimensions + [("http.response.status_code", String(status.code))],
                    preferredDisplayUnit: .seconds),
                errors: Counter(label: "hb.request.errors", dimensions: dimensions + [("error.type", String(status.code))])
            )
            endpoints[status.code] = made
            return made
        }
    }
}

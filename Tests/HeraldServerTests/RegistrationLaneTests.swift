// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HTTPTypes
import HeraldAPI
import HeraldCore
import HeraldSQLite
import HeraldTesting
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

@testable import HeraldServer

/// The registration lane through real sockets: the same answers as the router's, request for
/// request (a server with the lane beside one without it), and answers in the order of their
/// requests when a client sends several before reading (pipelining).
@Suite(.heavy) struct RegistrationLaneTests {
    /// `python3 -c client <mode> <port> <app> <register key> <send key>`: the requests of `mode` on one
    /// connection, then each answer as a line of JSON: status, headers (lowercased names) and body.
    /// `sequence` sends each request after the last answer; `pipelined` writes them all at once
    /// and only then reads. Its 30 s socket timeout is only a hang guard.
    static let client = #"""
        import json, socket, sys
        mode, port, app, register, send = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
        t1, t2, t3, t4 = ("%064x" % n for n in (0xa1, 0xa2, 0xa3, 0xa4))

        def request(method, path, key=None, body=None):
            head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % (method, path)
            if key: head += "Authorization: Bearer %s\r\n" % key
            data = body.encode() if body is not None else b""
            if body is not None: head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
            return (head + "\r\n").encode() + data

        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        buffered = b""
        def answer():
            global buffered
            while b"\r\n\r\n" not in buffered:
                chunk = sock.recv(65536)
                if not chunk: raise SystemExit("closed: " + repr(buffered))
                buffered += chunk
            head, buffered = buffered.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            while len(buffered) < length:
                chunk = sock.recv(65536)
                if not chunk: raise SystemExit("closed in a body")
                buffered += chunk
            body, buffered = buffered[:length], buffered[length:]
            return {"status": int(lines[0].split(" ")[1]), "headers": headers, "body": body.decode()}

        devices = "/v1/apps/%s/devices/" % app
        if mode == "sequence":
            requests = [
                request("PUT", devices + t1, register, '{"environment":"sandbox","locale":"fr_FR","tags":["a"]}'),
                request("PUT", devices + t1, register, '{"environment":"sandbox","tags":["b"]}'),
                request("PUT", devices + t1, register, '{"userId":"ann"}'),
                request("PUT", devices + t2, send, '{"userId":"ann","kind":"device"}'),
                request("PUT", devices + t1 + "?source=launch", register, '{"appVersion":"2.0"}'),
                request("PUT", devices + t1, register, '{"bogus":1}'),
                request("PUT", devices + t1, register, 'not json'),
                request("PUT", devices + "zz", register, '{}'),
                request("PUT", devices + t1, None, '{}'),
                request("PUT", devices + t1, "hk_0123456789abcdef_" + "0" * 64, '{}'),
                request("PUT", "/v1/apps/other/devices/" + t1, register, '{}'),
                request("PUT", devices + t1, register, '{"kind":"liveactivity"}'),
                request("PUT", devices + t1, register, '{"locale":"' + "x" * 70000 + '"}'),
                request("PUT", devices.upper() + t1, register, '{}'),
            ]
            for r in requests:
                sock.sendall(r)
                print(json.dumps(answer()))
        elif mode == "half-close":
            # A client that sends its requests and closes its side: every answer still comes, in order.
            requests = [
                request("PUT", devices + t3, register, '{"environment":"sandbox"}'),
                request("GET", "/livez"),
                request("PUT", devices + t4, register, '{"locale":"de_DE"}'),
            ]
            sock.sendall(b"".join(requests))
            sock.shutdown(socket.SHUT_WR)
            for _ in requests:
                print(json.dumps(answer()))
        elif mode == "pipelined":
            requests = [
                request("PUT", devices + t3, register, '{"environment":"sandbox"}'),
                request("GET", "/livez"),
                request("PUT", devices + t4, register, '{"locale":"de_DE"}'),
                request("PUT", devices + t3, register, '{"bogus":1}'),
                request("GET", devices + t4, send),
            ]
            sock.sendall(b"".join(requests))
            for _ in requests:
                print(json.dumps(answer()))
        """#

    struct Answer: Equatable, CustomStringConvertible {
        var status: Int
        /// Every header but `Date`.
        var headers: [String: String]
        /// The JSON, with the device's times (which differ from server to server) left out.
        var body: String

        var description: String { "\(self.status) \(self.headers) \(self.body)" }
    }

    /// Starts a server (with or without the lane), makes `app` (and `other`) with a register
    /// and a send key, runs the client's `mode` and returns its answers and the lane's count of
    /// answered registrations for `app` over the run (each run's app is its own: the metrics are the process's).
    func run(_ mode: String, app: String, lane: Bool) async throws -> (answers: [Answer], answered: Int) {
        let directory = try TemporaryDirectory(prefix: "herald-lane")
        defer { directory.remove() }
        var configuration = ServerTests.configuration(directory)
        configuration.metrics = ServerDocumentTests.registry
        configuration.registrationLane = lane
        return try await withHeraldServer(configuration: configuration) { server in
            let api = ServerTests.HTTP(base: "http://127.0.0.1:\(server.port)")
            let admin = try #require(server.initialAdminKey)
            for app in [app, "other"] {
                #expect(try await api.call("POST", "/v1/apps", key: admin, json: #"{"id":"\#(app)","bundleId":"com.example.\#(app)"}"#).status == 201)
            }
            let register = try await api.call("POST", "/v1/keys", key: admin, json: #"{"scope":"register","appId":"\#(app)"}"#)
            let send = try await api.call("POST", "/v1/keys", key: admin, json: #"{"scope":"send","appId":"\#(app)"}"#)
            let metrics = "http://127.0.0.1:\(try #require(server.metricsPort))/metrics"
            let before = try await Self.answered(metrics, app: app)
            let output = try await ProcessRunner.run(
                "python3",
                [
                    "-c", Self.client, mode, String(server.port), app, try #require(register.body["key"] as? String),
                    try #require(send.body["key"] as? String),
                ]
            ).standardOutput
            let answers = try output.split(separator: "\n").map { line in
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                var headers = try #require(object["headers"] as? [String: String])
                headers["date"] = nil
                var body = try #require(object["body"] as? String)
                if var json = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] {
                    json["createdAt"] = nil
                    json["lastRegisteredAt"] = nil
                    body = String(decoding: try JSONSerialization.data(withJSONObject: json, options: .sortedKeys), as: UTF8.self)
                }
                return Answer(status: try #require(object["status"] as? Int), headers: headers, body: body)
            }
            return (answers, try await Self.answered(metrics, app: app) - before)
        }
    }

    /// `herald_registration_lane_total{app,outcome="answered"}` at `/metrics` (0 when absent).
    static func answered(_ base: String, app: String) async throws -> Int {
        let text = try await ProcessRunner.run("curl", ["-s", base]).standardOutput
        let name = #"herald_registration_lane_total{app="\#(app)",outcome="answered"} "#
        let line = text.split(separator: "\n").first { $0.hasPrefix(name) }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int(Double($0) ?? -1) } ?? 0
    }

    @Test("the lane answers every registration, and every request it hands on, as the router alone does")
    func sameAnswers() async throws {
        let routed = try await self.run("sequence", app: "routed", lane: false)
        let laned = try await self.run("sequence", app: "laned", lane: true)
        #expect(routed.answers.map(\.status) == [200, 200, 403, 200, 200, 400, 400, 400, 401, 401, 403, 400, 400, 404])
        #expect(laned.answers.count == routed.answers.count)
        for (index, (lane, router)) in zip(laned.answers, routed.answers).enumerated() {
            #expect(lane == router, "request \(index + 1): the lane's \(lane), the router's \(router)")
        }
        // The lane answered the four registrations (one with a query) and the one its store
        // refused; the rest went on to the router (and a server without the lane counts none).
        #expect(laned.answered == 5)
        #expect(routed.answered == 0)
    }

    @Test("answers leave in the order of their requests when a client pipelines registrations and other requests")
    func pipelined() async throws {
        let result = try await self.run("pipelined", app: "piped", lane: true)
        #expect(result.answers.map(\.status) == [200, 204, 200, 400, 200], "\(result.answers)")
        #expect(result.answers.last?.body.contains(#""locale":"de_DE""#) == true, "the last answer is the device the third request registered")
        // The first registration is the lane's (the connection is new). The second is the lane's
        // only if it arrived after the router had answered `/livez`; else the router's.
        #expect((1...2).contains(result.answered))
    }
}

extension RegistrationLaneTests {
    @Test("a client that closes its side after sending gets every answer, in order")
    func halfClose() async throws {
        let result = try await self.run("half-close", app: "halved", lane: true)
        #expect(result.answers.map(\.status) == [200, 204, 200], "\(result.answers)")
        #expect(result.answered >= 1)
    }

    /// Counts the reads that reach it from the handlers after it.
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = Never
        var reads = 0

        func read(context: ChannelHandlerContext) {
            self.reads += 1
            context.read()
        }
    }

    @Test("reads wait while the connection cannot take more writes, and while a request waits behind the lane's answer")
    func backpressure() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-lane-pressure")
        defer { directory.remove() }
        let store = try await SQLiteStore(path: directory.path + "/herald.sqlite")
        let clock = SystemEpochClock()
        let channel = EmbeddedChannel()
        let lane = RegistrationLane(
            authenticator: APIKeyAuthenticator(
                store: store, clock: clock, usage: KeyUsage(), failures: AuthenticationFailures(limit: nil), limits: RateLimits()),
            devices: DevicesController(store: store, secrets: try SecretBox(masterKey: SecretBox.generateMasterKey()), clock: clock),
            eventLoopGroup: channel.eventLoop, refuseUndeclaredStatuses: false, serverName: "herald",
            logger: Logger(label: "test"))
        let counter = ReadCounter()
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addHandler(RegistrationLaneHandler(lane: lane, channel: channel))
        channel.read()
        #expect(counter.reads == 1, "a writable connection is read")
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.read()
        #expect(counter.reads == 1, "the read waits while the connection cannot take writes")
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(counter.reads == 2, "and happens once it can")
        // A registration the lane answers (its queue is not read here, so the answer never
        // comes): the connection reads on until something arrives behind it, then waits.
        let token = RegistrationLaneStateMachineTests.token
        try channel.writeInbound(RegistrationLaneStateMachineTests.head(.put, "/v1/apps/app/devices/\(token)"))
        try channel.writeInbound(HTTPRequestPart.end(nil))
        channel.read()
        #expect(counter.reads == 3, "a registration being answered with nothing behind it does not stop reads")
        try channel.writeInbound(RegistrationLaneStateMachineTests.head(.get, "/v1/apps"))
        channel.read()
        #expect(counter.reads == 3, "a request held behind it does")
        #expect(try channel.readInbound(as: HTTPRequestPart.self) == nil, "and is held, not passed on")
        _ = try channel.finish()
    }
}

/// The lane's state machine alone: what it takes, what it hands on, and in which order.
@Suite struct RegistrationLaneStateMachineTests {
    static let token = String(repeating: "ab", count: 32)

    static func head(_ method: HTTPRequest.Method, _ path: String, key: Bool = true) -> HTTPRequestPart {
        var fields = HTTPFields()
        if key { fields[.authorization] = "Bearer hk_x" }
        return .head(HTTPRequest(method: method, scheme: nil, authority: "127.0.0.1", path: path, headerFields: fields))
    }

    /// An action's name, and the request or parts it carries.
    static func named(_ action: RegistrationLaneHandler.StateMachine.ReadAction) -> String {
        switch action {
        case .forward: return "forward"
        case .keep: return "keep"
        case .submit: return "submit"
        case .forwardParts(let parts): return "forward \(parts.count) parts"
        }
    }

    @Test("a registration is read whole and submitted; a request behind router requests waits for their answers")
    func takesRegistrations() throws {
        var machine = RegistrationLaneHandler.StateMachine(peer: "127.0.0.1")
        let registration = Self.head(.put, "/v1/apps/demo/devices/\(Self.token)")
        #expect(Self.named(machine.read(registration)) == "keep")
        #expect(Self.named(machine.read(.body(ByteBuffer(string: "{}")))) == "keep")
        let submitted = machine.read(.end(nil))
        guard case .submit(let request) = submitted else {
            Issue.record("the end submits the request, not \(Self.named(submitted))")
            return
        }
        #expect(request.appID == "demo" && request.token == Self.token && request.authorization == "Bearer hk_x" && request.peer == "127.0.0.1")
        #expect(String(buffer: request.body) == "{}")
        #expect(machine.isAnswering)
        machine.answered()
        // Two requests for the router: a registration pipelined behind them is the router's too.
        #expect(Self.named(machine.read(Self.head(.get, "/livez"))) == "forward")
        #expect(Self.named(machine.read(.end(nil))) == "forward")
        #expect(Self.named(machine.read(registration)) == "forward")
        #expect(Self.named(machine.read(.end(nil))) == "forward")
        machine.routerAnswered()
        #expect(Self.named(machine.read(registration)) == "forward", "one router request is still unanswered")
        #expect(Self.named(machine.read(.end(nil))) == "forward")
        machine.routerAnswered()
        machine.routerAnswered()
        // Once the router has answered all, the lane takes registrations again.
        #expect(Self.named(machine.read(registration)) == "keep")
    }

    @Test("a body over the lane's limit, and heads the lane does not take, go to the router")
    func handsOn() throws {
        var machine = RegistrationLaneHandler.StateMachine(peer: "127.0.0.1")
        _ = machine.read(Self.head(.put, "/v1/apps/demo/devices/\(Self.token)"))
        #expect(Self.named(machine.read(.body(ByteBuffer(repeating: 0x20, count: RegistrationLane.bodyLimit - 1)))) == "keep")
        let over = machine.read(.body(ByteBuffer(repeating: 0x20, count: 2)))
        #expect(Self.named(over) == "forward 3 parts", "the head and both pieces of the body go to the router")
        #expect(Self.named(machine.read(.end(nil))) == "forward")
        machine.routerAnswered()
        // After a request that closes the connection, the router reads nothing more: nor does the lane.
        var close = HTTPFields()
        close[.connection] = "close"
        #expect(
            Self.named(machine.read(.head(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/livez", headerFields: close))))
                == "forward")
        #expect(Self.named(machine.read(.end(nil))) == "forward")
        machine.routerAnswered()
        #expect(Self.named(machine.read(Self.head(.put, "/v1/apps/demo/devices/\(Self.token)"))) == "forward")

        let refused = [
            Self.head(.put, "/v1/apps/demo/devices/\(Self.token)", key: false), Self.head(.put, "/v1/apps/demo/devices/%61b"),
            Self.head(.put, "/v1/apps/demo/devices/\(Self.token)/x"), Self.head(.put, "/v1/apps//devices/\(Self.token)"),
            Self.head(.post, "/v1/apps/demo/devices/\(Self.token)"), Self.head(.put, "/v1/apps/demo/device/\(Self.token)"),
            Self.head(.put, "/v1/apps/demo/devices/"), Self.head(.put, "/v1/apps/demo/devices/\(Self.token)#"),
        ]
        for case .head(let request) in refused {
            #expect(RegistrationLane.registration(request) == nil, "\(request.method) \(request.path ?? "")")
        }
        if case .head(let query) = Self.head(.put, "/v1/apps/my-app.v2/devices/\(Self.token)?a=b") {
            #expect(RegistrationLane.registration(query)?.appID == "my-app.v2")
            #expect(RegistrationLane.registration(query)?.token == Self.token)
        }
    }

    @Test("the Date header's text is the HTTP date of the second")
    func dates() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        for second: Int64 in [0, 59, 951_782_400, 951_868_799, 1_709_164_800, 1_795_945_309, 4_102_444_800, 4_107_542_399] {
            #expect(HTTPDateCache.text(second: second) == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(second))))
        }
    }
}

/// The lane's own reading of a registration's body, against the API's decoder.
@Suite struct RegistrationBodyTests {
    static let fields = [
        "kind", "environment", "userId", "tags", "locale", "timeZone", "appVersion", "platform", "activityId", "attributesType", "publicKey",
        "publicKeyType", "userAssertion",
    ]

    @Test("a body the lane reads, the API's decoder reads alike; one it does not read, the decoder refuses")
    func sameAsDecoder() throws {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next(_ bound: Int) -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(bound))
        }
        let names = Self.fields + Self.fields + ["unknown", "Kind", "tags "]
        let values: [JSONValue] = [
            .null, .string(""), .string("en_US"), .string("\u{1}é"), .int(1), .bool(true), .double(0.5), .array([]), .array([.string("a")]),
            .array([.string("a"), .string("b")]), .array([.int(1)]), .array([.null]), .object([]),
        ]
        var read = 0
        for _ in 0..<5000 {
            let json = JSONValue.object((0..<next(7)).map { _ in (names[next(names.count)], values[next(values.count)]) })
            let lane = DeviceRegistrationRequest(plainJSON: json)
            let decoded = try? APIRequestDecoder.decode(DeviceRegistrationRequest.self, json: json)
            #expect(lane == decoded, "\(json.jsonString)")
            if lane != nil { read += 1 }
        }
        #expect(read > 500, "the lane reads the plain bodies itself (\(read) of 5,000)")
        #expect(DeviceRegistrationRequest(plainJSON: .array([])) == nil)

        // Every field of the request, each read: a field added to the type and not to the lane's
        // reading stays nil here.
        let full = JSONValue.object(Self.fields.map { ($0, $0 == "tags" ? .array([.string("t")]) : .string($0)) })
        let request = try #require(DeviceRegistrationRequest(plainJSON: full))
        #expect(request == (try APIRequestDecoder.decode(DeviceRegistrationRequest.self, json: full)))
        for field in Mirror(reflecting: request).children {
            let value = Mirror(reflecting: field.value)
            #expect(value.displayStyle != .optional || !value.children.isEmpty, "\(field.label ?? "?") is read")
        }
    }
}

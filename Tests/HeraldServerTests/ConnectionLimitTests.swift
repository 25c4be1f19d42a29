// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import HeraldTesting
import NIOCore
import Testing

@testable import HeraldServer

/// The API's connection limits through real sockets: a raw TCP client (python3) that sends half a
/// request head, stays idle after an answer, or opens more connections than the cap. Each waits
/// for the server to close the connection; its 30 s socket timeout is only a hang guard.
@Suite(.heavy) struct ConnectionLimitTests {
    /// `python3 -c client <mode> <port>` prints what it saw: `EOF <first line>` when the server
    /// closed the connection, `HANG` when the guard ran out first.
    static let client = #"""
        import socket, sys, http.client
        mode, port = sys.argv[1], int(sys.argv[2])

        def until_closed(s):
            data = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        return "EOF " + data.decode("latin-1").split("\r\n")[0]
                    data += chunk
            except socket.timeout:
                return "HANG " + data.decode("latin-1").split("\r\n")[0]
            except ConnectionResetError:
                return "EOF reset " + data.decode("latin-1").split("\r\n")[0]

        def connect():
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            return s

        if mode == "half-head":
            s = connect()
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            print(until_closed(s))
        elif mode == "silent":
            s = connect()
            print(until_closed(s))
        elif mode == "idle":
            s = connect()
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            print(until_closed(s))
        elif mode == "cap":
            # Fill the cap (2) with connections the server has answered, so it has counted them.
            held = []
            for _ in range(2):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                held.append(c)
            s = connect()
            try:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            print("third:", until_closed(s))
            # One closes: a new connection is served again once the server has noticed.
            held[0].close()
            while True:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                try:
                    c.request("GET", "/health")
                    r = c.getresponse()
                    r.read()
                    print("after one closed:", r.status)
                    break
                except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                    c.close()
        """#

    func run(_ mode: String, configure: @escaping @Sendable (inout ServerConfiguration) -> Void) async throws -> String {
        let directory = try TemporaryDirectory(prefix: "herald-limits")
        defer { directory.remove() }
        var configuration = ServerTests.configuration(directory)
        configure(&configuration)
        return try await withHeraldServer(configuration: configuration) { server in
            let result = try await ProcessRunner.run("python3", ["-c", Self.client, mode, "\(server.port)"], timeout: 120)
            #expect(result.exitCode == 0, "\(result.standardOutput)")
            return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test("a request head that does not arrive in time is answered 408 and its connection closed")
    func slowHead() async throws {
        let seen = try await self.run("half-head") { configuration in
            configuration.requestHeadTimeout = .milliseconds(200)
            configuration.idleTimeout = nil
        }
        #expect(seen == "EOF HTTP/1.1 408 Request Timeout")
    }

    @Test("an idle keep-alive connection is closed after its answer")
    func idle() async throws {
        let seen = try await self.run("idle") { configuration in
            configuration.requestHeadTimeout = nil
            configuration.idleTimeout = .milliseconds(200)
        }
        #expect(seen == "EOF HTTP/1.1 200 OK")
    }

    @Test("a new connection that sends nothing is closed after the idle timeout")
    func silent() async throws {
        let seen = try await self.run("silent") { configuration in
            configuration.requestHeadTimeout = nil
            configuration.idleTimeout = .milliseconds(200)
        }
        #expect(seen == "EOF")
    }

    @Test("a connection over the cap is closed at once; one closing makes room")
    func cap() async throws {
        let seen = try await self.run("cap") { configuration in
            configuration.maxConnections = 2
            configuration.idleTimeout = nil
        }
        let lines = seen.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix("third: EOF") == true, "\(lines)")
        #expect(lines.last == "after one closed: 200")
    }

    @Test("the head deadline runs from a request's first byte to its head, and not while a request is answered")
    func deadline() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var deadline = RequestHeadDeadline(timeout: .seconds(10))
        #expect(deadline.timerFired(now: start) == .none)
        #expect(deadline.bytesRead(now: start) == .setTimer(start + .seconds(10)))
        #expect(deadline.bytesRead(now: start + .seconds(1)) == .none)
        #expect(deadline.timerFired(now: start + .seconds(10)) == .close)
        deadline.headRead()
        // Body bytes and a pipelined request's head while the first is answered.
        #expect(deadline.bytesRead(now: start + .seconds(11)) == .none)
        deadline.headRead()
        deadline.responseEnded()
        #expect(deadline.bytesRead(now: start + .seconds(12)) == .none)
        #expect(deadline.timerFired(now: start + .seconds(12)) == .none)
        deadline.responseEnded()
        #expect(deadline.state == .waiting)
        #expect(deadline.timer == nil)
        #expect(deadline.bytesRead(now: start + .seconds(13)) == .setTimer(start + .seconds(23)))
    }

    @Test("one timer serves a keep-alive connection's requests: heads in time leave it set, a late one is caught when it fires")
    func lazyTimer() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var deadline = RequestHeadDeadline(timeout: .seconds(10))
        #expect(deadline.bytesRead(now: start) == .setTimer(start + .seconds(10)))
        // Many requests answered before the timer fires: no timer set or cancelled for any of them.
        for second in 1...8 {
            deadline.headRead()
            deadline.responseEnded()
            #expect(deadline.bytesRead(now: start + .seconds(Int64(second))) == .none)
        }
        // The eighth request's head is still being read when the timer fires: it has until second 18.
        #expect(deadline.timerFired(now: start + .seconds(10)) == .setTimer(start + .seconds(18)))
        #expect(deadline.timerFired(now: start + .seconds(18)) == .close)
        // A head that completes leaves nothing for the timer to do, and it is not set again until the next request.
        var quiet = RequestHeadDeadline(timeout: .seconds(10))
        #expect(quiet.bytesRead(now: start) == .setTimer(start + .seconds(10)))
        quiet.headRead()
        quiet.responseEnded()
        #expect(quiet.timerFired(now: start + .seconds(10)) == .none)
        #expect(quiet.timer == nil)
        #expect(quiet.bytesRead(now: start + .seconds(30)) == .setTimer(start + .seconds(40)))
    }

    @Test("the cap counts open connections and logs only the first refusal of a run")
    func connectionCap() {
        var cap = ConnectionCap(limit: 2)
        #expect(cap.opened() == .accept)
        #expect(cap.opened() == .accept)
        #expect(cap.opened() == .refuse(firstSinceAccepting: true))
        #expect(cap.opened() == .refuse(firstSinceAccepting: false))
        cap.closed()
        #expect(cap.open == 1)
        #expect(cap.opened() == .accept)
        #expect(cap.opened() == .refuse(firstSinceAccepting: true))
    }
}

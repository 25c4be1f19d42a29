// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// The emulator's faults against the client: nothing lost, nothing sent twice that APNs
/// answered, failures classed right, deadlines kept.
@Suite(.heavy) struct ClientResilienceTests {
    /// Sends `count` alerts in bulk to one fresh device after arming `fault`; returns the
    /// outcomes and how many notifications reached the device (beyond the warm-up).
    func bulk(
        _ fixture: EmulatorFixture, count: Int, fault: String, configure: (inout APNSClientConfiguration) -> Void = { _ in }
    )
        async throws -> (outcomes: [APNSOutcome], delivered: Int)
    {
        let token = try await fixture.createDevice()
        let requests = try (0..<count).map { _ in try alert(token) }
        let outcomes = try await fixture.withClient(configure: configure) { client async throws in
            try await client.send(try alert(token))  // ramped and warm
            try await fixture.control("POST", "/v1/faults", json: fault)
            return try await client.sendAll(requests)
        }
        return (outcomes, try await fixture.counter("delivered") - 1)
    }

    @Test("REFUSED_STREAM mid-flight: the refused push is resent, none is lost or doubled")
    func refusedStream() async throws {
        try await withEmulatorFixture { fixture in
            let (outcomes, delivered) = try await self.bulk(fixture, count: 100, fault: #"{"type":"refuse-stream","count":3}"#)
            #expect(outcomes.allSatisfy { (try? $0.result.get()) != nil })
            #expect(delivered == 100)
            #expect(try await fixture.counter("refusedStreams") == 3)
        }
    }

    @Test("GOAWAY mid-flight: streams above last-stream-id go out on a new connection, none doubled")
    func goAway() async throws {
        try await withEmulatorFixture { fixture in
            let (outcomes, delivered) = try await self.bulk(fixture, count: 200, fault: #"{"type":"goaway","reason":"Shutdown"}"#)
            #expect(outcomes.count == 200)
            #expect(outcomes.allSatisfy { (try? $0.result.get()) != nil })
            #expect(delivered == 200)
            #expect(try await fixture.counter("connections") == 2)
        }
    }

    @Test("a dropped connection: a written, unanswered push is reported as an unknown outcome, not resent; the next goes on a new connection")
    func dropped() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.withClient { client async throws in
                try await client.send(try alert(token))
                try await fixture.control("POST", "/v1/faults", json: #"{"type":"drop"}"#)
                let error = try #require(await clientError { try await client.send(try alert(token)) }, "expected an unknown outcome")
                #expect(error.code == .unknownOutcome)
                #expect(error.outcomeUnknown)
                #expect(try await client.send(try alert(token)).apnsID != nil)
            }
            // The emulator drops the connection before processing: the dropped push never arrived,
            // and the client did not send it again.
            #expect(try await fixture.inbox(token).count == 2)
            #expect(try await fixture.counter("connections") == 2)
        }
    }

    @Test("a lowered stream limit: streams beyond it are refused, resent, and all arrive once")
    func loweredStreamLimit() async throws {
        try await withEmulatorFixture { fixture in
            let (outcomes, delivered) = try await self.bulk(fixture, count: 150, fault: #"{"type":"stream-limit","limit":5}"#)
            #expect(outcomes.allSatisfy { (try? $0.result.get()) != nil })
            #expect(delivered == 150)
        }
    }

    @Test(
        "429, 500 and 503 come back as rejections to retry later; the client does not retry them itself",
        arguments: [
            (429, "TooManyRequests"), (500, "InternalServerError"), (503, "ServiceUnavailable"),
        ])
    func serverErrors(status: Int, reason: String) async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"status","status":\#(status)}"#)
            try await fixture.withClient { client async throws in
                let error = try #require(await clientError { try await client.send(try alert(token)) }, "expected a rejection")
                #expect(error.code == .rejected)
                #expect(error.status == status)
                #expect(error.reason?.rawValue == reason)
                #expect(error.failureClass == .retryLater)
                #expect(try await client.send(try alert(token)).apnsID != nil)
            }
            #expect(try await fixture.inbox(token).count == 1)
        }
    }

    @Test("a stalled answer fails at the deadline, and the connection keeps serving")
    func deadline() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            // 20 s: enough for the sends that must succeed (a TLS handshake included) on a machine
            // loaded by every suite at once (a browser among them; 5 s was not, on a 2-core host
            // in 2026-11), far below the stalled 60 s.
            try await fixture.withClient(configure: { $0.requestTimeout = .seconds(20) }) { client async throws in
                try await client.send(try alert(token))
                try await fixture.control("POST", "/v1/faults", json: #"{"type":"latency","milliseconds":60000}"#)
                let start = ContinuousClock.now
                let error = try #require(await clientError { try await client.send(try alert(token)) }, "expected the deadline to pass")
                #expect(error.code == .deadlineExceeded)
                #expect(error.failureClass == .retryLater)
                #expect(ContinuousClock.now - start < .seconds(45), "the answer would take 60 s")
                #expect(try await client.send(try alert(token)).apnsID != nil)
            }
        }
    }

    @Test("nothing listening: requests fail by their deadline with the connect error, without hanging")
    func unreachable() async throws {
        try await withEmulatorFixture { fixture in
            // A port bound but not listening: connections to it are refused, and no other test's
            // listener can take it meanwhile.
            let (socket, port) = try refusingPort()
            defer { close(socket) }
            var configuration = fixture.clientConfiguration(port: port)
            configuration.requestTimeout = .milliseconds(600)
            configuration.connectTimeout = .seconds(30)
            let start = ContinuousClock.now
            try await withAPNSClient(configuration: configuration) { client async throws in
                let error = try #require(
                    await clientError { try await client.send(try alert(String(repeating: "a", count: 64))) }, "expected a failure")
                #expect(error.code == .deadlineExceeded)
                #expect(error.message.contains("cannot connect"))
            }
            // Bounds for a loaded machine running every suite at once; a hang would never end.
            #expect(ContinuousClock.now - start < .seconds(15))
        }
    }

    @Test("provider token refreshed across five hours of moved clock on one connection, never too often")
    func tokenRefresh() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.withClient { client async throws in
                for _ in 0..<12 {
                    try await client.send(try alert(token))
                    fixture.clock.advance(seconds: 25 * 60)
                    try await Task.sleep(for: .milliseconds(400))  // a sweep passes: the token is renewed off the request path
                }
                try await client.send(try alert(token))
            }
            let counters = try await fixture.counters()
            #expect((counters["rejected"] as? [String: Int])?.isEmpty == true, "no TooManyProviderTokenUpdates, no ExpiredProviderToken: \(counters)")
            #expect(counters["connections"] as? Int == 1)
            #expect(try await fixture.inbox(token).count == 13)
        }
    }

    @Test("ExpiredProviderToken: a fresh token and one retry, and the push arrives")
    func expiredToken() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.withClient { client async throws in
                try await client.send(try alert(token))
                fixture.clock.advance(seconds: 2 * 3600)
                #expect(try await client.send(try alert(token)).apnsID != nil)
            }
            let rejected = (try await fixture.counters())["rejected"] as? [String: Int] ?? [:]
            #expect(rejected["TooManyProviderTokenUpdates"] == nil)
            #expect((rejected["ExpiredProviderToken"] ?? 0) <= 1)
            #expect(try await fixture.inbox(token).count == 2)
        }
    }

    @Test("an idle connection is kept alive with PING and keeps serving")
    func ping() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.withClient(configure: { $0.pingInterval = .milliseconds(100) }) { client async throws in
                try await client.send(try alert(token))
                // Idle, the client PINGs: the wait ends when the emulator has answered two (300 s
                // is a hang guard; a client that never PINGs fails here).
                let deadline = ContinuousClock.now + .seconds(300)
                while fixture.emulator.state.counters(now: fixture.clock.nowMilliseconds).pingsReceived < 2 {
                    try #require(ContinuousClock.now < deadline, "no two PINGs from an idle client after 300 s")
                    try await Task.sleep(for: .milliseconds(25))
                }
                try await client.send(try alert(token))
            }
            #expect(try await fixture.counter("pingsReceived") >= 2)
            #expect(try await fixture.counter("connections") == 1, "the PINGed connection served the second push: no reconnect")
            #expect(try await fixture.inbox(token).count == 2)
        }
    }
}

/// A TCP port on 127.0.0.1 that is bound (so nobody else gets it) but not listening, so
/// connections to it are refused. Close the returned descriptor when done.
func refusingPort() throws -> (Int32, Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

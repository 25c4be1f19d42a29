// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Connection behaviour seen through nghttp's frame log: SETTINGS, the stream ramp, GOAWAY.
@Suite(.heavy) struct ConnectionTests {
    /// The values of SETTINGS_MAX_CONCURRENT_STREAMS the server sent, in order.
    static func advertisedStreamLimits(_ log: String) -> [Int] {
        var limits: [Int] = []
        var inServerSettings = false
        for line in log.split(separator: "\n") {
            if line.contains("recv SETTINGS frame") {
                inServerSettings = !line.contains("flags=0x01")
                continue
            }
            if line.contains("] recv") || line.contains("] send") { inServerSettings = false }
            if inServerSettings, let range = line.range(of: "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):") {
                limits.append(Int(line[range.upperBound...].prefix { $0.isNumber }) ?? -1)
            }
        }
        return limits
    }

    static func nghttp(_ fixture: EmulatorFixture, path: String, headers: [(String, String)], extra: [String] = []) async throws -> String {
        var arguments = ["-v", "--no-verify-peer"] + extra
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        arguments += ["-d", try fixture.directory.write("body.json", #"{"aps":{"alert":"hi"}}"#)]
        arguments.append("https://127.0.0.1:\(fixture.emulator.ports[.development]!)\(path)")
        return try await ProcessRunner.run("nghttp", arguments).standardOutput
    }

    @Test("token connections start at one stream and get 1000 after the first authenticated request")
    func streamRamp() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let log = try await Self.nghttp(fixture, path: "/3/device/\(token)", headers: try fixture.alertHeaders())
            #expect(Self.advertisedStreamLimits(log) == [1, 1000])
            #expect(log.contains(":status: 200"))
            #expect(log.contains("SETTINGS_MAX_FRAME_SIZE(0x05):16384"))
            #expect(log.contains("SETTINGS_MAX_HEADER_LIST_SIZE(0x06):8000"))
        }
    }

    @Test("a request that fails authentication does not raise the limit")
    func noRampWithoutAuthentication() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let headers = try fixture.alertHeaders().filter { $0.0 != "authorization" }
            let log = try await Self.nghttp(fixture, path: "/3/device/\(token)", headers: headers)
            #expect(Self.advertisedStreamLimits(log) == [1])
            #expect(log.contains("MissingProviderToken"))
        }
    }

    @Test("the raised limit follows the configuration")
    func configuredLimit() async throws {
        try await withEmulatorFixture(configure: { $0.maxConcurrentStreams = 500 }) { fixture in
            let token = try await fixture.createDevice()
            let log = try await Self.nghttp(fixture, path: "/3/device/\(token)", headers: try fixture.alertHeaders())
            #expect(Self.advertisedStreamLimits(log) == [1, 500])
        }
    }

    @Test("h2load with 100 streams per connection: every request answered once the limit is raised")
    func manyStreams() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            var arguments = ["-n", "2000", "-c", "2", "-m", "100"]
            for (name, value) in try fixture.alertHeaders() { arguments += ["-H", "\(name): \(value)"] }
            arguments += ["-d", try fixture.directory.write("body.json", #"{"aps":{"alert":"hi"}}"#)]
            arguments.append("https://127.0.0.1:\(fixture.emulator.ports[.development]!)/3/device/\(token)")
            let output = try await ProcessRunner.run("h2load", arguments, timeout: 120).standardOutput
            #expect(output.contains("2000 succeeded"), "\(output)")
            #expect(output.contains("2000 2xx"))
            let counters = try await fixture.counters()
            #expect(counters["accepted"] as? Int == 2000)
            #expect(counters["delivered"] as? Int == 2000)
            #expect(try await fixture.inbox(token).count == 100)  // the inbox keeps the newest 100
        }
    }

    @Test("TLS without ALPN speaks HTTP/2 with prior knowledge; PING is answered and counted")
    func priorKnowledgeAndPing() async throws {
        try await withEmulatorFixture { fixture in
            let ping: [UInt8] = [0, 0, 8, RawFrame.pingType, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
            let (_, frames) = try await RawHTTP2.exchange(
                port: fixture.emulator.ports[.development]!, tls: true, caFile: fixture.caFile, send: RawHTTP2.preface + ping,
                readFor: 15, offerALPN: false, until: (RawFrame.pingType, 0)
            )
            #expect(frames.first?.type == RawFrame.settingsType)
            let pong = frames.first { $0.type == RawFrame.pingType }
            #expect(pong?.flags == 1)
            #expect(pong?.payload == [1, 2, 3, 4, 5, 6, 7, 8])
            // Counted as it was read, before its ACK went out: so before the ACK arrived here.
            #expect((try await fixture.counters())["pingsReceived"] as? Int == 1)
        }
    }

    @Test("streams beyond the acknowledged limit are refused with RST_STREAM(REFUSED_STREAM)")
    func excessStreamsRefused() async throws {
        try await withEmulatorFixture(configure: { $0.listeners.append(.init(environment: .development, port: 0, tls: false)) }) { fixture in
            let ack: [UInt8] = [0, 0, 0, 4, 1, 0, 0, 0, 0]  // acknowledges the server's SETTINGS (limit 1)
            func open(_ stream: UInt8) -> [UInt8] { [0, 0, 3, 1, 0x04, 0, 0, 0, stream, 0x83, 0x86, 0x84] }
            let (_, frames) = try await RawHTTP2.exchange(
                port: fixture.emulator.cleartextPorts[.development]!, tls: false, send: RawHTTP2.preface + ack + open(1) + open(3),
                readFor: 15, until: (RawFrame.rstStreamType, 3)
            )
            let resets = frames.filter { $0.type == RawFrame.rstStreamType }
            #expect(resets.map(\.streamID) == [3])
            #expect(resets.first?.payload == [0, 0, 0, 7])
            #expect(!frames.contains { $0.type == RawFrame.goAwayType }, "the connection stays up")
            #expect((try await fixture.counters())["refusedStreams"] as? Int == 1)
        }
    }

    @Test("a header block split over HEADERS and CONTINUATION is read whole")
    func continuation() async throws {
        try await withEmulatorFixture(configure: { $0.listeners.append(.init(environment: .development, port: 0, tls: false)) }) { fixture in
            let headers: [UInt8] = [0, 0, 2, 1, 0x01, 0, 0, 0, 1, 0x83, 0x86]  // END_STREAM, no END_HEADERS
            let continuation: [UInt8] = [0, 0, 1, 9, 0x04, 0, 0, 0, 1, 0x84]  // END_HEADERS
            let (_, frames) = try await RawHTTP2.exchange(
                port: fixture.emulator.cleartextPorts[.development]!, tls: false, send: RawHTTP2.preface + headers + continuation,
                readFor: 15, until: (0, 1)
            )
            let body = frames.first { $0.type == 0 && $0.streamID == 1 }
            #expect(body.map { String(decoding: $0.payload, as: UTF8.self) } == #"{"reason":"BadPath"}"#)
            // Anything but CONTINUATION in the middle of a header block is a connection error.
            let broken = try await RawHTTP2.exchange(
                port: fixture.emulator.cleartextPorts[.development]!, tls: false,
                send: RawHTTP2.preface + headers + [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8], readFor: 15,
                until: (RawFrame.goAwayType, 0)
            )
            #expect(broken.frames.compactMap(\.goAway).first?.errorCode == 1)
        }
    }

    @Test("the validation order can be changed")
    func validationOrder() async throws {
        // By default credentials are checked before the body; put the body first and an empty,
        // unauthenticated request gets PayloadEmpty instead of MissingProviderToken.
        for (order, expected) in [
            (APNSEmulator.Configuration.testing().validationOrder, "MissingProviderToken"),
            ([.method, .path, .payload, .authentication], "PayloadEmpty"),
        ] as [([APNSEmulator.ValidationStage], String)] {
            try await withEmulatorFixture(configure: { $0.validationOrder = order }) { fixture in
                let token = try await fixture.createDevice()
                let response = try await fixture.development.send(
                    CurlRequest(path: "/3/device/\(token)", headers: [("apns-topic", "com.example.app")]))
                #expect(response.reason == expected)
            }
        }
    }

    @Test("idle connections get GOAWAY with IdleTimeout")
    func idleTimeout() async throws {
        try await withEmulatorFixture(configure: { $0.idleTimeoutSeconds = 1 }) { fixture in
            let (closed, frames) = try await RawHTTP2.exchange(
                port: fixture.emulator.ports[.development]!, tls: true, caFile: fixture.caFile, send: RawHTTP2.preface, readFor: 4
            )
            #expect(closed)
            let goAway = frames.compactMap(\.goAway).first
            #expect(goAway?.errorCode == 0)
            #expect(goAway?.debug == #"{"reason":"IdleTimeout"}"#)
        }
    }

    @Test("stopping the emulator sends GOAWAY Shutdown to open connections")
    func shutdownGoAway() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var configuration = APNSEmulator.Configuration.testing(tls: false)
        configuration.dataDirectory = directory.path
        let emulator = try APNSEmulator(configuration: configuration)
        try await emulator.start()
        let port = emulator.cleartextPorts[.development]!
        // Reads until the GOAWAY arrives (300 s is a hang guard, not a window).
        async let exchange = RawHTTP2.exchange(port: port, tls: false, send: RawHTTP2.preface, readFor: 300, until: (7, 0))
        // Stop once the peer is connected (the wait ends when it is; 300 s is a hang guard), then
        // a moment for its preface to land.
        let deadline = ContinuousClock.now + .seconds(300)
        while emulator.state.counters(now: 0).connections == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(25))
        }
        try await Task.sleep(for: .milliseconds(300))
        await emulator.stop()
        let (_, frames) = try await exchange
        #expect(frames.compactMap(\.goAway).first?.debug == #"{"reason":"Shutdown"}"#)
    }
}

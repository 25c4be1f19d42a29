// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Faults armed through the control API, observed by independent clients.
@Suite(.heavy) struct FaultTests {
    static let body = #"{"aps":{"alert":"Hello"}}"#

    func request(_ fixture: EmulatorFixture, _ token: String) throws -> CurlRequest {
        CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body)
    }

    @Test("status faults answer the next N requests, then normal service resumes")
    func statusFaults() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let armed = try await fixture.control("POST", "/v1/faults", json: #"{"type":"status","status":429,"count":2}"#)
            #expect(armed.status == 201)
            #expect(armed.json?["reason"] as? String == "TooManyRequests")
            let responses = try await fixture.development.send([
                try self.request(fixture, token), try self.request(fixture, token), try self.request(fixture, token),
            ])
            #expect(responses.map(\.status) == [429, 429, 200])
            #expect(responses[0].reason == "TooManyRequests")
            let counters = try await fixture.counters()
            #expect(counters["faultsInjected"] as? Int == 2)
            #expect(counters["accepted"] as? Int == 1)
            #expect(try await fixture.inbox(token).count == 1)
        }
    }

    @Test("a fraction of requests can fail")
    func fractionalFaults() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"status","status":500,"persistent":true,"probability":0.5}"#)
            let responses = try await fixture.development.send(Array(repeating: try self.request(fixture, token), count: 40))
            let failed = responses.filter { $0.status == 500 }.count
            #expect(failed > 5 && failed < 35, "\(failed) of 40 failed")
            #expect(responses.allSatisfy { $0.status == 500 || $0.status == 200 })
            #expect(try await fixture.control("DELETE", "/v1/faults").status == 200)
            #expect(try await fixture.development.send(self.request(fixture, token)).status == 200)
        }
    }

    @Test("latency delays the answer")
    func latency() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"latency","milliseconds":600}"#)
            let start = Date()
            #expect(try await fixture.development.send(self.request(fixture, token)).status == 200)
            #expect(Date().timeIntervalSince(start) >= 0.6)
            #expect((try await fixture.counters())["faultsInjected"] as? Int == 1)
            #expect((try await fixture.control("GET", "/v1/faults").json?["faults"] as? [Any])?.isEmpty == true, "a count-1 fault is used up")
        }
    }

    @Test("goaway leaves the request unanswered and closes the connection with a JSON reason")
    func goAway() async throws {
        try await withEmulatorFixture(configure: { $0.listeners.append(.init(environment: .development, port: 0, tls: false)) }) { fixture in
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"goaway","reason":"Shutdown"}"#)
            // HEADERS (END_STREAM | END_HEADERS) on stream 1: POST http "/" from HPACK's static
            // table, no credentials: the fault fires before any check.
            let headers: [UInt8] = [0, 0, 3, 1, 0x05, 0, 0, 0, 1, 0x83, 0x86, 0x84]
            let (closed, frames) = try await RawHTTP2.exchange(
                port: fixture.emulator.cleartextPorts[.development]!, tls: false, send: RawHTTP2.preface + headers, readFor: 3
            )
            #expect(closed)
            let goAway = frames.compactMap(\.goAway).first
            #expect(goAway?.lastStreamID == 0)
            #expect(goAway?.debug == #"{"reason":"Shutdown"}"#)
        }
    }

    @Test("drop closes the connection without an answer; the next connection works")
    func drop() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"drop"}"#)
            await #expect(throws: CurlError.self) { try await fixture.development.send(self.request(fixture, token)) }
            #expect(try await fixture.development.send(self.request(fixture, token)).status == 200)
        }
    }

    @Test("refuse-stream resets the stream with REFUSED_STREAM")
    func refuseStream() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"refuse-stream"}"#)
            let log = try await ConnectionTests.nghttp(fixture, path: "/3/device/\(token)", headers: try fixture.alertHeaders())
            #expect(log.contains("recv RST_STREAM frame"))
            #expect(log.contains("error_code=REFUSED_STREAM"))
            #expect((try await fixture.counters())["refusedStreams"] as? Int == 1)
        }
    }

    @Test("stream-limit lowers MAX_CONCURRENT_STREAMS on the connection and refuses unprocessed streams beyond it")
    func streamLimit() async throws {
        try await withEmulatorFixture(configure: { $0.listeners.append(.init(environment: .development, port: 0, tls: false)) }) { fixture in
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"stream-limit","limit":1}"#)
            // Streams 1 and 3 are opened and left mid-upload; stream 5 completes and trips the fault.
            func headers(_ stream: UInt8, endStream: Bool) -> [UInt8] {
                [0, 0, 3, 1, endStream ? 0x05 : 0x04, 0, 0, 0, stream, 0x83, 0x86, 0x84]
            }
            let (_, frames) = try await RawHTTP2.exchange(
                port: fixture.emulator.cleartextPorts[.development]!, tls: false,
                send: RawHTTP2.preface + headers(1, endStream: false) + headers(3, endStream: false) + headers(5, endStream: true),
                readFor: 15, until: (RawFrame.headersType, 5)
            )
            let limits = frames.filter { $0.type == RawFrame.settingsType && $0.flags == 0 }.compactMap { frame -> UInt32? in
                guard frame.payload.count == 6, frame.payload[0...1] == [0, 3] else { return nil }
                return frame.payload[2...5].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            }
            #expect(limits == [1])
            let refused = frames.filter { $0.type == RawFrame.rstStreamType && $0.payload == [0, 0, 0, 7] }.map(\.streamID)
            #expect(refused == [1, 3])
            #expect(frames.contains { $0.type == 1 && $0.streamID == 5 }, "stream 5 is answered")
            #expect((try await fixture.counters())["refusedStreams"] as? Int == 2)
        }
    }

    @Test("bad fault definitions get a clear error")
    func badFaults() async throws {
        try await withEmulatorFixture { fixture in
            for body in [
                #"{"type":"explode"}"#, #"{"type":"status","status":200}"#, #"{"type":"latency"}"#,
                #"{"type":"status","status":500,"probability":2}"#, #"{"type":"status","status":500,"count":0}"#, "nope", "[]",
            ] {
                let response = try await fixture.control("POST", "/v1/faults", json: body)
                #expect(response.status == 400, "\(body)")
                #expect((response.json?["error"] as? [String: Any])?["code"] as? String == "invalid_request")
            }
            #expect((try await fixture.control("GET", "/v1/faults").json?["faults"] as? [Any])?.isEmpty == true)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Bad input of every kind gets an error and never wedges the emulator.
@Suite(.heavy) struct RobustnessTests {
    static let body = #"{"aps":{"alert":"Hello"}}"#

    func stillServes(_ fixture: EmulatorFixture) async throws {
        let token = try await fixture.createDevice()
        let response = try await fixture.development.send(
            CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body))
        #expect(response.status == 200)
    }

    @Test("garbage instead of HTTP/2 closes that connection only")
    func garbage() async throws {
        try await withEmulatorFixture(configure: { $0.listeners.append(.init(environment: .development, port: 0, tls: false)) }) { fixture in
            let h2c = fixture.emulator.cleartextPorts[.development]!
            let tls = fixture.emulator.ports[.development]!
            let junk = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            let plain = try await RawHTTP2.exchange(port: h2c, tls: false, send: junk, readFor: 3)
            #expect(plain.closed)
            let afterPreface = try await RawHTTP2.exchange(
                port: h2c, tls: false, send: RawHTTP2.preface + [0, 0, 4, 0xFF, 0, 0, 0, 0, 1, 1, 2, 3, 4] + Array(repeating: 0xAB, count: 64),
                readFor: 3)
            #expect(afterPreface.closed || afterPreface.frames.contains { $0.type == RawFrame.goAwayType })
            let overTLS = try await RawHTTP2.exchange(
                port: tls, tls: true, caFile: fixture.caFile, send: Array(repeating: 0x00, count: 100), readFor: 3)
            #expect(overTLS.closed)
            // A DATA frame on a stream that was never opened is a connection error (GOAWAY).
            let orphanData = try await RawHTTP2.exchange(
                port: h2c, tls: false, send: RawHTTP2.preface + [0, 0, 2, 0, 0, 0, 0, 0, 9, 0x7B, 0x7D], readFor: 3)
            #expect(orphanData.frames.contains { $0.type == RawFrame.goAwayType })
            try await self.stillServes(fixture)
        }
    }

    @Test("a 100 KB body gets 413 at once and the connection goes on")
    func hugeBody() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let huge = #"{"aps":{"alert":""# + String(repeating: "x", count: 100_000) + #""}}"#
            let responses = try await fixture.development.send([
                CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: huge),
                CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body),
            ])
            #expect(responses[0].status == 413)
            #expect(responses[0].reason == "PayloadTooLarge")
            #expect(responses[1].status == 200)
        }
    }

    @Test("VoIP payloads may be 5120 bytes; alerts 4096")
    func sizeBoundaries() async throws {
        try await withEmulatorFixture { fixture in
            func body(_ size: Int) -> String { #"{"p":""# + String(repeating: "x", count: size - 8) + #""}"# }
            let device = try await fixture.createDevice()
            let voip = try await fixture.createDevice(kind: "voip")
            func send(_ token: String, _ size: Int, voip: Bool) async throws -> Int {
                let headers = try fixture.alertHeaders(topic: voip ? "com.example.app.voip" : "com.example.app", pushType: voip ? "voip" : "alert")
                return try await fixture.development.send(CurlRequest(path: "/3/device/\(token)", headers: headers, json: body(size))).status
            }
            #expect(try await send(device, 4096, voip: false) == 200)
            #expect(try await send(device, 4097, voip: false) == 413)
            #expect(try await send(voip, 5120, voip: true) == 200)
            #expect(try await send(voip, 5121, voip: true) == 413)
        }
    }

    @Test("an oversized header block ends that connection (GOAWAY COMPRESSION_ERROR) and no other")
    func hugeHeaders() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let request = CurlRequest(
                path: "/3/device/\(token)", headers: try fixture.alertHeaders() + [("x-padding", String(repeating: "p", count: 20_000))],
                json: Self.body)
            // The HPACK decoder refuses a header list this large: curl sees the connection end
            // before its stream does (exit 16 or 18 or 92, depending on where it notices).
            await #expect(throws: CurlError.self) { try await fixture.development.send(request) }
            #expect((try await fixture.counters())["accepted"] as? Int == 0)
            try await self.stillServes(fixture)
        }
    }

    @Test("the control API answers bad requests with JSON errors and stable codes")
    func controlErrors() async throws {
        try await withEmulatorFixture { fixture in
            let cases: [(String, String, String?, Int, String)] = [
                ("GET", "/v1/nothing", nil, 404, "not_found"),
                ("GET", "/elsewhere", nil, 404, "not_found"),
                ("POST", "/v1/devices", "{", 400, "invalid_request"),
                ("POST", "/v1/devices", #"{"bundleId":"com.example.app","kind":"pager"}"#, 400, "invalid_request"),
                ("POST", "/v1/devices", #"{"bundleId":"bad bundle"}"#, 400, "invalid_request"),
                ("POST", "/v1/devices", #"{"bundleId":"a.b","environment":"staging"}"#, 400, "invalid_request"),
                ("POST", "/v1/devices", #"{"bundleId":"a.b","online":"yes"}"#, 400, "invalid_request"),
                ("GET", "/v1/devices/abcd", nil, 404, "not_found"),
                ("PUT", "/v1/devices", "{}", 405, "method_not_allowed"),
                ("POST", "/v1/keys", #"{"keyId":"K","teamId":"T","publicKey":"nope"}"#, 400, "invalid_request"),
                ("POST", "/v1/keys", #"{"keyId":"K"}"#, 400, "invalid_request"),
                ("DELETE", "/v1/keys/NOPE", nil, 404, "not_found"),
                ("POST", "/v1/certificates", #"{"bundleId":"a.b","validDays":0}"#, 400, "invalid_request"),
                ("POST", "/v1/clock", #"{"advanceSeconds":"soon"}"#, 400, "invalid_request"),
            ]
            for (method, path, body, status, code) in cases {
                let response = try await fixture.control(method, path, json: body)
                #expect(response.status == status, "\(method) \(path)")
                #expect((response.json?["error"] as? [String: Any])?["code"] as? String == code, "\(method) \(path)")
            }
            let big = "{\"x\":\"" + String(repeating: "y", count: 1_100_000) + "\"}"
            let file = try fixture.directory.write("big.json", big)
            let result = try await ProcessRunner.run(
                "curl",
                [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@" + file,
                    "http://127.0.0.1:\(fixture.emulator.controlPort!)/v1/devices",
                ])
            #expect(result.standardOutput == "413")
            #expect(fixture.emulator.state.devices.isEmpty)
        }
    }

    @Test("the control API moves the clock and lists recent requests")
    func clockAndLog() async throws {
        try await withEmulatorFixture { fixture in
            let before = fixture.clock.nowMilliseconds
            let moved = try await fixture.control("POST", "/v1/clock", json: #"{"advanceSeconds":3600}"#)
            #expect(moved.json?["nowMilliseconds"] as? Int == Int(before + 3_600_000))
            try await self.stillServes(fixture)
            let log = try await fixture.control("GET", "/v1/requests?limit=5").json?["requests"] as? [[String: Any]]
            #expect(log?.count == 1)
            #expect(log?.first?["status"] as? Int == 200)
            let ca = try await fixture.control("GET", "/v1/ca")
            #expect(ca.body.hasPrefix("-----BEGIN CERTIFICATE-----"))
        }
    }
}

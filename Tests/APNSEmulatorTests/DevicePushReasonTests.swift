// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Every device-push reason string through curl, over TLS, as a client would meet it.
///
/// 25 are provoked by what the request does wrong. Seven have no cause a client can trigger on a
/// stream (`Forbidden`, `InternalServerError`, `ServiceUnavailable`) or reach clients as GOAWAY
/// debug data (`IdleTimeout`, `Shutdown`, `BadCertificate`, `BadCertificateEnvironment`, provoked
/// for real in ConnectionTests and CertificateAuthTests): here they come from the fault injector,
/// which shows they are framed like every other error.
@Suite(.heavy) struct DevicePushReasonTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var reason: String
        var status: Int
        /// Answered by an injected fault rather than provoked by the request itself.
        var viaFault = false
        var configure: @Sendable (inout APNSEmulator.Configuration) -> Void = { _ in }
        var run: @Sendable (EmulatorFixture) async throws -> CurlResponse

        var testDescription: String { "\(self.status) \(self.reason)" }
    }

    static let body = #"{"aps":{"alert":"Hello"}}"#

    /// One request to a fresh development device with valid headers, changed by `change`.
    static func push(
        path: (@Sendable (String) -> String)? = nil,
        body: String? = DevicePushReasonTests.body,
        method: String = "POST",
        change: @escaping @Sendable ([(String, String)]) -> [(String, String)] = { $0 }
    ) -> @Sendable (EmulatorFixture) async throws -> CurlResponse {
        { fixture in
            let token = try await fixture.createDevice()
            let request = CurlRequest(
                method: method, path: path?(token) ?? "/3/device/\(token)", headers: change(try fixture.alertHeaders()),
                body: body.map { Array($0.utf8) }
            )
            return try await fixture.development.send(request)
        }
    }

    static func replacing(_ name: String, with value: String?) -> @Sendable ([(String, String)]) -> [(String, String)] {
        { headers in
            var result = headers.filter { $0.0 != name }
            if let value { result.append((name, value)) }
            return result
        }
    }

    static func adding(_ name: String, _ value: String) -> @Sendable ([(String, String)]) -> [(String, String)] {
        { $0 + [(name, value)] }
    }

    static func fault(status: Int, reason: String) -> @Sendable (EmulatorFixture) async throws -> CurlResponse {
        { fixture in
            try await fixture.control("POST", "/v1/faults", json: #"{"type":"status","status":\#(status),"reason":"\#(reason)"}"#)
            return try await Self.push()(fixture)
        }
    }

    static let cases: [Case] = [
        Case(reason: "BadCollapseId", status: 400, run: push(change: adding("apns-collapse-id", String(repeating: "c", count: 65)))),
        Case(reason: "BadDeviceToken", status: 400, run: push(path: { _ in "/3/device/" + String(repeating: "a", count: 64) })),
        Case(reason: "BadExpirationDate", status: 400, run: push(change: adding("apns-expiration", "tomorrow"))),
        Case(reason: "BadMessageId", status: 400, run: push(change: adding("apns-id", "1234"))),
        Case(reason: "BadPriority", status: 400, run: push(change: adding("apns-priority", "7"))),
        Case(reason: "BadTopic", status: 400, run: push(change: replacing("apns-topic", with: "com.example/app"))),
        Case(reason: "DeviceTokenNotForTopic", status: 400) { fixture in
            let token = try await fixture.createDevice(bundleID: "com.example.other")
            return try await fixture.development.send(CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body))
        },
        Case(reason: "DuplicateHeaders", status: 400, run: push(change: adding("apns-topic", EmulatorFixture.bundleID))),
        Case(reason: "IdleTimeout", status: 400, viaFault: true, run: fault(status: 400, reason: "IdleTimeout")),
        Case(reason: "InvalidPushType", status: 400, run: push(change: replacing("apns-push-type", with: "notification"))),
        Case(reason: "MissingDeviceToken", status: 400, run: push(path: { _ in "/3/device/" })),
        Case(reason: "MissingTopic", status: 400, run: push(change: replacing("apns-topic", with: nil))),
        Case(reason: "PayloadEmpty", status: 400, run: push(body: nil)),
        Case(reason: "TopicDisallowed", status: 400, run: push(change: replacing("apns-push-type", with: "voip"))),
        Case(reason: "BadCertificate", status: 403, viaFault: true, run: fault(status: 403, reason: "BadCertificate")),
        Case(reason: "BadCertificateEnvironment", status: 403, viaFault: true, run: fault(status: 403, reason: "BadCertificateEnvironment")),
        Case(reason: "ExpiredProviderToken", status: 403) { fixture in
            let stale = try fixture.bearer(issuedAt: fixture.clock.nowSeconds - 3601)
            return try await Self.push(change: replacing("authorization", with: stale))(fixture)
        },
        Case(reason: "Forbidden", status: 403, viaFault: true, run: fault(status: 403, reason: "Forbidden")),
        Case(reason: "InvalidProviderToken", status: 403) { fixture in
            // Same key id and team, but signed by a key APNs does not know.
            let impostor = SigningKey.generate(keyID: EmulatorFixture.keyID, teamID: EmulatorFixture.teamID)
            let forged = try fixture.bearer(impostor)
            return try await Self.push(change: replacing("authorization", with: forged))(fixture)
        },
        Case(reason: "MissingProviderToken", status: 403, run: push(change: replacing("authorization", with: nil))),
        Case(reason: "UnrelatedKeyIdInToken", status: 403) { fixture in
            let topicKey = SigningKey.generate(keyID: "TOPICKEY01", teamID: EmulatorFixture.teamID)
            fixture.emulator.register(key: topicKey, topics: [EmulatorFixture.bundleID])
            let token = try await fixture.createDevice()
            let first = CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body)
            let second = CurlRequest(
                path: "/3/device/\(token)",
                headers: Self.replacing("authorization", with: try fixture.bearer(topicKey))(try fixture.alertHeaders()),
                json: Self.body
            )
            let responses = try await fixture.development.send([first, second])
            #expect(responses[0].status == 200)
            #expect(responses[1].newConnections == 0)
            return responses[1]
        },
        Case(reason: "BadEnvironmentKeyIdInToken", status: 403) { fixture in
            let productionKey = SigningKey.generate(keyID: "PRODKEY001", teamID: EmulatorFixture.teamID)
            fixture.emulator.register(key: productionKey, environments: [.production])
            return try await Self.push(change: replacing("authorization", with: try fixture.bearer(productionKey)))(fixture)
        },
        Case(reason: "BadPath", status: 404, run: push(path: { "/3/devices/\($0)" })),
        Case(reason: "MethodNotAllowed", status: 405, run: push(body: nil, method: "GET")),
        Case(reason: "ExpiredToken", status: 410) { fixture in
            let token = try await fixture.createDevice()
            try await fixture.control("POST", "/v1/devices/\(token)/expire-token")
            return try await fixture.development.send(CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body))
        },
        Case(reason: "Unregistered", status: 410) { fixture in
            let token = try await fixture.createDevice()
            let uninstalled = try await fixture.control("POST", "/v1/devices/\(token)/uninstall").json
            let response = try await fixture.development.send(
                CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body))
            let timestamp = response.json?["timestamp"] as? Int64 ?? (response.json?["timestamp"] as? Int).map(Int64.init)
            #expect(timestamp != nil)
            #expect(timestamp == (uninstalled?["uninstalledAtMilliseconds"] as? Int).map(Int64.init))
            return response
        },
        Case(
            reason: "PayloadTooLarge", status: 413,
            run: push(body: #"{"aps":{"alert":""#.padding(toLength: 4100, withPad: "x", startingAt: 0) + #""}}"#)),
        Case(reason: "TooManyProviderTokenUpdates", status: 429) { fixture in
            let token = try await fixture.createDevice()
            let first = CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body)
            let newer = try fixture.bearer(issuedAt: fixture.clock.nowSeconds - 5)
            let second = CurlRequest(
                path: "/3/device/\(token)", headers: Self.replacing("authorization", with: newer)(try fixture.alertHeaders()), json: Self.body
            )
            let responses = try await fixture.development.send([first, second])
            #expect(responses[0].status == 200)
            return responses[1]
        },
        Case(reason: "TooManyRequests", status: 429, configure: { $0.perTokenRateLimit = (count: 2, seconds: 60) }) { fixture in
            let token = try await fixture.createDevice()
            let request = CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body)
            let responses = try await fixture.development.send([request, request, request])
            #expect(responses.prefix(2).allSatisfy { $0.status == 200 })
            return responses[2]
        },
        Case(reason: "InternalServerError", status: 500, viaFault: true, run: fault(status: 500, reason: "InternalServerError")),
        Case(reason: "ServiceUnavailable", status: 503, viaFault: true, run: fault(status: 503, reason: "ServiceUnavailable")),
        Case(reason: "Shutdown", status: 503, viaFault: true, run: fault(status: 503, reason: "Shutdown")),
    ]

    @Test("each device-push reason comes with its status, a JSON body and an apns-id", arguments: DevicePushReasonTests.cases)
    func reason(_ testCase: Case) async throws {
        try await withEmulatorFixture(configure: testCase.configure) { fixture in
            let response = try await testCase.run(fixture)
            #expect(response.status == testCase.status)
            #expect(response.reason == testCase.reason)
            #expect(response.headers["content-type"] == "application/json")
            #expect(UUIDText.isCanonical(response.headers["apns-id"] ?? ""))
            #expect(response.httpVersion == "2")
            let counters = try await fixture.counters()
            #expect((counters["rejected"] as? [String: Int])?[testCase.reason] == 1)
        }
    }

    @Test("the table covers every device-push reason of the reference, 25 provoked by the request")
    func coverage() {
        #expect(Set(Self.cases.map(\.reason)) == Set(APNSReason.devicePushReasons.map(\.reason.rawValue)))
        #expect(
            Set(Self.cases.filter(\.viaFault).map(\.reason)) == [
                "Forbidden", "InternalServerError", "ServiceUnavailable", "IdleTimeout", "Shutdown", "BadCertificate",
                "BadCertificateEnvironment",
            ])
    }

    @Test("a valid push is answered 200 with only headers: apns-id echoed, apns-unique-id in development")
    func success() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let id = "0c3a4d7e-aaaa-4bbb-8ccc-000000000001"
            let response = try await fixture.development.send(
                CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders() + [("apns-id", id)], json: Self.body)
            )
            #expect(response.status == 200)
            #expect(response.body.isEmpty)
            #expect(response.headers["apns-id"] == id)
            #expect(UUIDText.isCanonical(response.headers["apns-unique-id"] ?? ""))

            let productionToken = try await fixture.createDevice(environment: "production")
            let production = try await fixture.production.send(
                CurlRequest(path: "/3/device/\(productionToken)", headers: try fixture.alertHeaders(), json: Self.body)
            )
            #expect(production.status == 200)
            #expect(production.headers["apns-unique-id"] == nil)
            // A development token is unknown to production.
            let crossed = try await fixture.production.send(
                CurlRequest(path: "/3/device/\(token)", headers: try fixture.alertHeaders(), json: Self.body))
            #expect(crossed.reason == "BadDeviceToken")
        }
    }
}

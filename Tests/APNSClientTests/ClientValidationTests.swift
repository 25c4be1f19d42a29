// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Bad input is refused before the wire, naming the rule; certificate credentials work.
@Suite(.heavy) struct ClientValidationTests {
    static let bad: [(name: String, pushType: PushType, topic: String, priority: Int?, collapseID: String?, payloadSize: Int, code: String)] = [
        ("background at priority 10", .background, "com.example.app", 10, nil, 40, "bad_priority"),
        ("voip to the bare bundle id", .voip, "com.example.app", nil, nil, 40, "topic_suffix_mismatch"),
        ("alert to a voip topic", .alert, "com.example.app.voip", nil, nil, 40, "topic_suffix_mismatch"),
        ("collapse id over 64 bytes", .alert, "com.example.app", nil, String(repeating: "c", count: 65), 40, "bad_collapse_id"),
        ("alert payload over 4096 bytes", .alert, "com.example.app", nil, nil, 4097, "payload_too_large"),
        ("voip payload over 5120 bytes", .voip, "com.example.app.voip", nil, nil, 5121, "payload_too_large"),
    ]

    @Test("refused locally with the rule's code; nothing reaches the emulator", arguments: ClientValidationTests.bad)
    func refusedLocally(
        name: String, pushType: PushType, topic: String, priority: Int?, collapseID: String?, payloadSize: Int, code: String
    ) async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let filler = String(repeating: "x", count: payloadSize - 8)
            let request = APNSRequest(
                deviceToken: try DeviceToken(hex: token),
                headers: NotificationHeaders(
                    pushType: pushType, topic: topic, priority: priority.flatMap(Priority.init(rawValue:)), collapseID: collapseID),
                payload: Array(#"{"x":"\#(filler)"}"#.utf8)
            )
            try await fixture.withClient { client async throws in
                let error = try #require(await clientError { try await client.send(request) }, "\(name) was sent")
                #expect(error.code == .invalidRequest)
                #expect(error.validation?.code.description == code, "\(name)")
                #expect(error.failureClass == .fixAndDrop)
            }
            #expect(try await fixture.counter("connections") == 0, "no connection for a refused request")
        }
    }

    @Test("a voip payload of 5120 bytes is within its limit and delivered")
    func voipLimit() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice(kind: "voip")
            let filler = String(repeating: "x", count: 5120 - 8)
            let request = APNSRequest(
                deviceToken: try DeviceToken(hex: token),
                headers: NotificationHeaders(pushType: .voip, topic: "com.example.app.voip"),
                payload: Array(#"{"x":"\#(filler)"}"#.utf8)
            )
            #expect(request.payload.count == 5120)
            #expect(try await fixture.withClient { try await $0.send(request) }.apnsID != nil)
        }
    }

    @Test("a payload that is not JSON is refused locally")
    func notJSON() async throws {
        try await withEmulatorFixture { fixture in
            let request = APNSRequest(
                deviceToken: try DeviceToken(hex: String(repeating: "a", count: 64)),
                headers: NotificationHeaders(pushType: .alert, topic: "com.example.app"),
                payload: Array(#"{"aps":"#.utf8)
            )
            await #expect(throws: APNSClientError.self) { try await fixture.withClient { try await $0.send(request) } }
        }
    }

    @Test("a bulk send parses a payload once per storage: one not JSON, as long as the shared valid one, is refused, the rest delivered")
    func bulkNotJSON() async throws {
        try await withEmulatorFixture { fixture in
            let token = try DeviceToken(hex: try await fixture.createDevice())
            let headers = NotificationHeaders(pushType: .alert, topic: "com.example.app")
            let valid = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
            let broken = Array(#"{"aps":{"alert":"hello"}x"#.utf8)
            #expect(valid.count == broken.count)
            var requests = (0..<4).map { APNSRequest(deviceToken: token, headers: headers, payload: valid, tag: $0) }
            requests.insert(APNSRequest(deviceToken: token, headers: headers, payload: broken, tag: 9), at: 2)
            let outcomes = try await fixture.withClient { try await $0.sendAll(requests) }
            #expect(outcomes.count == 5)
            for outcome in outcomes {
                switch outcome.result {
                case .failure(let error):
                    #expect(outcome.request.tag == 9 && error.validation?.code.description == "payload_not_json")
                case .success:
                    #expect(outcome.request.tag != 9)
                }
            }
            #expect(try await fixture.counter("accepted") == 4)
        }
    }

    @Test("a configuration that cannot work is refused when the client is made")
    func badConfiguration() throws {
        let key = SigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")
        var configuration = APNSClientConfiguration(credential: .token(key, restrictedTo: .production), environment: .development)
        #expect(throws: APNSClientError.self) { try APNSClient(configuration: configuration) }
        configuration = APNSClientConfiguration(credential: .token(key), environment: .development)
        configuration.connections = 0
        #expect(throws: APNSClientError.self) { try APNSClient(configuration: configuration) }
    }

    /// Issues a provider certificate through the control API and writes it and its key to files.
    func issue(_ fixture: EmulatorFixture) async throws -> (certificate: String, key: String) {
        let response = try await fixture.control("POST", "/v1/certificates", json: #"{"bundleId":"com.example.app"}"#)
        #expect(response.status == 201)
        let certificate = try #require(response.json?["certificate"] as? String)
        let key = try #require(response.json?["privateKey"] as? String)
        return (try fixture.directory.write("client.crt", certificate), try fixture.directory.write("client.key", key))
    }

    @Test("certificate authentication: PEM files and a PKCS#12 bundle both push; token-only push types are refused locally")
    func certificateAuthentication() async throws {
        try await withEmulatorFixture { fixture in
            let device = try await fixture.createDevice()
            let files = try await self.issue(fixture)
            let p12 = fixture.directory.path + "/client.p12"
            let export = try await ProcessRunner.run(
                "openssl", ["pkcs12", "-export", "-in", files.certificate, "-inkey", files.key, "-out", p12, "-passout", "pass:secret"]
            )
            #expect(export.exitCode == 0, "\(export.standardError)")
            for credential in [
                try APNSClientConfiguration.Credential.certificate(pemFile: files.certificate, privateKeyFile: files.key),
                try APNSClientConfiguration.Credential.pkcs12(file: p12, passphrase: "secret"),
            ] {
                var configuration = fixture.clientConfiguration()
                configuration.credential = credential
                try await withAPNSClient(configuration: configuration) { client async throws in
                    #expect(try await client.send(try alert(device)).apnsID != nil)
                    let liveActivity = APNSRequest(
                        deviceToken: try DeviceToken(hex: device),
                        headers: NotificationHeaders(pushType: .liveactivity, topic: "com.example.app.push-type.liveactivity"),
                        payload: Array(#"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#.utf8)
                    )
                    let error = try #require(
                        await clientError { try await client.send(liveActivity) }, "a Live Activity push went out over a certificate connection")
                    #expect(error.validation?.code == .pushTypeNotAllowedForAuth)
                }
            }
            #expect(try await fixture.inbox(device).count == 2)
            #expect(throws: APNSClientError.self) { try APNSClientConfiguration.Credential.pkcs12(file: p12, passphrase: "wrong") }
        }
    }
}

@Suite(.heavy) struct ClientTimeoutTests {
    @Test("an absurdly long per-request timeout is taken as 'very long', not a crash")
    func hugeTimeout() async throws {
        try await withEmulatorFixture { fixture in
            let token = try await fixture.createDevice()
            let delivery = try await fixture.withClient { client async throws in
                try await client.send(try alert(token), timeout: .seconds(Int64.max / 2))
            }
            #expect(delivery.apnsID != nil)
        }
    }
}

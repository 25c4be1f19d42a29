// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Certificate-based connections: client certificates issued by the emulator's CA.
@Suite(.heavy) struct CertificateAuthTests {
    static let body = #"{"aps":{"alert":"Hello"}}"#

    /// Issues a certificate through the control API and writes it and its key to files.
    func issue(_ fixture: EmulatorFixture, _ json: String) async throws -> (certificate: String, key: String) {
        let response = try await fixture.control("POST", "/v1/certificates", json: json)
        #expect(response.status == 201)
        let certificate = try #require(response.json?["certificate"] as? String)
        let key = try #require(response.json?["privateKey"] as? String)
        let name = String(json.hashValue.magnitude)
        return (try fixture.directory.write("\(name).crt", certificate), try fixture.directory.write("\(name).key", key))
    }

    func curl(_ fixture: EmulatorFixture, _ client: (certificate: String, key: String), port: Int? = nil) -> Curl {
        Curl(
            baseURL: "https://localhost:\(port ?? fixture.emulator.ports[.development]!)", caFile: fixture.caFile,
            directory: fixture.directory, clientCertificate: client
        )
    }

    @Test("a provider certificate pushes without a JWT, to the topics it lists")
    func certificatePush() async throws {
        try await withEmulatorFixture { fixture in
            let client = try await self.issue(fixture, #"{"bundleId":"com.example.app"}"#)
            let device = try await fixture.createDevice()
            let voip = try await fixture.createDevice(kind: "voip")
            let curl = self.curl(fixture, client)
            let ok = try await curl.send(
                CurlRequest(path: "/3/device/\(device)", headers: [("apns-topic", "com.example.app"), ("apns-push-type", "alert")], json: Self.body))
            #expect(ok.status == 200)
            let call = try await curl.send(
                CurlRequest(path: "/3/device/\(voip)", headers: [("apns-topic", "com.example.app.voip"), ("apns-push-type", "voip")], json: "{}"))
            #expect(call.status == 200)
            let missing = try await curl.send(CurlRequest(path: "/3/device/\(device)", headers: [("apns-push-type", "alert")], json: Self.body))
            #expect(missing.reason == "MissingTopic")
            let other = try await curl.send(CurlRequest(path: "/3/device/\(device)", headers: [("apns-topic", "com.example.other")], json: Self.body))
            #expect(other.reason == "BadTopic")
            let liveActivity = try await fixture.createDevice(kind: "liveactivity")
            let la = try await curl.send(
                CurlRequest(
                    path: "/3/device/\(liveActivity)",
                    headers: [("apns-topic", "com.example.app.push-type.liveactivity"), ("apns-push-type", "liveactivity")],
                    json: #"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#
                )
            )
            #expect(la.reason == "TopicDisallowed")
        }
    }

    @Test("a single-topic certificate may leave out apns-topic")
    func singleTopic() async throws {
        try await withEmulatorFixture { fixture in
            let client = try await self.issue(fixture, #"{"bundleId":"com.example.app","topics":["com.example.app"]}"#)
            let device = try await fixture.createDevice()
            let response = try await self.curl(fixture, client).send(
                CurlRequest(path: "/3/device/\(device)", headers: [("apns-push-type", "alert")], json: Self.body))
            #expect(response.status == 200)
        }
    }

    @Test("certificate connections get the full stream limit at once")
    func streamLimit() async throws {
        try await withEmulatorFixture { fixture in
            let client = try await self.issue(fixture, #"{"bundleId":"com.example.app"}"#)
            let device = try await fixture.createDevice()
            let log = try await ConnectionTests.nghttp(
                fixture, path: "/3/device/\(device)", headers: [("apns-topic", "com.example.app")],
                extra: ["--cert", client.certificate, "--key", client.key]
            )
            #expect(ConnectionTests.advertisedStreamLimits(log) == [1, 1000])
            #expect(log.contains(":status: 200"))
        }
    }

    @Test("a certificate of the other environment gets GOAWAY BadCertificateEnvironment")
    func wrongEnvironment() async throws {
        try await withEmulatorFixture { fixture in
            let client = try await self.issue(fixture, #"{"bundleId":"com.example.app","environments":["production"]}"#)
            let device = try await fixture.createDevice()
            let log = try await ConnectionTests.nghttp(
                fixture, path: "/3/device/\(device)", headers: [("apns-topic", "com.example.app")],
                extra: ["--cert", client.certificate, "--key", client.key]
            )
            #expect(log.contains("recv GOAWAY"))
            #expect(log.contains("BadCertificateEnvironment"))
            // The same certificate works on the production port.
            let production = self.curl(fixture, client, port: fixture.emulator.ports[.production]!)
            let productionDevice = try await fixture.createDevice(environment: "production")
            #expect(
                try await production.send(
                    CurlRequest(path: "/3/device/\(productionDevice)", headers: [("apns-topic", "com.example.app")], json: Self.body)
                ).status == 200)
        }
    }

    @Test("a certificate without a UID gets GOAWAY BadCertificate; one from another CA fails the handshake")
    func badCertificates() async throws {
        try await withEmulatorFixture { fixture in
            let data = fixture.directory.path + "/data"
            let key = fixture.directory.path + "/nouid.key"
            let csr = fixture.directory.path + "/nouid.csr"
            let certificate = fixture.directory.path + "/nouid.crt"
            for arguments in [
                ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key],
                ["req", "-new", "-key", key, "-subj", "/CN=No UID", "-out", csr],
                [
                    "x509", "-req", "-in", csr, "-CA", data + "/ca.pem", "-CAkey", data + "/ca-key.pem", "-CAcreateserial", "-days", "2", "-out",
                    certificate,
                ],
            ] {
                #expect(try await ProcessRunner.run("openssl", arguments).exitCode == 0)
            }
            let device = try await fixture.createDevice()
            let log = try await ConnectionTests.nghttp(
                fixture, path: "/3/device/\(device)", headers: [("apns-topic", "com.example.app")], extra: ["--cert", certificate, "--key", key]
            )
            #expect(log.contains("recv GOAWAY"), "\(log)")
            #expect(log.contains(#"{"reason":"BadCertificate"}"#), "\(log)")

            let strangerKey = fixture.directory.path + "/stranger.key"
            let stranger = fixture.directory.path + "/stranger.crt"
            #expect(
                try await ProcessRunner.run(
                    "openssl",
                    [
                        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", strangerKey,
                        "-out", stranger, "-subj", "/UID=com.example.app", "-days", "2",
                    ]
                ).exitCode == 0
            )
            let failure = await #expect(throws: CurlError.self) {
                try await self.curl(fixture, (stranger, strangerKey)).send(
                    CurlRequest(path: "/3/device/\(device)", headers: [("apns-topic", "com.example.app")], json: Self.body))
            }
            // curl: 35 = TLS handshake failed; 55/56 = the server ended the connection while curl sent
            // or read (its alert arrived first). Never an HTTP answer.
            #expect(failure.map { [35, 55, 56].contains($0.exitCode) } == true, "\(String(describing: failure))")
        }
    }
}

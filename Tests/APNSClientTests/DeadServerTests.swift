// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// A server that completes TLS, sends its SETTINGS, and then never says another word: no
/// answers, no PING replies. The client must find the connection dead and not hang.
@Suite(.heavy) struct DeadServerTests {
    static let script = #"""
        import socket, ssl, sys
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        context.set_alpn_protocols(["h2"])
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        print("port", listener.getsockname()[1], flush=True)
        held = []
        while True:
            connection, _ = listener.accept()
            try:
                tls = context.wrap_socket(connection, server_side=True)
                tls.sendall(bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]))  # SETTINGS: 100 streams
                held.append(tls)
                print("accepted", len(held), flush=True)
            except Exception as error:
                print("failed", error, flush=True)
        """#

    @Test("a silent server: PINGs go unanswered, the connection is replaced, the written request fails as an unknown outcome, not resent")
    func silentServer() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-dead")
        defer { directory.remove() }
        let certificate = directory.path + "/server.crt"
        let key = directory.path + "/server.key"
        let made = try await ProcessRunner.run(
            "openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", certificate,
                "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
        try #require(made.exitCode == 0, "\(made.standardError)")
        let scriptFile = try directory.write("silent.py", Self.script)
        let server = try BackgroundProcess("/usr/bin/env", ["python3", scriptFile, certificate, key])
        try #require(try await server.waitFor("port ", timeout: 300), "\(server.printed)")
        let portLine = try #require(server.printed.split(separator: "\n").first { $0.hasPrefix("port ") })
        let port = try #require(Int(portLine.dropFirst(5)))

        var configuration = APNSClientConfiguration(
            credential: .token(SigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")),
            environment: .development, host: "127.0.0.1", port: port, trustRoots: .pemFile(certificate)
        )
        configuration.requestTimeout = .seconds(60)
        configuration.pingInterval = .milliseconds(100)
        configuration.pingTimeout = .milliseconds(300)
        configuration.maximumResends = 2
        let start = ContinuousClock.now
        let error = try await withAPNSClient(configuration: configuration) { client async throws in
            await clientError { try await client.send(try alert(String(repeating: "a", count: 64))) }
        }
        let elapsed = ContinuousClock.now - start
        #expect(error?.code == .unknownOutcome, "\(String(describing: error))")
        #expect(error?.outcomeUnknown == true, "\(String(describing: error))")
        #expect(error?.message.contains("PING unanswered") == true, "\(String(describing: error))")
        #expect(elapsed < .seconds(30), "failed long before its 60-second deadline")
        #expect(server.printed.contains("accepted 1"), "sent once")
        _ = try await server.stop(signal: SIGKILL)
    }
}

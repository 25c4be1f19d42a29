// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// Certificate credentials uploaded as a `.p12`, through the API and the dashboard's form.
extension ServerTests {
    @Test("a .p12 (with its passphrase) is taken through the API and the dashboard, kept as PEM, and pushes by certificate; bad ones get a code")
    func pkcs12Credentials() async throws {
        let port = try freeLoopbackPort()
        try await self.withServer(configure: { configuration in
            // Apps with credentials of their own go to the built-in emulator's sandbox port, as to Apple.
            configuration.emulatorPorts = (port, 0, 0)
            configuration.fcmEmulatorPort = 0
            configuration.webPushEmulatorPort = 0
            configuration.apnsOverride = ("127.0.0.1", port, configuration.dataDirectory + "/emulator/ca.pem")
        }) { context in
            let (register, send) = try await self.setUp(context)
            let directory = try TemporaryDirectory(prefix: "herald-p12")
            defer { directory.remove() }
            // A client certificate for the app's bundle, issued by the emulator as Apple would, exported as Keychain Access does.
            let issued = try await context.control.call("POST", "/v1/certificates", json: #"{"bundleId":"com.example.app"}"#)
            let certificate = try directory.write("client.crt", try #require(issued.body["certificate"] as? String))
            let key = try directory.write("client.key", try #require(issued.body["privateKey"] as? String))
            let p12 = directory.path + "/client.p12"
            let export = try await ProcessRunner.run(
                "openssl", ["pkcs12", "-export", "-in", certificate, "-inkey", key, "-out", p12, "-passout", "pass:s3cret"])
            try #require(export.exitCode == 0, "\(export.standardError)")
            let bundle = try Data(contentsOf: URL(fileURLWithPath: p12)).base64EncodedString()

            func code(_ answer: (status: Int, body: [String: Any])) -> String? { (answer.body["error"] as? [String: Any])?["code"] as? String }
            let path = "/v1/apps/demo/credentials/development"
            let wrong = try await context.api.call("PUT", path, key: context.admin, json: #"{"pkcs12":"\#(bundle)","passphrase":"nope"}"#)
            #expect(wrong.status == 422 && code(wrong) == "bad_certificate", "\(wrong.body)")
            #expect(!"\(wrong.body)".contains("s3cret") && !"\(wrong.body)".contains(bundle.prefix(40)), "the error quotes no material")
            let garbage = try await context.api.call("PUT", path, key: context.admin, json: #"{"pkcs12":"aGVsbG8=","passphrase":"s3cret"}"#)
            #expect(garbage.status == 422 && code(garbage) == "bad_certificate")
            let mixed = try await context.api.call(
                "PUT", path, key: context.admin, json: #"{"pkcs12":"\#(bundle)","certificate":"x","privateKey":"y"}"#)
            #expect(mixed.status == 400 && code(mixed) == "bad_credentials")
            #expect(
                try await context.api.call("PUT", path, key: send, json: #"{"pkcs12":"\#(bundle)","passphrase":"s3cret"}"#).status == 403,
                "a send key cannot set credentials")

            let saved = try await context.api.call("PUT", path, key: context.admin, json: #"{"pkcs12":"\#(bundle)","passphrase":"s3cret"}"#)
            #expect(saved.status == 204, "\(saved.body)")
            let listed = try await context.api.call("GET", "/v1/apps/demo/credentials", key: context.admin)
            let development = (listed.body["credentials"] as? [[String: Any]])?.first { $0["environment"] as? String == "sandbox" }
            #expect(development?["kind"] as? String == "certificate", "\(listed.body)")

            // A push with it: the emulator takes the certificate and the device gets the alert.
            let token = try await self.virtualDevice(context)
            #expect(
                try await context.api.call("PUT", "/v1/apps/demo/devices/\(token)", key: register, json: #"{"environment":"sandbox"}"#).status == 200)
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: send, json: #"{"audience":{"tokens":["\#(token)"]},"title":"By certificate"}"#)
            let status = try await self.settled(context, key: send, id: try #require(sent.body["id"] as? String))
            #expect((status["counts"] as? [String: Int])?["sent"] == 1, "\(status)")

            // The dashboard's form uploads the same file (multipart, binary) for production.
            let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let page = try await browser.get("/dashboard/apps/demo")
            #expect(page.body.contains(#"name="pkcs12File""#) && page.body.contains(#"value="pkcs12""#))
            let csrf = try #require(DashboardTests.Browser.csrf(page.body))
            func upload(_ passphrase: String) async throws -> (status: Int, body: String, headers: String) {
                try await browser.call(
                    [
                        "-X", "POST", "-F", "csrf=\(csrf)", "-F", "environment=production", "-F", "kind=pkcs12", "-F", "pkcs12File=@\(p12)",
                        "-F", "pkcs12Passphrase=\(passphrase)",
                    ], "/dashboard/apps/demo/credentials")
            }
            let refused = try await upload("nope")
            #expect(refused.status == 422 && refused.body.contains("wrong passphrase"), "\(refused.status) \(refused.body.suffix(400))")
            let uploaded = try await upload("s3cret")
            #expect(uploaded.status == 200 && uploaded.body.contains("Production credentials saved"), "\(uploaded.status)")
            let both = try await context.api.call("GET", "/v1/apps/demo/credentials", key: context.admin)
            #expect((both.body["credentials"] as? [[String: Any]])?.filter { $0["kind"] as? String == "certificate" }.count == 2, "\(both.body)")
        }
    }
}

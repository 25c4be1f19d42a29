// SPDX-License-Identifier: Apache-2.0
import FCMClient
import FCMEmulator
import Foundation
import HeraldTesting
import Testing

@testable import HeraldServer

/// The FCM credential check's verdicts, from what the token endpoint and FCM answer.
@Suite struct DashboardFCMCheckTests {
    func verdict(grant: FCMError? = nil, send: Result<String, FCMError>? = nil) -> DashboardFCMCheck.Outcome {
        DashboardFCMCheck.verdict(grant: grant, send: send, projectID: "demo")
    }

    @Test("the token endpoint's refusal means the key is bad; its failure or absence does not")
    func grant() {
        let refused = self.verdict(
            grant: FCMError(status: 400, code: "credentials_unusable", message: "access token refused: invalid_grant: Invalid JWT Signature."))
        #expect(!refused.working && refused.verdict == "the key is bad" && refused.message.contains("invalid_grant"))
        let unsigned = self.verdict(grant: FCMError(status: nil, code: "credentials_unusable", message: "the service account's key cannot sign"))
        #expect(unsigned.verdict == "the key is bad")
        let notFound = self.verdict(grant: FCMError(status: 404, code: "token_grant_failed", message: "access token refused: HTTP_404"))
        #expect(notFound.verdict == "the key is bad")
        let failed = self.verdict(grant: FCMError(status: 503, code: "token_grant_failed", message: "access token refused: HTTP_503"))
        #expect(!failed.working && failed.verdict == "the token endpoint failed")
        let unreachable = self.verdict(grant: FCMError(status: nil, code: "connection_failed", message: "the request was not sent"))
        #expect(!unreachable.working && unreachable.verdict == "the token endpoint could not be reached")
        // A grant that failed on the send's renewal (after a 401) is the key's too.
        let regrant = self.verdict(send: .failure(FCMError(status: 400, code: "credentials_unusable", message: "invalid_grant")))
        #expect(regrant.verdict == "the key is bad")
    }

    @Test("FCM's answer to the probe: the token refused means working; 403 and 404 the project or API; 401 the access token")
    func send() {
        let invalidToken = self.verdict(
            send: .failure(
                FCMError(status: 400, code: "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token")))
        #expect(invalidToken.working && invalidToken.verdict == "key and project OK" && invalidToken.message.contains("400 INVALID_ARGUMENT"))
        #expect(self.verdict(send: .success("projects/demo/messages/fake_message_id")).verdict == "key and project OK")
        for (status, code) in [(403, "PERMISSION_DENIED"), (404, "NOT_FOUND"), (403, "SENDER_ID_MISMATCH")] {
            let wrong = self.verdict(send: .failure(FCMError(status: status, code: code, message: "Permission denied")))
            #expect(!wrong.working && wrong.verdict == "the project or its API is wrong" && wrong.message.contains("project demo"), "\(code)")
        }
        let unauthenticated = self.verdict(send: .failure(FCMError(status: 401, code: "UNAUTHENTICATED", message: "Request had invalid credentials")))
        #expect(!unauthenticated.working && unauthenticated.verdict == "the access token was refused")
        let otherArgument = self.verdict(send: .failure(FCMError(status: 400, code: "INVALID_ARGUMENT", message: "Invalid JSON payload")))
        #expect(!otherArgument.working && otherArgument.verdict == "unexpected answer")
        let unreachable = self.verdict(send: .failure(FCMError(status: nil, code: "timeout", message: "no answer", outcomeUnknown: true)))
        #expect(!unreachable.working && unreachable.verdict == "FCM could not be reached")
    }
}

/// The dashboard's FCM side through a real socket (curl) against the built-in FCM emulator, to
/// which the server sends FCM messages (`fcmEndpoint`), as to Google's.
@Suite(.heavy) struct DashboardFCMTests {
    let server = ServerTests()

    @Test(
        "FCM credentials: upload (errors with their code), shown without the key, checked (a bad key, a wrong project, working), deleted; the platform on devices, deliveries, the overview and the send preview"
    )
    func fcm() async throws {
        let port = try freeLoopbackPort()
        try await self.server.withServer(configure: {
            $0.fcmEmulatorPort = port
            $0.fcmEndpoint = "http://127.0.0.1:\(port)"
        }) { context in
            let keys = try await self.server.setUp(context)
            let emulator = try #require(context.server.fcmEmulator)
            let directory = try TemporaryDirectory(prefix: "herald-dashboard-fcm")
            defer { directory.remove() }
            let browser = DashboardTests.Browser(base: context.api.base, jar: directory.path + "/jar")
            #expect(try await browser.post("/dashboard/login", [("key", context.admin)]).status == 303)
            let page = try await browser.get("/dashboard/apps/demo")
            #expect(page.status == 200 && page.body.contains("<dd id=\"fcm-credential\">built-in FCM emulator</dd>"))
            let csrf = try #require(DashboardTests.Browser.csrf(page.body))

            // Without its own account, the check runs against the built-in emulator.
            let builtIn = try await browser.post("/dashboard/apps/demo/credentials/fcm/check", [("csrf", csrf)])
            #expect(builtIn.status == 200 && builtIn.body.contains("FCM (built-in FCM emulator): key and project OK."), "\(builtIn.body)")

            // Refused uploads say why, with the code.
            let notJSON = try await browser.post("/dashboard/apps/demo/credentials/fcm", [("serviceAccount", "{nope"), ("csrf", csrf)])
            #expect(notJSON.status == 400 && notJSON.body.contains("id=\"fcm-error\">invalid_json:"), "\(notJSON.body)")
            let incomplete = try await browser.post(
                "/dashboard/apps/demo/credentials/fcm", [("serviceAccount", #"{"type":"service_account"}"#), ("csrf", csrf)])
            #expect(incomplete.status == 400 && incomplete.body.contains("id=\"fcm-error\">bad_service_account:"), "\(incomplete.body)")
            let empty = try await browser.post("/dashboard/apps/demo/credentials/fcm", [("serviceAccount", " "), ("csrf", csrf)])
            #expect(empty.status == 400 && empty.body.contains("missing_serviceAccount:"))

            // The key file as a browser uploads it: shown by project, email and key id, never the key.
            let account = try emulator.makeServiceAccount(projectID: "demo")
            let accountJSON = try #require(try JSONSerialization.jsonObject(with: Data(account.json.utf8)) as? [String: Any])
            let file = directory.path + "/demo.json"
            try account.json.write(toFile: file, atomically: true, encoding: .utf8)
            let saved = try await browser.call(
                ["-X", "POST", "-F", "csrf=\(csrf)", "-F", "serviceAccountFile=@\(file);type=application/json"],
                "/dashboard/apps/demo/credentials/fcm")
            #expect(saved.status == 200 && saved.body.contains("FCM service account saved"), "\(saved.body)")
            #expect(saved.body.contains("<code class=\"fcm-project\">demo</code>"))
            #expect(saved.body.contains(try #require(accountJSON["client_email"] as? String)))
            #expect(saved.body.contains(try #require(accountJSON["private_key_id"] as? String)))
            let keyLines = (accountJSON["private_key"] as? String ?? "").split(separator: "\n").filter { !$0.hasPrefix("-----") }
            #expect(keyLines.count > 2 && !keyLines.contains { saved.body.contains($0) }, "the key is never shown")
            #expect((try await browser.get("/dashboard/apps")).body.contains("<code class=\"fcm-project\">demo</code>"))
            let own = try await browser.post("/dashboard/apps/demo/credentials/fcm/check", [("csrf", csrf)])
            #expect(own.body.contains("<strong>FCM: key and project OK.</strong>"), "\(own.body)")

            // A key the token endpoint does not know: the key is bad.
            let tokenURI = try #require(accountJSON["token_uri"] as? String)
            let stranger = try FCMServiceAccount.generate(projectID: "demo", tokenURI: tokenURI)
            #expect(try await self.upload(browser, stranger.json, csrf: csrf).status == 200)
            let bad = try await browser.post("/dashboard/apps/demo/credentials/fcm/check", [("csrf", csrf)])
            #expect(bad.body.contains("<strong>FCM: the key is bad.</strong>"), "\(bad.body)")

            // A good key sent for another project: the project (or its API) is wrong.
            var otherProject = accountJSON
            otherProject["project_id"] = "someone-else"
            let otherJSON = String(decoding: try JSONSerialization.data(withJSONObject: otherProject), as: UTF8.self)
            #expect(try await self.upload(browser, otherJSON, csrf: csrf).status == 200)
            let wrong = try await browser.post("/dashboard/apps/demo/credentials/fcm/check", [("csrf", csrf)])
            #expect(wrong.body.contains("<strong>FCM: the project or its API is wrong.</strong>") && wrong.body.contains("403"), "\(wrong.body)")

            // Deleted (audited): back to the built-in emulator.
            let deleted = try await browser.post("/dashboard/apps/demo/credentials/fcm/delete", [("csrf", csrf)])
            #expect(
                deleted.body.contains("FCM service account deleted.") && deleted.body.contains("<dd id=\"fcm-credential\">built-in FCM emulator</dd>")
            )
            let audit = try await context.api.call("GET", "/v1/audit", key: context.admin)
            #expect("\(audit.body)".contains("credentials.delete"), "\(audit.body)")

            // An Android phone: its platform in the list, on its page, on the overview.
            let android = emulator.createDevice(projectID: "demo")
            let registered = try await context.api.call(
                "POST", "/v1/apps/demo/registrations", key: keys.register, json: #"{"transport":"fcm","token":"\#(android)"}"#)
            #expect(registered.status == 200, "\(registered.body)")
            let devices = try await browser.get("/dashboard/apps/demo/devices")
            #expect(devices.body.contains("<td class=\"platform\">fcm</td>"), "\(devices.body)")
            let device = try await browser.get("/dashboard/apps/demo/devices/fcm:\(android)")
            #expect(device.status == 200 && device.body.contains("<dt>Platform</dt><dd>fcm</dd>"), "\(device.body)")
            let prefix = try await browser.get("/dashboard/apps/demo/devices?by=prefix&q=fcm:\(android.prefix(8))")
            #expect(prefix.body.contains("1 device found"), "\(prefix.body)")
            let overview = try await browser.get("/dashboard")
            #expect(overview.body.contains("id=\"devices-fcm\">1<") && overview.body.contains("id=\"devices-apns\">0<"), "\(overview.body)")

            // The send form's preview: the FCM message for this phone; APNs only for a VoIP push.
            let preview = try await browser.post(
                "/dashboard/apps/demo/preview", [("to", "token"), ("target", "fcm:\(android)"), ("title", "Hi"), ("body", "There"), ("csrf", csrf)])
            let previewed = try #require(try JSONSerialization.jsonObject(with: Data(preview.body.utf8)) as? [String: Any])
            let message = try #require(previewed["android"] as? String)
            #expect(message.contains("\"token\": \"\(android)\"") && message.contains("\"title\": \"Hi\""), "\(previewed)")
            #expect((previewed["androidNote"] as? String)?.contains("bytes") == true)
            let voip = try await browser.post(
                "/dashboard/apps/demo/preview",
                [("to", "user"), ("target", "ann"), ("pushType", "voip"), ("custom", #"{"call":"1"}"#), ("csrf", csrf)])
            let voipPreview = try #require(try JSONSerialization.jsonObject(with: Data(voip.body.utf8)) as? [String: Any])
            #expect(voipPreview["androidNote"] as? String == "APNs only: push type voip is APNs's alone.", "\(voipPreview)")
            let sendPage = try await browser.post(
                "/dashboard/apps/demo/send", [("to", "tag"), ("target", "beta"), ("title", "Hi"), ("action", "preview"), ("csrf", csrf)])
            #expect(sendPage.body.contains("id=\"preview-android\">{"), "\(sendPage.body)")

            // Sent from the form: the delivery's platform in the log.
            let sent = try await browser.post(
                "/dashboard/apps/demo/send", [("to", "token"), ("target", "fcm:\(android)"), ("title", "Hi"), ("action", "send"), ("csrf", csrf)])
            #expect(sent.status == 303, "\(sent.status) \(sent.body)")
            let location = try #require(
                sent.headers.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("location:") }.map {
                    $0.dropFirst("location:".count).trimmingCharacters(in: .whitespacesAndNewlines)
                })
            let log = try await self.server.eventually(
                "the FCM delivery sent", { try await browser.get(location).body }, until: { $0.contains("<span class=\"state sent\">sent</span>") })
            #expect(log.contains("<td class=\"platform\">fcm</td>"), "\(log)")
            #expect(emulator.inbox(android).count == 1)
        }
    }

    func upload(_ browser: DashboardTests.Browser, _ json: String, csrf: String) async throws -> (status: Int, body: String, headers: String) {
        try await browser.post("/dashboard/apps/demo/credentials/fcm", [("serviceAccount", json), ("csrf", csrf)])
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMEmulator
import HeraldTesting
import Testing

/// The `/emulator/` control API over HTTP.
@Suite(.heavy) struct ControlAPITests {
    @Test("service accounts, devices, messages and counters over HTTP")
    func roundTrip() async throws {
        try await withFixture { fixture in
            let port = fixture.port
            let made = try await RawHTTPClient.json(port: port, "POST", "/emulator/service-accounts", #"{"projectId":"http-project"}"#)
            #expect(made.status == 200)
            let account = try FCMServiceAccount(json: made.body)
            #expect(account.projectID == "http-project")
            #expect(account.tokenURI == fixture.emulator.tokenURL)
            #expect(account.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
            #expect(account.clientEmail.hasPrefix("firebase-adminsdk-") && account.clientEmail.hasSuffix("@http-project.iam.gserviceaccount.com"))
            for key in ["type", "auth_uri", "auth_provider_x509_cert_url", "client_x509_cert_url", "client_id"] {
                #expect(made.json?[key]?.stringValue?.isEmpty == false)
            }

            let device = try await RawHTTPClient.json(port: port, "POST", "/emulator/devices", #"{"projectId":"http-project","kind":"token"}"#)
            let token = try #require(device.json?["token"]?.stringValue)
            #expect(token.contains(":APA91b"))
            #expect(token.split(separator: ":").first?.count == 22)
            #expect(token.count == 22 + 7 + 134)

            let access = try await fixture.accessToken(account: account)
            let sent = try await fixture.send(
                Fixture.body(#"{"token":"\#(token)","notification":{"title":"T","body":"B"}}"#), accessToken: access, project: "http-project"
            )
            #expect(sent.status == 200)
            let inbox = try await RawHTTPClient.json(port: port, "GET", "/emulator/devices/\(token)/messages")
            let messages = try #require(inbox.json?["messages"]?.arrayValue)
            #expect(messages.count == 1)
            let record = try FCMMessageRecord(json: messages[0].jsonString)
            #expect(record == fixture.emulator.inbox(token).first)
            #expect(record.kind == "notification" && record.title == "T")

            let counters = try await RawHTTPClient.json(port: port, "GET", "/emulator/counters")
            #expect(counters.json?["delivered"]?.intValue == 1)
            #expect(counters.json?["tokensIssued"]?.intValue == 1)

            let uninstalled = try await RawHTTPClient.json(port: port, "DELETE", "/emulator/devices/\(token)")
            #expect(uninstalled.json?["installed"]?.boolValue == false)
            let after = try await fixture.send(Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#), accessToken: access, project: "http-project")
            #expect(after.errorCode == "UNREGISTERED")

            let missing = try await RawHTTPClient.json(port: port, "GET", "/emulator/devices/nope/messages")
            #expect(missing.status == 404)
            #expect(missing.json?["error"]?["code"]?.intValue == 404)
        }
    }

    @Test("an account made elsewhere can be imported")
    func importAccount() async throws {
        try await withFixture { fixture in
            let outside = try FCMServiceAccount.generate(projectID: Fixture.project)
            let imported = try await RawHTTPClient.json(port: fixture.port, "POST", "/emulator/service-accounts/import", outside.json)
            #expect(imported.status == 200)
            _ = try await fixture.accessToken(account: outside)
            let bad = try await RawHTTPClient.json(port: fixture.port, "POST", "/emulator/service-accounts/import", #"{"type":"user"}"#)
            #expect(bad.status == 400)
        }
    }

    @Test("faults, token expiry and lifetime over HTTP")
    func faultsAndTokens() async throws {
        try await withFixture { fixture in
            let port = fixture.port
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let access = try await fixture.accessToken()
            let body = Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#)
            let queued = try await RawHTTPClient.json(
                port: port, "POST", "/emulator/faults", #"{"faults":[{"status":503,"retryAfter":2},{"drop":true},{"status":500}]}"#
            )
            #expect(queued.json?["queued"]?.intValue == 3)
            let unavailable = try await fixture.send(body, accessToken: access)
            #expect(unavailable.status == 503)
            #expect(unavailable.headers["retry-after"] == "2")
            await #expect(throws: RawHTTPError.closedWithoutResponse) { try await fixture.send(body, accessToken: access) }
            _ = try await RawHTTPClient.json(port: port, "DELETE", "/emulator/faults")
            #expect(try await fixture.send(body, accessToken: access).status == 200)

            let expired = try await RawHTTPClient.json(port: port, "POST", "/emulator/access-tokens/expire")
            #expect(expired.json?["expired"]?.intValue == 1)
            #expect(try await fixture.send(body, accessToken: access).status == 401)

            let lifetime = try await RawHTTPClient.json(port: port, "PUT", "/emulator/access-tokens/lifetime", #"{"seconds":120}"#)
            #expect(lifetime.json?["seconds"]?.intValue == 120)
            let grant = try await fixture.tokenRequest(assertion: try fixture.assertion())
            #expect(grant.json?["expires_in"]?.intValue == 119)
            let invalid = try await RawHTTPClient.json(port: port, "POST", "/emulator/faults", #"{"faults":[{"status":200}]}"#)
            #expect(invalid.status == 400)
        }
    }

    @Test("the event stream carries each delivered message")
    func stream() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let access = try await fixture.accessToken()
            let events = try await EventStreamClient.open(port: fixture.port, path: "/emulator/devices/\(token)/stream")
            defer { events.close() }
            for index in 1...2 {
                let sent = try await fixture.send(Fixture.body(#"{"token":"\#(token)","data":{"n":"\#(index)"}}"#), accessToken: access)
                #expect(sent.status == 200)
                let data = try #require(await events.next())
                let record = try FCMMessageRecord(json: data)
                #expect(record.data == ["n": "\(index)"])
                #expect(sent.json?["name"]?.stringValue?.hasSuffix(record.messageID) == true)
            }
            // Uninstalling ends the stream.
            fixture.emulator.uninstall(token)
            #expect(await events.next() == nil)
        }
    }

    @Test("an open event stream does not hold up stop()")
    func stopWithOpenStream() async throws {
        let events = try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            return try await EventStreamClient.open(port: fixture.port, path: "/emulator/devices/\(token)/stream")
        }
        #expect(await events.next() == nil)
        events.close()
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMEmulator
import HeraldTesting
import Testing

/// `messages:send` to virtual devices: delivery and the target errors.
@Suite(.heavy) struct SendTests {
    @Test("a message sent with the access token lands in the device's inbox")
    func delivers() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project, packageName: "com.example.chat")
            let access = try await fixture.accessToken()
            async let arrived = fixture.emulator.messages(token, count: 2)
            let first = try await fixture.send(
                Fixture.body(
                    #"{"token":"\#(token)","notification":{"title":"Hi","body":"There"},"data":{"room":"7"},"#
                        + ##""android":{"priority":"normal","ttl":"3600.5s","collapse_key":"chat","notification":{"title":"Hey","channel_id":"msgs","color":"#ff0000"},"direct_boot_ok":true}}"##
                ),
                accessToken: access
            )
            #expect(first.status == 200)
            let name = try #require(first.json?["name"]?.stringValue)
            #expect(name.hasPrefix("projects/\(Fixture.project)/messages/"))
            // A data message, spelled in lowerCamelCase; android.data replaces message.data.
            let fid = fixture.emulator.createInstallation(projectID: Fixture.project)
            #expect(fid.count == 22 && "cdef".contains(fid.first!))
            let second = try await fixture.send(
                Fixture.body(#"{"token":"\#(token)","data":{"k":"v"},"android":{"data":{"only":"this"},"collapseKey":"c","directBootOk":false}}"#),
                accessToken: access
            )
            #expect(second.status == 200)
            let records = await arrived
            #expect(records.count == 2)
            let record = records[0]
            #expect(name.hasSuffix("/" + record.messageID))
            #expect(record.kind == "notification")
            #expect(record.title == "Hey")
            #expect(record.body == "There")
            #expect(record.data == ["room": "7"])
            #expect(record.priority == "normal")
            #expect(record.ttlSeconds == 3600)
            #expect(record.collapseKey == "chat")
            #expect(record.channelID == "msgs")
            #expect(record.directBootOK)
            #expect(try JSONValue.parse(record.raw)["token"]?.stringValue == token)
            #expect(records[1].kind == "data")
            #expect(records[1].priority == "normal")
            #expect(records[1].data == ["only": "this"])
            #expect(records[1].collapseKey == "c")

            let toFID = try await fixture.send(Fixture.body(#"{"fid":"\#(fid)","notification":{"title":"T"}}"#), accessToken: access)
            #expect(toFID.status == 200)
            let fidRecords = await fixture.emulator.messages(fid, count: 1)
            #expect(fidRecords.first?.priority == "high")
            #expect(fixture.emulator.counters.delivered == 3)
            #expect(fixture.emulator.counters.sendRequests == 3)
        }
    }

    @Test("validate_only checks without delivering")
    func validateOnly() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let access = try await fixture.accessToken()
            let response = try await fixture.send(
                Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#, validateOnly: true), accessToken: access
            )
            #expect(response.status == 200)
            #expect(response.json?["name"]?.stringValue == "projects/\(Fixture.project)/messages/fake_message_id")
            #expect(fixture.emulator.inbox(token).isEmpty)
        }
    }

    @Test("a token the emulator never issued is not a valid registration token")
    func unknownToken() async throws {
        try await withFixture { fixture in
            let access = try await fixture.accessToken()
            let issued = fixture.emulator.createDevice(projectID: Fixture.project)
            let lookalike = String(issued.dropLast(3)) + "abc"
            for target in [#""token":"nonsense""#, #""token":"\#(lookalike)""#, #""fid":"\#(issued)""#] {
                let response = try await fixture.send(Fixture.body("{\(target),\"data\":{\"a\":\"b\"}}"), accessToken: access)
                #expect(response.status == 400)
                #expect(response.googleStatus == "INVALID_ARGUMENT")
                #expect(response.errorCode == "INVALID_ARGUMENT")
                #expect(response.googleMessage == "The registration token is not a valid FCM registration token")
            }
            #expect(fixture.emulator.counters.refused["INVALID_ARGUMENT"] == 3)
        }
    }

    @Test("an uninstalled app's token is UNREGISTERED")
    func uninstalled() async throws {
        try await withFixture { fixture in
            let access = try await fixture.accessToken()
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            fixture.emulator.uninstall(token)
            let response = try await fixture.send(Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#), accessToken: access)
            #expect(response.status == 404)
            #expect(response.googleStatus == "NOT_FOUND")
            #expect(response.errorCode == "UNREGISTERED")
            #expect(response.googleMessage == "Requested entity was not found.")
            #expect(fixture.emulator.counters.refused["UNREGISTERED"] == 1)
        }
    }

    @Test("another project's device is a SENDER_ID_MISMATCH")
    func senderMismatch() async throws {
        try await withFixture { fixture in
            let access = try await fixture.accessToken()
            let token = fixture.emulator.createDevice(projectID: "someone-else")
            let response = try await fixture.send(Fixture.body(#"{"token":"\#(token)","data":{"a":"b"}}"#), accessToken: access)
            #expect(response.status == 403)
            #expect(response.googleStatus == "PERMISSION_DENIED")
            #expect(response.errorCode == "SENDER_ID_MISMATCH")
            #expect(response.googleMessage == "SenderId mismatch")
        }
    }

    @Test("a restricted package name must match the app")
    func restrictedPackage() async throws {
        try await withFixture { fixture in
            let access = try await fixture.accessToken()
            let token = fixture.emulator.createDevice(projectID: Fixture.project, packageName: "com.example.a")
            let wrong = try await fixture.send(
                Fixture.body(#"{"token":"\#(token)","android":{"restricted_package_name":"com.example.b"}}"#), accessToken: access
            )
            #expect(wrong.status == 400)
            #expect(wrong.errorCode == "INVALID_ARGUMENT")
            let right = try await fixture.send(
                Fixture.body(#"{"token":"\#(token)","android":{"restrictedPackageName":"com.example.a"}}"#), accessToken: access
            )
            #expect(right.status == 200)
        }
    }

    @Test("topics and conditions are accepted and reach nobody")
    func topics() async throws {
        try await withFixture { fixture in
            let access = try await fixture.accessToken()
            let topic = try await fixture.send(Fixture.body(#"{"topic":"news","data":{"a":"b"}}"#), accessToken: access)
            #expect(topic.status == 200)
            let condition = try await fixture.send(
                Fixture.body(#"{"condition":"'a' in topics && 'b' in topics","data":{"a":"b"}}"#), accessToken: access
            )
            #expect(condition.status == 200)
            let badTopic = try await fixture.send(Fixture.body(#"{"topic":"/topics/news"}"#), accessToken: access)
            #expect(badTopic.status == 400)
        }
    }
}

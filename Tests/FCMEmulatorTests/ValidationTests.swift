// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMEmulator
import Foundation
import HeraldTesting
import Testing

/// The request checks of `messages:send`, answered with FCM's error envelopes.
@Suite(.heavy) struct ValidationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var message: String
        var googleMessage: String?
        var errorCode: String?
        var field: String?
        var testDescription: String { self.name }
    }

    static let token = "TOKEN"

    static let cases: [Case] = [
        Case(
            name: "a non-string data value", message: #"{"token":"TOKEN","data":{"a":"b","n":12}}"#,
            googleMessage: "Invalid value at 'message.data[1].value' (TYPE_STRING), 12", field: "message.data[1].value"
        ),
        Case(
            name: "a reserved data key", message: #"{"token":"TOKEN","data":{"from":"me"}}"#, googleMessage: "Invalid data key",
            errorCode: "INVALID_ARGUMENT", field: "message.data"
        ),
        Case(
            name: "a reserved data-key prefix in android.data", message: #"{"token":"TOKEN","android":{"data":{"google.x":"1"}}}"#,
            googleMessage: "Invalid data key", errorCode: "INVALID_ARGUMENT", field: "message.android.data"
        ),
        Case(
            name: "a ttl that is not a duration", message: #"{"token":"TOKEN","android":{"ttl":"3600"}}"#,
            googleMessage: #"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), "3600""#,
            field: "message.android.ttl"
        ),
        Case(
            name: "a ttl over four weeks", message: #"{"token":"TOKEN","android":{"ttl":"2419201s"}}"#, googleMessage: "Invalid TTL",
            errorCode: "INVALID_ARGUMENT", field: "message.android.ttl"
        ),
        Case(
            name: "two targets", message: #"{"token":"TOKEN","topic":"news"}"#,
            googleMessage: "Invalid JSON payload received. Oneof field 'target' is already set. Cannot set 'topic'", field: "message"
        ),
        Case(
            name: "no target", message: #"{"data":{"a":"b"}}"#, googleMessage: "Recipient of the message is not set.",
            errorCode: "INVALID_ARGUMENT", field: "message"
        ),
        Case(
            name: "an unknown field", message: #"{"token":"TOKEN","x":1}"#,
            googleMessage: #"Invalid JSON payload received. Unknown name "x" at 'message': Cannot find field."#, field: "message"
        ),
        Case(
            name: "an unknown android field", message: #"{"token":"TOKEN","android":{"colapse_key":"a"}}"#,
            googleMessage: #"Invalid JSON payload received. Unknown name "colapse_key" at 'message.android': Cannot find field."#,
            field: "message.android"
        ),
        Case(
            name: "an unknown priority", message: #"{"token":"TOKEN","android":{"priority":"urgent"}}"#,
            googleMessage:
                #"Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), "urgent""#,
            field: "message.android.priority"
        ),
        Case(
            name: "a non-string title", message: #"{"token":"TOKEN","notification":{"title":true}}"#,
            googleMessage: "Invalid value at 'message.notification.title' (TYPE_STRING), true", field: "message.notification.title"
        ),
        Case(
            name: "a bad color", message: #"{"token":"TOKEN","android":{"notification":{"color":"red"}}}"#,
            errorCode: "INVALID_ARGUMENT", field: "message.android.notification.color"
        ),
        Case(
            name: "a message over 4096 bytes", message: #"{"token":"TOKEN","data":{"big":"\#(String(repeating: "x", count: 4094))"}}"#,
            googleMessage: "Request contains an invalid argument."
        ),
        Case(
            name: "a topic message over 2048 bytes", message: #"{"topic":"news","data":{"big":"\#(String(repeating: "x", count: 2046))"}}"#,
            googleMessage: "Request contains an invalid argument."
        ),
    ]

    @Test("refused with 400 INVALID_ARGUMENT", arguments: Self.cases)
    func refused(_ testCase: Case) async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let access = try await fixture.accessToken()
            let message = testCase.message.replacingOccurrences(of: Self.token, with: token)
            let response = try await fixture.send(Fixture.body(message), accessToken: access)
            #expect(response.status == 400, "\(response.body)")
            #expect(response.googleStatus == "INVALID_ARGUMENT")
            #expect(response.json?["error"]?["code"]?.intValue == 400)
            if let expected = testCase.googleMessage { #expect(response.googleMessage == expected) }
            #expect(response.errorCode == testCase.errorCode)
            #expect(response.fieldViolation == testCase.field)
            #expect(fixture.emulator.inbox(token).isEmpty)
        }
    }

    @Test("both spellings, lower-case enums and the full AndroidNotification are accepted")
    func accepted() async throws {
        try await withFixture { fixture in
            let token = fixture.emulator.createDevice(projectID: Fixture.project)
            let access = try await fixture.accessToken()
            let message = #"""
                {"token":"\#(token)","name":"ignored","fcmOptions":{"analyticsLabel":"l"},
                 "notification":{"title":"t","body":"b","image":"https://example.com/i.png"},
                 "data":{"collapse_key":"allowed","x":"y"},
                 "apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"badge":1}}},
                 "webpush":{"headers":{"TTL":"15"}},
                 "android":{"priority":"HIGH","ttl":"0s","fcm_options":{"analytics_label":"a"},"bandwidthConstrainedOk":true,
                  "notification":{"icon":"i","color":"#A0b1C2","sound":"default","tag":"t","click_action":"OPEN",
                   "bodyLocKey":"k","body_loc_args":["1"],"title_loc_key":"tk","titleLocArgs":[],"channelId":"c","ticker":"tk",
                   "sticky":false,"event_time":"2026-01-02T03:04:05.123Z","local_only":true,"notification_priority":"priority_high",
                   "default_sound":true,"defaultVibrateTimings":false,"default_light_settings":false,"vibrate_timings":["0.5s","1s"],
                   "visibility":"public","notification_count":"3",
                   "light_settings":{"color":{"red":1,"green":0.5,"blue":0,"alpha":1},"light_on_duration":"0.1s","lightOffDuration":"0.2s"},
                   "image":"https://example.com/j.png","proxy":"allow","bypass_proxy_notification":false}}}
                """#
            let response = try await fixture.send(Fixture.body(message), accessToken: access)
            #expect(response.status == 200, "\(response.body)")
            let record = try #require(await fixture.emulator.messages(token, count: 1).first)
            #expect(record.priority == "high")
            #expect(record.ttlSeconds == 0)
            #expect(record.image == "https://example.com/j.png")
            #expect(record.channelID == "c")
            #expect(record.data == ["collapse_key": "allowed", "x": "y"])
        }
    }
}

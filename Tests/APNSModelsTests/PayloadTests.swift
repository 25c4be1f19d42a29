// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Testing

@Suite struct PayloadTests {
    @Test("a typed alert payload encodes to the documented keys")
    func typedAlert() throws {
        let payload = Payload(
            aps: APS(
                alert: .fields(AlertFields(title: "Hi", subtitle: "Sub", body: "Body", locKey: "K", locArgs: ["a"])),
                badge: 3, sound: .default, threadID: "t", category: "c", mutableContent: true,
                targetContentID: "w", interruptionLevel: .timeSensitive, relevanceScore: 0.5, filterCriteria: "f"
            ),
            custom: [("orderId", 42)]
        )
        let bytes = try payload.encode(for: .alert)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == #"{"aps":{"alert":{"title":"Hi","subtitle":"Sub","body":"Body","loc-key":"K","loc-args":["a"]},"badge":3,"sound":"default","thread-id":"t","category":"c","mutable-content":1,"target-content-id":"w","interruption-level":"time-sensitive","relevance-score":0.5,"filter-criteria":"f"},"orderId":42}"#
        )
        #expect(try Payload(json: JSONValue.parse(bytes)) == payload)
    }

    @Test("critical sounds encode as a dictionary")
    func criticalSound() throws {
        let payload = Payload(aps: APS(alert: .body("x"), sound: .critical(name: "siren.caf", volume: 0.8)))
        #expect(payload.json["aps"]?["sound"] == ["critical": 1, "name": "siren.caf", "volume": 0.8])
        #expect(throws: APNSValidationError.self) {
            try Payload(aps: APS(alert: .body("x"), sound: .critical(name: "s", volume: 1.5))).encode(for: .alert)
        }
    }

    static func padded(_ total: Int) -> Payload {
        // {"aps":{"content-available":1},"p":"…"} is 38 bytes plus the padding.
        Payload(aps: APS(contentAvailable: true), custom: [("p", .string(String(repeating: "x", count: total - 38)))])
    }

    @Test("size limits hold at the exact byte: 4096, and 5120 for VoIP")
    func sizeLimits() throws {
        #expect(try Self.padded(4096).encode(for: .background).count == 4096)
        #expect(throws: APNSValidationError.self) { try Self.padded(4097).encode(for: .background) }
        #expect(try Self.padded(5120).encode(for: .voip).count == 5120)
        #expect(throws: APNSValidationError.self) { try Self.padded(5121).encode(for: .voip) }
        let error = #expect(throws: APNSValidationError.self) { try Self.padded(4097).encode(for: .alert) }
        #expect(error?.code == .payloadTooLarge)
        #expect(error?.message.contains("4097") == true)
        // Multi-byte characters count as bytes, not characters.
        let wide = Payload(aps: APS(alert: .body(String(repeating: "é", count: 2040))))
        #expect(throws: APNSValidationError.self) { try wide.encode(for: .alert) }
    }

    @Test("background pushes carry content-available and nothing user-facing")
    func backgroundRules() throws {
        _ = try Payload(aps: APS(contentAvailable: true)).encode(for: .background)
        #expect(throws: APNSValidationError.self) { try Payload(aps: APS()).encode(for: .background) }
        #expect(throws: APNSValidationError.self) {
            try Payload(aps: APS(alert: .body("x"), contentAvailable: true)).encode(for: .background)
        }
    }

    @Test("Live Activity events need their keys")
    func liveActivityRules() throws {
        let state: JSONValue = ["score": 1]
        let update = Payload(aps: APS(timestamp: 1_700_000_000, event: .update, contentState: state, staleDate: 1_700_000_600))
        _ = try update.encode(for: .liveactivity)
        let start = Payload(
            aps: APS(
                alert: .fields(AlertFields(title: "Go", body: "Started")), timestamp: 1, event: .start,
                contentState: state, attributesType: "MatchAttributes", attributes: ["team": "A"], inputPushToken: true
            )
        )
        _ = try start.encode(for: .liveactivity)
        let end = Payload(aps: APS(timestamp: 1, event: .end, contentState: state, dismissalDate: 2))
        _ = try end.encode(for: .liveactivity)

        var noAttributes = start
        noAttributes.aps.attributes = nil
        #expect(throws: APNSValidationError.self) { try noAttributes.encode(for: .liveactivity) }
        var channelOnUpdate = update
        channelOnUpdate.aps.inputPushChannel = "dGVzdA=="
        #expect(throws: APNSValidationError.self) { try channelOnUpdate.encode(for: .liveactivity) }
        var dismissalOnUpdate = update
        dismissalOnUpdate.aps.dismissalDate = 5
        #expect(throws: APNSValidationError.self) { try dismissalOnUpdate.encode(for: .liveactivity) }
        #expect(throws: APNSValidationError.self) { try update.encode(for: .alert) }
        #expect(throws: APNSValidationError.self) { try Payload(aps: APS(event: .update)).encode(for: .liveactivity) }
    }

    @Test("widgets and controls pushes need content-changed")
    func widgetRules() throws {
        _ = try Payload(aps: APS(contentChanged: true)).encode(for: .widgets)
        _ = try Payload(aps: APS(contentChanged: true)).encode(for: .controls)
        #expect(throws: APNSValidationError.self) { try Payload(aps: APS()).encode(for: .widgets) }
    }

    @Test("VoIP, push-to-talk and MDM payloads need no aps")
    func noAPS() throws {
        let call = Payload(custom: [("callUUID", "x"), ("handle", "y")], includesAPS: false)
        #expect(String(decoding: try call.encode(for: .voip), as: UTF8.self) == #"{"callUUID":"x","handle":"y"}"#)
        _ = try Payload(custom: [("activeSpeaker", "z")], includesAPS: false).encode(for: .pushtotalk)
        _ = try Payload(custom: [("mdm", "magic")], includesAPS: false).encode(for: .mdm)
        #expect(throws: APNSValidationError.self) { try Payload(custom: [("a", 1)], includesAPS: false).encode(for: .alert) }
    }

    @Test("raw JSON keeps unknown aps keys and checks known ones")
    func rawJSON() throws {
        let json = try JSONValue.parse(#"{"aps":{"alert":"Hi","badge":1,"future-key":true},"x":[1,2]}"#)
        let payload = try Payload(json: json)
        #expect(payload.aps.alert == .body("Hi"))
        #expect(payload.aps.extra.first?.0 == "future-key")
        #expect(payload.json == json)
        for bad in [
            #"{"aps":{"badge":"one"}}"#, #"{"aps":{"interruption-level":"loud"}}"#, #"{"aps":[]}"#, "[1]", #"{"aps":{"sound":{"volume":1}}}"#,
        ] {
            #expect(throws: APNSValidationError.self) { try Payload(json: JSONValue.parse(bad)) }
        }
        #expect(throws: APNSValidationError.self) { try Payload(aps: APS(badge: -1)).encode(for: .alert) }
        #expect(throws: APNSValidationError.self) { try Payload(aps: APS(alert: .body("x")), custom: [("aps", 1)]).encode(for: .alert) }
        #expect(throws: APNSValidationError.self) { try Payload(aps: APS(alert: .body("x"), relevanceScore: 3)).encode(for: .alert) }
    }
}

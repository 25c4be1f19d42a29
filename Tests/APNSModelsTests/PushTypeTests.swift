// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Testing

@Suite struct PushTypeTests {
    static let expectedTopics: [(PushType, String)] = [
        (.alert, "com.example.app"),
        (.background, "com.example.app"),
        (.complication, "com.example.app.complication"),
        (.controls, "com.example.app.push-type.controls"),
        (.fileprovider, "com.example.app.pushkit.fileprovider"),
        (.liveactivity, "com.example.app.push-type.liveactivity"),
        (.location, "com.example.app.location-query"),
        (.mdm, "com.example.app"),
        (.pushtotalk, "com.example.app.voip-ptt"),
        (.voip, "com.example.app.voip"),
        (.widgets, "com.example.app.push-type.widgets"),
    ]

    @Test("there are exactly the eleven push types of the reference")
    func allPushTypes() {
        #expect(
            PushType.allCases.map(\.rawValue).sorted() == [
                "alert", "background", "complication", "controls", "fileprovider", "liveactivity", "location", "mdm",
                "pushtotalk", "voip", "widgets",
            ])
        #expect(PushType(rawValue: "Alert") == nil)
        #expect(PushType(rawValue: "notification") == nil)
    }

    @Test("each push type derives its topic from the bundle id", arguments: PushTypeTests.expectedTopics)
    func topics(pushType: PushType, topic: String) throws {
        #expect(pushType.topic(forBundleID: "com.example.app") == topic)
        #expect(pushType.bundleID(fromTopic: topic) == "com.example.app")
        try NotificationHeaders(pushType: pushType, topic: topic).validate()
    }

    @Test("a topic without the push type's suffix is refused", arguments: PushType.allCases.filter { $0 != .mdm })
    func wrongSuffix(pushType: PushType) {
        let wrong = pushType.topicSuffix!.isEmpty ? "com.example.app.voip" : "com.example.app"
        let error = #expect(throws: APNSValidationError.self) { try NotificationHeaders(pushType: pushType, topic: wrong).validate() }
        #expect(error?.code == .topicSuffixMismatch)
    }

    @Test("background pushes must use priority 5; the others take 10, 5 or 1")
    func priorities() throws {
        for pushType in PushType.allCases {
            for priority in [Priority.immediate, .throttled, .powerConsiderate] {
                let headers = NotificationHeaders(pushType: pushType, topic: pushType.topic(forBundleID: "a.b"), priority: priority)
                #expect(pushType.allows(priority) == pushType.allowedPriorities.contains(priority))
                if pushType == .background && priority != .throttled {
                    #expect(throws: APNSValidationError.self) { try headers.validate() }
                } else {
                    try headers.validate()
                }
            }
        }
        #expect(Priority(rawValue: 7) == nil)
        #expect(PushType.background.defaultPriority == .throttled)
        #expect(PushType.alert.defaultPriority == .immediate)
    }

    @Test("location and Live Activity need token auth; MDM needs a certificate")
    func authModes() {
        let certificateOnly = PushType.allCases.filter { !$0.allowsTokenAuthentication }
        let tokenOnly = PushType.allCases.filter { !$0.allowsCertificateAuthentication }
        #expect(certificateOnly == [.mdm])
        #expect(Set(tokenOnly) == [.location, .liveactivity])
    }

    @Test("collapse ids are limited to 64 UTF-8 bytes")
    func collapseID() throws {
        try NotificationHeaders(pushType: .alert, topic: "a.b", collapseID: String(repeating: "x", count: 64)).validate()
        // 22 three-byte characters = 66 bytes, though only 22 characters.
        let wide = String(repeating: "€", count: 22)
        #expect(throws: APNSValidationError.self) {
            try NotificationHeaders(pushType: .alert, topic: "a.b", collapseID: wide).validate()
        }
        #expect(throws: APNSValidationError.self) {
            try NotificationHeaders(pushType: .alert, topic: "a.b", collapseID: String(repeating: "x", count: 65)).validate()
        }
    }

    @Test("apns-id must be a UUID and expiration an absolute time")
    func idAndExpiration() throws {
        try NotificationHeaders(pushType: .alert, topic: "a.b", apnsID: "123E4567-E89B-12D3-A456-426614174000").validate()
        #expect(throws: APNSValidationError.self) {
            try NotificationHeaders(pushType: .alert, topic: "a.b", apnsID: "not-a-uuid").validate()
        }
        #expect(Expiration.immediately.headerValue == "0")
        #expect(Expiration.storagePolicy.headerValue == nil)
        #expect(Expiration.after(60, from: 1_700_000_000).headerValue == "1700000060")
        var generator = SystemRandomNumberGenerator()
        #expect(UUIDText.isCanonical(UUIDText.random(using: &generator)))
        // The generator's two words, little end first, with the version and variant bits set.
        struct Words: RandomNumberGenerator {
            var words: [UInt64]
            mutating func next() -> UInt64 { self.words.removeFirst() }
        }
        var words = Words(words: [0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210])
        #expect(UUIDText.random(using: &words) == "efcdab89-6745-4301-9032-547698badcfe")
    }

    @Test("device tokens are hex of any even length, kept lowercase")
    func deviceTokens() throws {
        let classic = try DeviceToken(hex: String(repeating: "AB", count: 32))
        #expect(classic.hex == String(repeating: "ab", count: 32))
        #expect(classic.bytes.count == 32)
        let liveActivity = try DeviceToken(hex: String(repeating: "0f", count: 80))
        #expect(liveActivity.bytes.count == 80)
        #expect(try DeviceToken(bytes: [0x00, 0xff, 0x10]).hex == "00ff10")
        #expect(!classic.redacted.contains(classic.hex))
        for bad in ["", "abc", "zz", String(repeating: "a", count: 1026)] {
            #expect(throws: APNSValidationError.self) { try DeviceToken(hex: bad) }
        }
    }
}

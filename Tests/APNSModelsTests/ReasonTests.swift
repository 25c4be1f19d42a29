// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Testing

@Suite struct ReasonTests {
    static let expected: [(String, Int, FailureClass)] = [
        ("BadCollapseId", 400, .fixAndDrop), ("BadDeviceToken", 400, .invalidateToken),
        ("BadExpirationDate", 400, .fixAndDrop), ("BadMessageId", 400, .fixAndDrop), ("BadPriority", 400, .fixAndDrop),
        ("BadTopic", 400, .fixAndDrop), ("DeviceTokenNotForTopic", 400, .invalidateToken),
        ("DuplicateHeaders", 400, .fixAndDrop), ("IdleTimeout", 400, .retryLater), ("InvalidPushType", 400, .fixAndDrop),
        ("MissingDeviceToken", 400, .fixAndDrop), ("MissingTopic", 400, .fixAndDrop), ("PayloadEmpty", 400, .fixAndDrop),
        ("TopicDisallowed", 400, .fixAndDrop), ("BadCertificate", 403, .fixAndDrop),
        ("BadCertificateEnvironment", 403, .fixAndDrop), ("ExpiredProviderToken", 403, .retryLater),
        ("Forbidden", 403, .fixAndDrop), ("InvalidProviderToken", 403, .fixAndDrop),
        ("MissingProviderToken", 403, .fixAndDrop), ("UnrelatedKeyIdInToken", 403, .retryLater),
        ("BadEnvironmentKeyIdInToken", 403, .fixAndDrop), ("BadPath", 404, .fixAndDrop),
        ("MethodNotAllowed", 405, .fixAndDrop), ("ExpiredToken", 410, .invalidateToken),
        ("Unregistered", 410, .invalidateToken), ("PayloadTooLarge", 413, .fixAndDrop),
        ("TooManyProviderTokenUpdates", 429, .retryLater), ("TooManyRequests", 429, .retryLater),
        ("InternalServerError", 500, .retryLater), ("ServiceUnavailable", 503, .retryLater), ("Shutdown", 503, .retryLater),
    ]

    @Test("every device-push reason has its status and class", arguments: ReasonTests.expected)
    func devicePush(reason: String, status: Int, failureClass: FailureClass) {
        let parsed = APNSReason(rawValue: reason)
        #expect(parsed.isKnown)
        #expect(parsed.status == status)
        #expect(parsed.failureClass == failureClass)
        #expect(APNSReason.devicePushReasons.contains { $0.reason == parsed && $0.status == status })
    }

    @Test("the table has all 32 device-push reasons of the reference and the broadcast ones")
    func completeness() {
        #expect(APNSReason.devicePushReasons.count == 32)
        #expect(Set(APNSReason.devicePushReasons.map(\.reason.rawValue)) == Set(Self.expected.map(\.0)))
        for reason in [
            "FeatureNotEnabled", "MissingChannelId", "BadChannelId", "ChannelNotRegistered", "BadRequestParams",
            "BadRequestPayload", "MissingPushType", "CannotCreateChannelConfig", "TopicMismatch", "Service Unavailable",
        ] {
            #expect(APNSReason(rawValue: reason).isKnown, "\(reason)")
        }
        #expect(APNSReason(rawValue: "Service Unavailable").failureClass == .retryLater)
        #expect(APNSReason(rawValue: "BadEnvironmentKeyInToken").status == 403)
    }

    @Test("unknown reasons are kept and classed by status")
    func unknown() {
        let reason = APNSReason(rawValue: "SomethingNew")
        #expect(!reason.isKnown)
        #expect(reason.rawValue == "SomethingNew")
        #expect(reason.failureClass(status: 410) == .invalidateToken)
        #expect(reason.failureClass(status: 429) == .retryLater)
        #expect(reason.failureClass(status: 502) == .retryLater)
        #expect(reason.failureClass(status: 400) == .fixAndDrop)
    }

    @Test("error bodies parse with the 410 timestamp in milliseconds")
    func errorBody() {
        let response = APNSErrorResponse(body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        #expect(response?.reason == .unregistered)
        #expect(response?.timestampMilliseconds == 1_700_000_000_123)
        #expect(APNSErrorResponse(body: Array("nope".utf8)) == nil)
        #expect(APNSErrorResponse(body: Array(#"{"reason":5}"#.utf8)) == nil)
        #expect(String(decoding: APNSErrorResponse(reason: .badTopic).body, as: UTF8.self) == #"{"reason":"BadTopic"}"#)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import HeraldServer

/// What each push service's answer means for a delivery (`WebPushTransport.answer`): the
/// statuses and bodies Apple, Mozilla and FCM document or were seen to send.
struct WebPushAnswerTests {
    static func answer(_ status: Int, _ body: String = "", location: String? = nil, retryAfter: Int64? = nil) -> TransportAnswer {
        WebPushTransport.answer(status: status, body: Array(body.utf8), location: location, retryAfter: retryAfter)
    }

    @Test("accepted: the Location's last segment is the service's message id")
    func sent() {
        #expect(Self.answer(201, location: "https://web.push.apple.com/m/abc123") == .sent(id: "abc123"))
        #expect(Self.answer(202) == .sent(id: nil))
    }

    @Test("a dead subscription (404, 410) invalidates its device, with the service's reason")
    func dead() {
        #expect(Self.answer(410, #"{"reason":"Unregistered"}"#) == .refused(status: 410, reason: "Unregistered", invalidate: true, timestamp: nil))
        #expect(
            Self.answer(404, #"{"code":404,"errno":102,"error":"Not Found"}"#)
                == .refused(status: 404, reason: "InvalidSubscription", invalidate: true, timestamp: nil))
        #expect(Self.answer(410, "") == .refused(status: 410, reason: "Gone", invalidate: true, timestamp: nil))
    }

    @Test("a subscription made with another VAPID key invalidates; any other VAPID fault does not")
    func vapid() {
        #expect(
            Self.answer(403, #"{"reason":"VapidPkHashMismatch"}"#)
                == .refused(status: 403, reason: "VapidPkHashMismatch", invalidate: true, timestamp: nil))
        #expect(
            Self.answer(
                403, "the VAPID credentials in the authorization header do not correspond to the credentials used to create the subscriptions.")
                == .refused(status: 403, reason: "VapidPkHashMismatch", invalidate: true, timestamp: nil))
        #expect(
            Self.answer(401, #"{"code":401,"errno":109,"error":"Unauthorized","message":"Invalid JWT"}"#)
                == .refused(status: 401, reason: "VapidUnauthorized", invalidate: false, timestamp: nil))
        #expect(Self.answer(403, #"{"reason":"BadJwtToken"}"#) == .refused(status: 403, reason: "BadJwtToken", invalidate: false, timestamp: nil))
    }

    @Test("429 and 5xx are retried no sooner than Retry-After; 413 and 400 fail without invalidating")
    func retriesAndRefusals() {
        #expect(
            Self.answer(429, #"{"reason":"TooManyRequests"}"#, retryAfter: 30_000)
                == .retryLater(status: 429, reason: "TooManyRequests", after: 30_000))
        #expect(Self.answer(503, "") == .retryLater(status: 503, reason: "Status503", after: nil))
        #expect(
            Self.answer(413, #"{"code":413,"errno":104}"#) == .refused(status: 413, reason: "PayloadTooLarge", invalidate: false, timestamp: nil))
        #expect(
            Self.answer(400, #"{"reason":"BadWebPushTopic"}"#) == .refused(status: 400, reason: "BadWebPushTopic", invalidate: false, timestamp: nil))
    }

    @Test("any collapse id makes a valid Topic: 32 base64url characters, the same every time")
    func topic() {
        for id in ["order-42", String(repeating: "é", count: 64), " "] {
            let topic = WebPushTransport.topic(id)
            #expect(topic.count == 32 && topic.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            #expect(topic == WebPushTransport.topic(id))
        }
        #expect(WebPushTransport.topic("a") != WebPushTransport.topic("b"))
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldServer
import HeraldTesting
import Testing
import WebPushEmulator

/// The web, end to end: a browser's subscription registered by body, one notification for
/// every platform, encrypted per subscription and posted with the app's VAPID header — against
/// the built-in Web Push emulator (a real socket; each personality checks VAPID, TTL, Urgency,
/// Topic and framing as its service does, and the virtual browser decrypts what it accepts) and
/// a real store.
extension ServerTests {
    /// A browser subscribed with app `demo`'s VAPID key (asked of Herald with the register key).
    func browser(
        _ context: Context, register: String, personality: WebPushPersonality = .mozilla
    ) async throws -> (emulator: WebPushEmulator, subscription: WebPushBrowserSubscription) {
        let emulator = try #require(context.server.webPushEmulator)
        let key = try await context.api.call("GET", "/v1/apps/demo/webpush/key", key: register)
        #expect(key.status == 200, "\(key.body)")
        let publicKey = try #require((key.body["publicKey"] as? String).flatMap(Base64URL.decode))
        return (emulator, try emulator.makeBrowser(personality: personality, applicationServerKey: publicKey))
    }

    func subscriptionJSON(
        _ subscription: WebPushBrowserSubscription, p256dh: String? = nil, auth: String? = nil, endpoint: String? = nil
    )
        -> String
    {
        #"{"endpoint":"\#(endpoint ?? subscription.endpoint)","expirationTime":null,"keys":{"p256dh":"\#(p256dh ?? subscription.p256dh)","auth":"\#(auth ?? subscription.auth)"}}"#
    }

    @Test(
        "one send to a user with an iPhone and two browsers (Apple's and Mozilla's push services) reaches all three", arguments: StoreDriver.enabled)
    func iPhoneAndBrowsers(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let iPhone = try await self.virtualDevice(context)
            #expect(
                try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(iPhone)", key: context.admin, json: #"{"environment":"sandbox","userId":"ann"}"#
                ).status == 200)
            var browsers: [(WebPushEmulator, WebPushBrowserSubscription)] = []
            for personality in [WebPushPersonality.apple, .mozilla] {
                let (emulator, subscription) = try await self.browser(context, register: keys.register, personality: personality)
                let assertion = try await self.assertion(context, send: keys.send, user: "ann", token: subscription.endpoint)
                let registered = try await context.api.call(
                    "POST", "/v1/apps/demo/registrations", key: keys.register,
                    json:
                        #"{"transport":"webpush","subscription":\#(self.subscriptionJSON(subscription)),"platform":"web","locale":"fr_FR","userAssertion":"\#(assertion)"}"#
                )
                #expect(registered.status == 200, "\(registered.body)")
                let token = try #require(registered.body["token"] as? String)
                #expect(token.hasPrefix("wp:") && token.count == 46)
                #expect(registered.body["transport"] as? String == "webpush")
                #expect(registered.body["userId"] as? String == "ann")
                // The endpoint is a capability: shown masked, the keys not at all.
                let shown = try #require(registered.body["endpoint"] as? String)
                #expect(shown.hasSuffix("…") && subscription.endpoint.hasPrefix(shown.dropLast()) && shown.count < subscription.endpoint.count)
                #expect(registered.body["publicKey"] is NSNull)
                let text = "\(registered.body)"
                #expect(!text.contains(subscription.auth) && !text.contains(subscription.p256dh) && !text.contains(subscription.endpoint))
                browsers.append((emulator, subscription))
            }
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json:
                    #"{"audience":{"users":["ann"]},"title":"Order shipped","body":"It left the warehouse","badge":2,"data":{"order":42},"link":"https://shop.example/orders/42","collapseId":"order-42","ttl":3600,"priority":10,"webpush":{"notification":{"icon":"https://shop.example/icon.png","tag":"orders"}}}"#
            )
            #expect(sent.status == 202, "\(sent.body)")
            #expect(sent.body["deliveries"] as? Int == 3)
            // Numeric data is the web's and APNs's to carry, not FCM's: the notification keeps to them.
            #expect(sent.body["transports"] as? [String] == ["apns", "webpush"])
            let id = try #require(sent.body["id"] as? String)
            let status = try await self.settled(context, key: keys.send, id: id)
            #expect((status["counts"] as? [String: Int])?["sent"] == 3, "\(status)")
            let deliveries = status["deliveries"] as? [[String: Any]] ?? []
            #expect(deliveries.filter { $0["transport"] as? String == "webpush" }.count == 2)
            #expect(deliveries.allSatisfy { $0["apnsId"] as? String != nil }, "each service's own message id")

            for (emulator, subscription) in browsers {
                let inbox = try await self.eventually(
                    "a message in the \(subscription.personality) browser", { emulator.inbox(subscription.id) },
                    until: { ($0?.messages.count ?? 0) >= 1 })
                let message = try #require(inbox?.messages.first)
                #expect(inbox?.decryptionFailures.isEmpty == true)
                let json = try #require(try JSONSerialization.jsonObject(with: Data(message.plaintext)) as? [String: Any])
                #expect(json["web_push"] as? Int == 8030)
                let notification = try #require(json["notification"] as? [String: Any])
                #expect(notification["title"] as? String == "Order shipped" && notification["body"] as? String == "It left the warehouse")
                #expect(notification["navigate"] as? String == "https://shop.example/orders/42")
                #expect(notification["icon"] as? String == "https://shop.example/icon.png" && notification["tag"] as? String == "orders")
                #expect((notification["data"] as? [String: Any])?["order"] as? Int == 42, "any JSON data on the web")
                #expect(json["app_badge"] as? Int == 2 && json["mutable"] as? Bool == true)
                #expect(notification["app_badge"] as? Int == 2 && notification["mutable"] as? Bool == true, "where WebKit reads them")
                #expect((json["hr"] as? String)?.count == 27, "the receipt id")
                #expect(message.urgency == "high")
                #expect((3000...3600).contains(message.ttl), "the time to live left: \(message.ttl)")
                #expect(message.topic?.count == 32, "the collapse id as a Topic")
            }
            // The receipt the browser reports is the delivery's.
            let hr = try #require(
                (try JSONSerialization.jsonObject(with: Data(browsers[0].0.inbox(browsers[0].1.id)?.messages.first?.plaintext ?? []))
                    as? [String: Any])?["hr"] as? String)
            let receipt = try await context.api.call(
                "POST", "/v1/apps/demo/receipts", key: keys.register, json: #"{"receipts":[{"receipt":"\#(hr)","event":"opened"}]}"#)
            #expect(receipt.status == 200 && receipt.body["applied"] as? Int == 1, "\(receipt.body)")
        }
    }

    @Test("a subscription Herald cannot use is refused with a stable code, and nothing is written")
    func subscriptionRefusals() async throws {
        try await self.withServer { context in
            let keys = try await self.setUp(context)
            let (_, subscription) = try await self.browser(context, register: keys.register)
            let valid = Base64URL.decode(subscription.p256dh) ?? []
            var offCurve = valid
            offCurve[64] ^= 0x01
            let cases: [(String, String)] = [
                (self.subscriptionJSON(subscription, p256dh: Base64URL.encode(valid.dropLast())), "bad_p256dh"),
                (self.subscriptionJSON(subscription, p256dh: Base64URL.encode(offCurve)), "bad_p256dh"),
                (self.subscriptionJSON(subscription, auth: Base64URL.encode([UInt8](repeating: 7, count: 15))), "bad_auth"),
                (self.subscriptionJSON(subscription, endpoint: "https://evil.example/push/1"), "endpoint_not_allowed"),
                (self.subscriptionJSON(subscription, endpoint: "http://fcm.googleapis.com/fcm/send/x"), "endpoint_not_allowed"),
                (self.subscriptionJSON(subscription, endpoint: "https://fcm.googleapis.com:8443/fcm/send/x"), "endpoint_not_allowed"),
                (self.subscriptionJSON(subscription, endpoint: "https://x@fcm.googleapis.com/fcm/send/x"), "endpoint_not_allowed"),
                (self.subscriptionJSON(subscription, endpoint: "http://127.0.0.1:1/wpush/v2/x"), "endpoint_not_allowed"),
                (self.subscriptionJSON(subscription, endpoint: "file:///etc/passwd"), "bad_endpoint"),
            ]
            for (json, code) in cases {
                let answer = try await context.api.call(
                    "POST", "/v1/apps/demo/registrations", key: keys.register, json: #"{"transport":"webpush","subscription":\#(json)}"#)
                #expect(answer.status == 400 && (answer.body["error"] as? [String: Any])?["code"] as? String == code, "\(json): \(answer.body)")
            }
            let missing = try await context.api.call(
                "POST", "/v1/apps/demo/registrations", key: keys.register, json: #"{"transport":"webpush","token":"abc"}"#)
            #expect((missing.body["error"] as? [String: Any])?["code"] as? String == "missing_subscription")
            let appleField = try await context.api.call(
                "POST", "/v1/apps/demo/registrations", key: keys.register,
                json: #"{"transport":"webpush","subscription":\#(self.subscriptionJSON(subscription)),"environment":"sandbox"}"#)
            #expect((appleField.body["error"] as? [String: Any])?["code"] as? String == "bad_environment")
            let listed = try await context.api.call("GET", "/v1/apps/demo/devices", key: keys.send)
            #expect((listed.body["devices"] as? [[String: Any]])?.isEmpty == true, "nothing written: \(listed.body)")
            // The doors: no key, another app's key.
            let anonymous = try await context.api.call("GET", "/v1/apps/demo/webpush/key", key: nil)
            #expect(anonymous.status == 401)
            #expect(try await context.api.call("POST", "/v1/apps/demo/webpush/key", key: keys.register).status == 403, "rotation is an admin's")
            // A send that only the web could carry is refused as the web would refuse it.
            let untitled = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"users":["ann"]},"body":"x","transports":["webpush"]}"#)
            #expect(
                untitled.status == 400 && (untitled.body["error"] as? [String: Any])?["code"] as? String == "webpush_needs_title", "\(untitled.body)")
            let large = String(repeating: "x", count: 4000)
            let tooLarge = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"users":["ann"]},"title":"t","body":"\#(large)","transports":["webpush"]}"#)
            #expect(
                tooLarge.status == 400 && (tooLarge.body["error"] as? [String: Any])?["code"] as? String == "webpush_too_large", "\(tooLarge.body)")
        }
    }

    @Test("an unsubscribed browser's device is invalidated; a rotated VAPID key's old subscriptions are too")
    func goneAndRotated() async throws {
        try await self.withServer { context in
            let keys = try await self.setUp(context)
            var tokens: [String] = []
            var browsers: [(WebPushEmulator, WebPushBrowserSubscription)] = []
            for personality in [WebPushPersonality.apple, .mozilla] {
                let (emulator, subscription) = try await self.browser(context, register: keys.register, personality: personality)
                let registered = try await context.api.call(
                    "POST", "/v1/apps/demo/registrations", key: keys.send,
                    json: #"{"transport":"webpush","subscription":\#(self.subscriptionJSON(subscription)),"tags":["web"]}"#)
                tokens.append(try #require(registered.body["token"] as? String, "\(registered.body)"))
                browsers.append((emulator, subscription))
            }
            // The first browser unsubscribes; the app's key is then replaced.
            #expect(browsers[0].0.unsubscribe(browsers[0].1.id))
            let first = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tags":["web"]},"title":"One"}"#)
            let one = try await self.settled(context, key: keys.send, id: try #require(first.body["id"] as? String))
            #expect((one["counts"] as? [String: Int])?["sent"] == 1 && (one["counts"] as? [String: Int])?["failed"] == 1, "\(one)")
            let gone = try await context.api.call("GET", "/v1/apps/demo/devices/\(tokens[0])", key: keys.send)
            #expect(gone.body["active"] as? Bool == false, "\(gone.body)")

            let rotated = try await context.api.call("POST", "/v1/apps/demo/webpush/key", key: context.admin)
            #expect(rotated.status == 200)
            let second = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tags":["web"]},"title":"Two"}"#)
            let two = try await self.settled(context, key: keys.send, id: try #require(second.body["id"] as? String))
            let failed = (two["deliveries"] as? [[String: Any]] ?? []).first
            #expect(failed?["reason"] as? String == "VapidPkHashMismatch", "\(two)")
            let stale = try await context.api.call("GET", "/v1/apps/demo/devices/\(tokens[1])", key: keys.send)
            #expect(stale.body["active"] as? Bool == false, "\(stale.body)")
            #expect(browsers[1].0.inbox(browsers[1].1.id)?.messages.count == 1, "only the message before the rotation")
        }
    }
}

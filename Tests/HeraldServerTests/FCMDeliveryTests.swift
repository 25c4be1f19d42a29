// SPDX-License-Identifier: Apache-2.0
import FCMEmulator
import Foundation
import HeraldServer
import HeraldTesting
import Logging
import Testing

/// Android through FCM, end to end: registration by body, one notification for every
/// platform, FCM's answers acted on — against the built-in FCM emulator (a real socket, its
/// token endpoint checking Herald's RS256 assertions) and a real store.
extension ServerTests {
    /// An Android phone of app `demo`'s emulated Firebase project: its registration token.
    func androidDevice(_ context: Context, fid: Bool = false) throws -> (emulator: FCMEmulator, token: String) {
        let emulator = try #require(context.server.fcmEmulator)
        let token = fid ? emulator.createInstallation(projectID: "demo") : emulator.createDevice(projectID: "demo")
        return (emulator, token)
    }

    /// The Android phone's messages once it holds `count`.
    func androidInbox(_ emulator: FCMEmulator, _ token: String, count: Int) async throws -> [FCMMessageRecord] {
        try await self.eventually("\(count) FCM messages", { emulator.inbox(token) }, until: { $0.count >= count })
    }

    @Test("one send to a user with an iPhone and an Android phone reaches both, each as its platform shows it", arguments: StoreDriver.enabled)
    func iPhoneAndAndroid(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let iPhone = try await self.virtualDevice(context)
            #expect(
                try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(iPhone)", key: context.admin, json: #"{"environment":"sandbox","userId":"ann"}"#
                ).status == 200)
            let (emulator, android) = try self.androidDevice(context)
            let registered = try await context.api.call(
                "POST", "/v1/apps/demo/registrations", key: keys.register,
                json:
                    #"{"transport":"fcm","token":"\#(android)","locale":"de_DE","userAssertion":"\#(try await self.assertion(context, send: keys.send, user: "ann", token: android))"}"#
            )
            #expect(registered.status == 200, "\(registered.body)")
            #expect(registered.body["token"] as? String == "fcm:\(android)")
            #expect(registered.body["transport"] as? String == "fcm")
            #expect(registered.body["environment"] as? String == "fcm")
            #expect(registered.body["userId"] as? String == "ann")
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json:
                    #"{"audience":{"users":["ann"]},"title":"Order shipped","body":"It left the warehouse","badge":2,"data":{"order":"42"},"link":"shop://orders/42","collapseId":"order-42","ttl":3600}"#
            )
            #expect(sent.status == 202, "\(sent.body)")
            #expect(sent.body["deliveries"] as? Int == 2)
            #expect(sent.body["transports"] as? [String] == ["apns", "fcm", "webpush"])
            let id = try #require(sent.body["id"] as? String)
            let status = try await self.settled(context, key: keys.send, id: id)
            #expect((status["counts"] as? [String: Int])?["sent"] == 2, "\(status)")
            let deliveries = status["deliveries"] as? [[String: Any]] ?? []
            #expect(Set(deliveries.compactMap { $0["transport"] as? String }) == ["apns", "fcm"])
            #expect(deliveries.allSatisfy { $0["apnsId"] as? String != nil }, "each platform's own message id")

            // Android: a notification message, with the data as strings, the link, the receipt id.
            let message = try #require(try await self.androidInbox(emulator, android, count: 1).first)
            #expect(message.kind == "notification")
            #expect(message.title == "Order shipped" && message.body == "It left the warehouse")
            #expect(message.data["order"] == "42" && message.data["link"] == "shop://orders/42")
            #expect(message.data["hr"] != nil, "the receipt id rides in the data")
            #expect(message.collapseKey == "order-42")
            #expect((3000...3600).contains(message.ttlSeconds ?? 0), "the time to live left: \(String(describing: message.ttlSeconds))")
            #expect(message.priority == "high")
            // iPhone: the APNs payload.
            let inbox = try await context.control.call("GET", "/v1/devices/\(iPhone)/inbox")
            let payload = (inbox.body["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any]
            let aps = payload?["aps"] as? [String: Any]
            #expect((aps?["alert"] as? [String: Any])?["title"] as? String == "Order shipped")
            #expect(aps?["badge"] as? Int == 2)
            #expect(payload?["order"] as? String == "42" && payload?["link"] as? String == "shop://orders/42")

            // The device as the API lists it, and its delivery.
            let device = try await context.api.call("GET", "/v1/apps/demo/devices/fcm:\(android)", key: keys.send)
            #expect(device.status == 200 && device.body["locale"] as? String == "de_DE")
            let history = try await context.api.call("GET", "/v1/apps/demo/devices/fcm:\(android)/deliveries", key: keys.send)
            #expect((history.body["deliveries"] as? [[String: Any]])?.first?["state"] as? String == "sent")
        }
    }

    @Test("an uninstalled Android app's token is invalidated with FCM's reason, and a FID is a target of its own", arguments: StoreDriver.enabled)
    func uninstalled(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let (emulator, token) = try self.androidDevice(context)
            let (_, fid) = try self.androidDevice(context, fid: true)
            for body in [#"{"token":"\#(token)","tags":["android"]}"#, #"{"fid":"\#(fid)","tags":["android"]}"#] {
                #expect(try await context.api.call("POST", "/v1/apps/demo/registrations", key: keys.register, json: body).status == 200)
            }
            emulator.uninstall(token)
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tags":["android"]},"body":"Hi"}"#)
            let id = try #require(sent.body["id"] as? String)
            let status = try await self.settled(context, key: keys.send, id: id)
            let deliveries = status["deliveries"] as? [[String: Any]] ?? []
            let failed = deliveries.first { $0["token"] as? String == "fcm:\(token)" }
            #expect(failed?["state"] as? String == "failed")
            #expect(failed?["reason"] as? String == "UNREGISTERED")
            #expect(failed?["status"] as? Int == 404)
            #expect(deliveries.first { $0["token"] as? String == "fid:\(fid)" }?["state"] as? String == "sent")
            let device = try await context.api.call("GET", "/v1/apps/demo/devices/fcm:\(token)", key: keys.send)
            #expect(device.body["active"] as? Bool == false)
            #expect(device.body["invalidationReason"] as? String == "UNREGISTERED")
            #expect(try await self.androidInbox(emulator, fid, count: 1).first?.body == "Hi")
        }
    }

    @Test("FCM's 429 and 503 are retried after their Retry-After, and an expired access token is renewed without a failed push")
    func retriesAndRenewal() async throws {
        try await self.withServer { context in
            let keys = try await self.setUp(context)
            let (emulator, token) = try self.androidDevice(context)
            #expect(
                try await context.api.call("POST", "/v1/apps/demo/registrations", key: keys.register, json: #"{"token":"\#(token)"}"#).status == 200)
            emulator.inject([.status(429, retryAfter: 1), .status(503, retryAfter: 1)])
            let started = ContinuousClock.now
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["fcm:\#(token)"]},"body":"Later"}"#)
            let id = try #require(sent.body["id"] as? String)
            let status = try await self.settled(context, key: keys.send, id: id)
            let delivery = (status["deliveries"] as? [[String: Any]])?.first
            #expect(delivery?["state"] as? String == "sent")
            #expect(delivery?["attempts"] as? Int == 3, "429, 503, then sent")
            // Each retry waited at least its Retry-After (a lower bound: a busy machine only adds).
            #expect(ContinuousClock.now - started >= .seconds(2))
            #expect(emulator.counters.refused["QUOTA_EXCEEDED"] == 1 && emulator.counters.refused["UNAVAILABLE"] == 1, "\(emulator.counters)")

            // Every access token FCM issued stops being valid: the next push gets a 401, a new
            // token, and goes on the same attempt.
            let issued = emulator.counters.tokensIssued
            emulator.expireAccessTokens()
            let again = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["fcm:\#(token)"]},"body":"Renewed"}"#)
            let second = try await self.settled(context, key: keys.send, id: try #require(again.body["id"] as? String))
            let renewed = (second["deliveries"] as? [[String: Any]])?.first
            #expect(renewed?["state"] as? String == "sent" && renewed?["attempts"] as? Int == 1, "\(second)")
            #expect(emulator.counters.tokensIssued == issued + 1)
            #expect(try await self.androidInbox(emulator, token, count: 2).last?.body == "Renewed")
        }
    }

    @Test("registration by body refuses what is not an FCM token or FID, and what FCM would refuse is refused at accept")
    func refusals() async throws {
        try await self.withServer { context in
            let keys = try await self.setUp(context)
            let (_, token) = try self.androidDevice(context)
            for (body, code) in [
                (#"{"token":"short"}"#, "bad_fcm_token"), (#"{"fid":"aaaaaaaaaaaaaaaaaaaaaa"}"#, "bad_fid"), (#"{}"#, "missing_token"),
                (#"{"token":"\#(token)","environment":"sandbox"}"#, "bad_environment"),
                (#"{"transport":"hms","token":"\#(token)"}"#, "bad_transport"),
                (#"{"token":"\#(token)","kind":"voip"}"#, "bad_kind"), (#"{"transport":"apns","token":"zz"}"#, "bad_device_token"),
            ] {
                let answer = try await context.api.call("POST", "/v1/apps/demo/registrations", key: keys.register, json: body)
                #expect(answer.status == 400 && (answer.body["error"] as? [String: Any])?["code"] as? String == code, "\(body): \(answer)")
            }
            // The door asks what every registration door asks: no key is 401, another app's register key 403.
            #expect(try await context.api.call("POST", "/v1/apps/demo/registrations", json: #"{"token":"\#(token)"}"#).status == 401)
            #expect(
                try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"other","bundleId":"com.example.other"}"#).status
                    == 201)
            let other = try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"register","appId":"other"}"#)
            let otherKey = try #require(other.body["key"] as? String)
            #expect(try await context.api.call("POST", "/v1/apps/demo/registrations", key: otherKey, json: #"{"token":"\#(token)"}"#).status == 403)
            let listed = try await context.api.call("GET", "/v1/apps/demo/devices", key: keys.send)
            #expect((listed.body["devices"] as? [[String: Any]])?.isEmpty == true, "nothing written")
            #expect(
                try await context.api.call("POST", "/v1/apps/demo/registrations", key: keys.register, json: #"{"token":"\#(token)"}"#).status == 200)
            let send = "/v1/apps/demo/notifications"
            for (body, code) in [
                (#"{"audience":"all","transports":["fcm"],"body":"x","data":{"n":1}}"#, "fcm_data_not_string"),
                (#"{"audience":"all","body":"x","fcm":{"data":{"google.x":"1"}}}"#, "fcm_reserved_key"),
                (#"{"audience":"all","body":"x","fcm":{"android":{"ttl":"2419201s"}}}"#, "bad_fcm_ttl"),
                (#"{"audience":"all","body":"x","fcm":{"android":{"priority":"urgent"}}}"#, "bad_fcm_priority"),
                (#"{"audience":"all","body":"x","fcm":{"data":{"big":"\#(String(repeating: "x", count: 4100))"}}}"#, "fcm_too_large"),
                (#"{"audience":"all","pushType":"voip","transports":["fcm"],"data":{"a":"b"}}"#, "transport_not_supported"),
                (#"{"audience":"all","body":"x","transports":["hms"]}"#, "bad_transports"),
            ] {
                let answer = try await context.api.call("POST", send, key: keys.send, json: body)
                #expect(answer.status == 400 && (answer.body["error"] as? [String: Any])?["code"] as? String == code, "\(body): \(answer)")
            }
            // Not asked for FCM by name: data FCM cannot carry keeps the notification to APNs.
            let apnsOnly = try await context.api.call("POST", send, key: keys.send, json: #"{"audience":"all","body":"x","data":{"n":1}}"#)
            #expect(apnsOnly.status == 202 && apnsOnly.body["transports"] as? [String] == ["apns"] && apnsOnly.body["deliveries"] as? Int == 0)
            let narrowed = try await context.api.call("POST", send, key: keys.send, json: #"{"audience":"all","body":"x","transports":["fcm"]}"#)
            #expect(narrowed.status == 202 && narrowed.body["deliveries"] as? Int == 1)
        }
    }
}

extension ServerTests {
    @Test(
        "an uploaded service account is used as uploaded; its token_uri is posted to only when it is Google's or on --fcm-endpoint's origin",
        arguments: [false, true])
    func uploadedServiceAccount(endpointSet: Bool) async throws {
        // A second FCM, apart from the built-in one: the project's "real" FCM in this test.
        try await withFCMEmulator(configuration: .init(), logger: Logger(label: "external-fcm")) { external in
            let account = try external.makeServiceAccount(projectID: "shop-4711")
            try await self.withServer(configure: { if endpointSet { $0.fcmEndpoint = external.baseURL } }) { context in
                let keys = try await self.setUp(context)
                let uploaded = try await context.api.call(
                    "PUT", "/v1/apps/demo/credentials/fcm", key: context.admin, json: #"{"serviceAccount":\#(account.json)}"#)
                #expect(uploaded.status == 204, "\(uploaded)")
                let listed = try await context.api.call("GET", "/v1/apps/demo/credentials", key: context.admin)
                let info = (listed.body["credentials"] as? [[String: Any]])?.first { $0["environment"] as? String == "fcm" }
                #expect(info?["kind"] as? String == "serviceAccount" && info?["projectId"] as? String == "shop-4711")
                #expect(!(String(describing: listed.body).contains("PRIVATE KEY")), "never the key")
                let token = external.createDevice(projectID: "shop-4711")
                #expect(
                    try await context.api.call("POST", "/v1/apps/demo/registrations", key: keys.register, json: #"{"token":"\#(token)"}"#).status
                        == 200)
                let sent = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send,
                    json: #"{"audience":{"tokens":["fcm:\#(token)"]},"body":"Via the project"}"#)
                let status = try await self.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))
                let delivery = (status["deliveries"] as? [[String: Any]])?.first
                if endpointSet {
                    #expect(delivery?["state"] as? String == "sent", "\(status)")
                    #expect(try await self.androidInbox(external, token, count: 1).first?.body == "Via the project")
                } else {
                    // Not Google's, not the operator's: refused before any request is made.
                    #expect(delivery?["state"] as? String == "failed" && delivery?["reason"] as? String == "credentials_unusable", "\(status)")
                    #expect(external.counters.tokenRequests == 0 && external.counters.sendRequests == 0)
                }
                let bad = try await context.api.call(
                    "PUT", "/v1/apps/demo/credentials/fcm", key: context.admin,
                    json: #"{"serviceAccount":{"type":"service_account","project_id":"x"}}"#)
                #expect(bad.status == 400 && (bad.body["error"] as? [String: Any])?["code"] as? String == "bad_service_account")
            }
        }
    }
}

extension ServerTests {
    @Test("a template renders each Android device's variant by its locale, its payload fragment into FCM's data as strings")
    func templateOnAndroid() async throws {
        try await self.withServer { context in
            let keys = try await self.setUp(context)
            let template = try await context.api.call(
                "POST", "/v1/apps/demo/templates", key: keys.send,
                json:
                    #"{"name":"shipped","default":{"title":"Shipped {{order}}","body":"On its way","payload":{"order":"{{order}}"}},"locales":{"de":{"title":"Versandt {{order}}","body":"Unterwegs"}}}"#
            )
            let id = try #require(template.body["id"] as? String, "\(template)")
            let (emulator, german) = try self.androidDevice(context)
            let (_, english) = try self.androidDevice(context)
            for (token, locale) in [(german, "de_DE"), (english, "en_US")] {
                let body = #"{"token":"\#(token)","locale":"\#(locale)","tags":["t"]}"#
                #expect(try await context.api.call("POST", "/v1/apps/demo/registrations", key: keys.register, json: body).status == 200)
            }
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"tags":["t"]},"template":"\#(id)","data":{"order":"A-7"}}"#)
            #expect(sent.status == 202 && sent.body["transports"] as? [String] == ["apns", "fcm", "webpush"], "\(sent)")
            let de = try #require(try await self.androidInbox(emulator, german, count: 1).first)
            let en = try #require(try await self.androidInbox(emulator, english, count: 1).first)
            #expect(de.title == "Versandt A-7" && de.body == "Unterwegs")
            #expect(en.title == "Shipped A-7" && en.body == "On its way" && en.data["order"] == "A-7")
        }
    }
}

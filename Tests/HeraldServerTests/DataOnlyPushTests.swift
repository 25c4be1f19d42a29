// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldServer
import HeraldTesting
import Testing

/// Pushes whose payload is the app's own (a PushKit call invitation, a complication's data, a
/// widget's reload) are sent with data alone, judged per push type once the audience's kinds are
/// known; an alert with nothing to show is still refused. Through the API and the emulator's
/// virtual devices.
@Suite(.heavy) struct DataOnlyPushTests {
    let server = ServerTests()

    static func code(_ body: [String: Any]) -> String? { (body["error"] as? [String: Any])?["code"] as? String }

    /// A virtual device of `kind` registered by the backend (send key) for user `u`.
    func device(_ context: ServerTests.Context, send: String, kind: String) async throws -> String {
        let token = try await self.server.virtualDevice(context, kind: kind)
        let registered = try await context.api.call(
            "PUT", "/v1/apps/demo/devices/\(token)", key: send, json: #"{"environment":"sandbox","kind":"\#(kind)","userId":"u"}"#)
        #expect(registered.status == 200, "\(kind): \(registered.body)")
        return token
    }

    @Test(
        "data alone reaches every app-payload kind by token list and by user with kinds; content-changed reaches widgets and controls",
        arguments: StoreDriver.enabled)
    func appPayloadKinds(driver: StoreDriver) async throws {
        try await self.server.withServer(driver: driver) { context in
            let keys = try await self.server.setUp(context)
            let dataOnly = ["voip", "complication", "fileprovider", "location", "pushtotalk"]
            for kind in dataOnly {
                let token = try await self.device(context, send: keys.send, kind: kind)
                let sent = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send,
                    json: #"{"audience":{"tokens":["\#(token)"]},"data":{"callId":"c-\#(kind)"}}"#)
                #expect(sent.status == 202, "\(kind): \(sent.body)")
                _ = try await self.server.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String, "\(kind)"))
                let received = try await self.server.inbox(context, token)
                #expect(received.count == 1, "\(kind)")
                #expect(received.first?["pushType"] as? String == kind)
                #expect((received.first?["payload"] as? [String: Any])?["callId"] as? String == "c-\(kind)", "\(kind): \(received)")
            }
            // To a user's VoIP tokens: the most common PushKit send, a call invitation.
            let byUser = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"users":["u"]},"kinds":["voip"],"data":{"callId":"c2"}}"#)
            #expect(byUser.status == 202 && byUser.body["deliveries"] as? Int == 1, "\(byUser.body)")
            for kind in ["widgets", "controls"] {
                let token = try await self.device(context, send: keys.send, kind: kind)
                let bare = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["\#(token)"]},"data":{"k":"v"}}"#)
                #expect(bare.status == 400 && Self.code(bare.body) == "empty_notification", "\(kind) without content-changed: \(bare.body)")
                let reload = try await context.api.call(
                    "POST", "/v1/apps/demo/notifications", key: keys.send,
                    json: #"{"audience":{"tokens":["\#(token)"]},"aps":{"content-changed":true}}"#)
                #expect(reload.status == 202, "\(kind): \(reload.body)")
                _ = try await self.server.settled(context, key: keys.send, id: try #require(reload.body["id"] as? String))
                #expect(try await self.server.inbox(context, token).first?["pushType"] as? String == kind)
            }
        }
    }

    @Test(
        "data alone is refused, with nothing written, where it would reach an alert token: listed, by user, or by kinds named",
        arguments: StoreDriver.enabled)
    func alertsStillNeedContent(driver: StoreDriver) async throws {
        try await self.server.withServer(driver: driver) { context in
            let keys = try await self.server.setUp(context)
            let phone = try await self.device(context, send: keys.send, kind: "device")
            let voip = try await self.device(context, send: keys.send, kind: "voip")
            let refusals = [
                #"{"audience":{"tokens":["\#(phone)"]},"data":{"callId":"c"}}"#,
                #"{"audience":{"tokens":["\#(phone)","\#(voip)"]},"data":{"callId":"c"}}"#,
                #"{"audience":{"users":["u"]},"data":{"callId":"c"}}"#,
                #"{"audience":{"users":["u"]},"kinds":["voip","device"],"data":{"callId":"c"}}"#,
            ]
            for json in refusals {
                let answer = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: json)
                #expect(answer.status == 400 && Self.code(answer.body) == "empty_notification", "\(json): \(answer.body)")
            }
            let listed = try await context.api.call("GET", "/v1/apps/demo/notifications", key: keys.send)
            #expect((listed.body["notifications"] as? [Any])?.isEmpty == true, "nothing was written: \(listed.body)")
            // Dry run answers the same.
            let dry = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tokens":["\#(phone)"]},"data":{"a":"b"},"dryRun":true}"#)
            #expect(dry.status == 400 && Self.code(dry.body) == "empty_notification")
            let phoneInbox = try await self.server.inbox(context, phone)
            let voipInbox = try await self.server.inbox(context, voip)
            #expect(phoneInbox.isEmpty && voipInbox.isEmpty)
        }
    }
}

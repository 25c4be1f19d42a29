// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

/// `"dryRun": true` on a send: the audience and, per push type, the exact headers and payload;
/// nothing stored, nothing sent.
@Suite(.heavy) struct DryRunTests {
    let server = ServerTests()

    @Test("a dry run counts the audience per push type, shows the headers and payload, and neither stores nor sends", arguments: StoreDriver.enabled)
    func dryRun(driver: StoreDriver) async throws {
        try await self.server.withServer(driver: driver) { context in
            let keys = try await self.server.setUp(context)
            var tokens: [String] = []
            for kind in ["device", "device", "voip"] {
                let token = try await self.server.virtualDevice(context, kind: kind)
                tokens.append(token)
                let registered = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register, json: #"{"environment":"sandbox","kind":"\#(kind)","tags":["news"]}"#
                )
                #expect(registered.status == 200, "\(registered.body)")
            }
            // Users, tags and everyone mean device tokens unless other kinds are named: two alerts.
            let alerts = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":{"tags":["news"]},"title":"Hello","subtitle":"Sub","priority":10,"collapseId":"c1","dryRun":true}"#)
            #expect(alerts.status == 200, "\(alerts.body)")
            #expect(alerts.body["dryRun"] as? Bool == true)
            #expect(alerts.body["audienceSize"] as? Int == 2)
            let pushes = try #require(alerts.body["pushTypes"] as? [[String: Any]])
            #expect(pushes.count == 1)
            let alert = try #require(pushes.first)
            #expect(alert["pushType"] as? String == "alert")
            #expect(alert["devices"] as? Int == 2)
            let headers = try #require(alert["headers"] as? [String: String])
            #expect(headers["apns-push-type"] == "alert")
            #expect(headers["apns-priority"] == "10")
            #expect(headers["apns-collapse-id"] == "c1")
            #expect(headers["apns-topic"]?.isEmpty == false)
            let payload = try #require(alert["payload"] as? String)
            let aps = try #require((try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?["aps"] as? [String: Any])
            #expect((aps["alert"] as? [String: Any])?["subtitle"] as? String == "Sub")
            // Both kinds named: one entry per push type, the VoIP topic with its suffix.
            let both = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":"all","kinds":["device","voip"],"title":"Hi","dryRun":true}"#)
            #expect(both.status == 200, "\(both.body)")
            #expect(both.body["audienceSize"] as? Int == 3)
            let byType = Dictionary(
                uniqueKeysWithValues: (both.body["pushTypes"] as? [[String: Any]] ?? []).map { ($0["pushType"] as? String ?? "", $0) })
            #expect(byType["alert"]?["devices"] as? Int == 2)
            #expect(byType["voip"]?["devices"] as? Int == 1)
            #expect((byType["voip"]?["headers"] as? [String: String])?["apns-topic"]?.hasSuffix(".voip") == true)
            // What cannot be sent is refused as a real send is.
            let refused = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send,
                json: #"{"audience":"all","pushType":"background","priority":10,"contentAvailable":true,"dryRun":true}"#)
            #expect(refused.status == 422 || refused.status == 400, "\(refused.body)")
            // Nothing stored, nothing sent.
            let listed = try await context.api.call("GET", "/v1/apps/demo/notifications", key: keys.send)
            #expect((listed.body["notifications"] as? [Any])?.isEmpty == true, "\(listed.body)")
            for token in tokens {
                let inbox = try await context.control.call("GET", "/v1/devices/\(token)/inbox")
                #expect((inbox.body["notifications"] as? [Any])?.isEmpty == true, "\(inbox.body)")
            }
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Foundation
import HeraldCore
import HeraldSQLite
import HeraldServer
import HeraldTesting
import Testing

/// Data governance through the real API: credentials as metadata, a user's data exported and
/// erased (audited), a whole app deleted while another app's notification is delivered.
extension ServerTests {
    func code(_ answer: (status: Int, body: [String: Any])) -> String? { (answer.body["error"] as? [String: Any])?["code"] as? String }

    @Test("credentials are listed as metadata, never material, and deleted per environment", arguments: StoreDriver.enabled)
    func credentialMetadata(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            _ = try await self.setUp(context)
            let pem = P256.Signing.PrivateKey().pemRepresentation
            let body = try String(
                decoding: JSONSerialization.data(withJSONObject: [
                    "keyId": "ABC123DEFG", "teamId": "TEAM123456", "privateKey": pem, "restrictedTo": "production",
                ]), as: UTF8.self)
            #expect(try await context.api.call("PUT", "/v1/apps/demo/credentials/production", key: context.admin, json: body).status == 204)
            let listed = try await context.api.call("GET", "/v1/apps/demo/credentials", key: context.admin)
            let credentials = try #require(listed.body["credentials"] as? [[String: Any]], "\(listed)")
            #expect(credentials.count == 1)
            let first = try #require(credentials.first)
            #expect(first["environment"] as? String == "production" && first["kind"] as? String == "token")
            #expect(
                first["keyId"] as? String == "ABC123DEFG" && first["teamId"] as? String == "TEAM123456"
                    && first["restrictedTo"] as? String == "production")
            #expect((first["updatedAt"] as? Int ?? 0) > 0)
            let text = String(describing: listed.body)
            #expect(!text.contains("PRIVATE KEY") && !text.contains(pem.split(separator: "\n")[1]), "no key material")
            #expect(code(try await context.api.call("DELETE", "/v1/apps/demo/credentials/staging", key: context.admin)) == "bad_environment")
            #expect(try await context.api.call("DELETE", "/v1/apps/demo/credentials/production", key: context.admin).status == 204)
            #expect(try await context.api.call("DELETE", "/v1/apps/demo/credentials/production", key: context.admin).status == 404)
            #expect(
                (try await context.api.call("GET", "/v1/apps/demo/credentials", key: context.admin).body["credentials"] as? [Any])?.isEmpty == true)
        }
    }

    @Test(
        "a user's data is exported and erased by an admin key only, both audited; the erased user is no longer reached",
        arguments: StoreDriver.enabled)
    func userErasure(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            let ann = try await self.virtualDevice(context)
            let bob = try await self.virtualDevice(context)
            for (token, user) in [(ann, "ann"), (bob, "bob")] {
                let bound = try await context.api.call(
                    "PUT", "/v1/apps/demo/devices/\(token)", key: keys.register,
                    json:
                        #"{"environment":"sandbox","tags":["news"],"userAssertion":"\#(try await self.assertion(context, send: keys.send, user: user, token: token))"}"#
                )
                #expect(bound.status == 200)
            }
            let sent = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"users":["ann"]},"title":"Hi Ann"}"#)
            _ = try await self.settled(context, key: keys.send, id: try #require(sent.body["id"] as? String))

            #expect(try await context.api.call("GET", "/v1/apps/demo/users/ann", key: keys.send).status == 403, "admin only")
            #expect(try await context.api.call("DELETE", "/v1/apps/demo/users/ann", key: keys.send).status == 403, "admin only")
            let exported = try await context.api.call("GET", "/v1/apps/demo/users/ann", key: context.admin)
            #expect(exported.status == 200 && exported.body["userId"] as? String == "ann")
            #expect((exported.body["devices"] as? [[String: Any]])?.compactMap { $0["token"] as? String } == [ann])
            let deliveries = try #require(exported.body["deliveries"] as? [[String: Any]])
            #expect(deliveries.count == 1 && deliveries.first?["state"] as? String == "sent" && deliveries.first?["token"] as? String == ann)

            let erased = try await context.api.call("DELETE", "/v1/apps/demo/users/ann", key: context.admin)
            #expect(
                erased.status == 200 && erased.body["devices"] as? Int == 1 && erased.body["deliveries"] as? Int == 1
                    && erased.body["notifications"] as? Int == 1, "\(erased)")
            let after = try await context.api.call("GET", "/v1/apps/demo/users/ann", key: context.admin)
            #expect((after.body["devices"] as? [Any])?.isEmpty == true && (after.body["deliveries"] as? [Any])?.isEmpty == true)
            #expect(try await context.api.call("GET", "/v1/apps/demo/devices/\(bob)", key: keys.send).status == 200, "bob stays")

            // The counts stay; the token does not.
            let status = try await context.api.call("GET", "/v1/apps/demo/notifications/\(try #require(sent.body["id"] as? String))", key: keys.send)
            #expect((status.body["counts"] as? [String: Int])?["sent"] == 1)
            #expect(!String(describing: status.body).contains(ann))
            let news = try await context.api.call(
                "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":{"tags":["news"]},"title":"News"}"#)
            #expect(news.body["deliveries"] as? Int == 1, "only bob is left to reach")

            let audit = try await context.api.call("GET", "/v1/audit?app=demo", key: context.admin)
            let records = try #require(audit.body["records"] as? [[String: Any]], "\(audit)")
            #expect(records.compactMap { $0["action"] as? String } == ["user.export", "user.erase", "user.export"], "newest first")
            #expect(records.allSatisfy { $0["subject"] as? String == "ann" && ($0["keyId"] as? String)?.isEmpty == false })
            let encoded = try await context.api.call("GET", "/v1/apps/demo/users/bob%20o%2Fbrien", key: context.admin)
            #expect(encoded.status == 200 && encoded.body["userId"] as? String == "bob o/brien", "user ids are percent-decoded")
            #expect(try await context.api.call("GET", "/v1/audit", key: keys.send).status == 403)
            #expect(try await context.api.call("GET", "/v1/audit?limit=0", key: context.admin).status == 400)
        }
    }

    @Test(
        "deleting an app removes it and every row of it while another app's notification is delivered; its keys stop working",
        arguments: StoreDriver.enabled)
    func appDeletion(driver: StoreDriver) async throws {
        try await self.withServer(driver: driver) { context in
            let keys = try await self.setUp(context)
            // Many devices (unknown to the emulator: their deliveries fail and invalidate them), tags, a notification.
            for n in 1...40 {
                let token = String(repeating: "0", count: 62) + String(format: "%02x", n)
                #expect(
                    try await context.api.call(
                        "PUT", "/v1/apps/demo/devices/\(token)", key: keys.send, json: #"{"environment":"sandbox","tags":["t\#(n % 3)"]}"#
                    ).status == 200)
            }
            let big = try await context.api.call("POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","title":"All"}"#)
            _ = try await self.settled(context, key: keys.send, id: try #require(big.body["id"] as? String, "\(big)"))

            #expect(
                try await context.api.call("POST", "/v1/apps", key: context.admin, json: #"{"id":"other","bundleId":"com.example.other"}"#).status
                    == 201)
            let device = try #require(
                try await context.control.call(
                    "POST", "/v1/devices", json: #"{"bundleId":"com.example.other","environment":"development","kind":"device"}"#
                ).body["token"] as? String)
            #expect(
                try await context.api.call("PUT", "/v1/apps/other/devices/\(device)", key: context.admin, json: #"{"environment":"sandbox"}"#).status
                    == 200)

            async let deleted = context.api.call("DELETE", "/v1/apps/demo", key: context.admin)
            let sent = try await context.api.call(
                "POST", "/v1/apps/other/notifications", key: context.admin, json: #"{"audience":"all","title":"Still here"}"#)
            #expect(sent.body["deliveries"] as? Int == 1)
            let begun = try await deleted
            #expect(begun.status == 202 && (begun.body["deletion"] as? [String: Any])?["since"] != nil, "\(begun.body)")
            var received = false
            // A hang guard (300 s), not a window: the loop ends when the push arrives.
            let deadline = ContinuousClock.now + ServerTests.hangGuard
            while !received, ContinuousClock.now < deadline {
                received = try await self.inbox(context, device).contains {
                    ($0["payload"] as? [String: Any]).map { String(describing: $0).contains("Still here") } ?? false
                }
                if !received { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(received, "the other app's notification was delivered")

            // Deleted in the background: a hang guard, not a window; the wait ends when it is gone.
            _ = try await self.eventually(
                "the app is gone", { try await context.api.call("GET", "/v1/apps/demo", key: context.admin).status }, until: { $0 == 404 })
            #expect(try await context.api.call("DELETE", "/v1/apps/demo", key: context.admin).status == 404)
            #expect(try await context.api.call("GET", "/v1/apps/demo/devices", key: keys.send).status == 401, "the app's keys went with it")
            let audit = try await context.api.call("GET", "/v1/audit", key: context.admin)
            #expect((audit.body["records"] as? [[String: Any]])?.first?["action"] as? String == "app.delete")
            #expect(try await context.api.call("GET", "/v1/apps/other", key: context.admin).status == 200)
        }
    }

    @Test("an app's deletion begun before a restart is finished by the next server, with no request; writes to it meanwhile are 404")
    func deletionResumes() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-deletion")
        defer { directory.remove() }
        // The first process: the app, its devices, and its deletion begun (as a DELETE begins it),
        // then stopped before its rows go.
        do {
            let store = try await SQLiteStore(path: directory.path + "/herald.sqlite")
            try await store.createApp(App(id: "doomed", bundleID: "com.example.doomed", createdAt: 1))
            for n in 1...50 {
                _ = try await store.register(
                    appID: "doomed", DeviceRegistration(token: try DeviceToken(hex: String(repeating: "0", count: 62) + String(format: "%02x", n))),
                    now: 2)
            }
            #expect(try await store.beginAppDeletion(appID: "doomed", now: 3) != nil)
        }
        var configuration = Self.configuration(directory)
        configuration.builtInEmulator = false
        try await withHeraldServer(configuration: configuration) { server in
            let api = HTTP(base: "http://127.0.0.1:\(server.port)")
            let admin = try #require(server.initialAdminKey)
            // Writes to an app being deleted are refused (whichever comes first, the 404 is the same).
            let write = try await api.call(
                "PUT", "/v1/apps/doomed/devices/\(String(repeating: "ab", count: 32))", key: admin, json: #"{"environment":"sandbox"}"#)
            #expect(write.status == 404, "\(write.body)")
            #expect(
                try await api.call("POST", "/v1/keys", key: admin, json: #"{"scope":"send","appId":"doomed"}"#).status == 404,
                "no key is made for an app being deleted")
            _ = try await self.eventually(
                "the next server finishes the deletion", { try await api.call("GET", "/v1/apps/doomed", key: admin).status }, until: { $0 == 404 })
            #expect(try await server.store.appsBeingDeleted().isEmpty)
        }
    }
}

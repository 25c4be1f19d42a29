// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// The registry's security rules and the sealed secrets, on every driver.
@Suite(.heavy) struct SecurityContractTests {
    @Test("a change of master key seals every stored secret again: the new key alone opens them, the old one no longer", arguments: Driver.enabled)
    func reseal(driver: Driver) async throws {
        try await driver.withStore { store in
            let old = SecretBox.generateMasterKey()
            let new = SecretBox.generateMasterKey()
            let before = try SecretBox(masterKey: old)
            try await store.setCredential(appID: "demo", environment: .production, sealed: try before.seal(Array("credential".utf8)), now: 1)
            try await store.createWebhook(
                Webhook(
                    id: "wh_1", appID: "demo", url: "https://example.com", sealedSecret: try before.seal(Array("webhook".utf8)), types: [.failed],
                    createdAt: 1)
            )
            var app = try #require(try await store.app("demo"))
            app.security.sealedUserSecret = try before.seal(Array("user".utf8))
            #expect(try await store.setAppSecurity(appID: "demo", app.security))

            let during = try SecretBox(masterKey: new, previous: [old])
            #expect(try await store.resealSecrets { try during.reseal($0) } == 3)

            let after = try SecretBox(masterKey: new)
            let stale = try SecretBox(masterKey: old)
            let sealed = [
                try #require(try await store.credentials(appID: "demo")[.production]),
                try #require(try await store.webhooks(appID: "demo").first?.sealedSecret),
                try #require(try await store.app("demo")?.security.sealedUserSecret),
            ]
            #expect(try sealed.map { String(decoding: try after.open($0), as: UTF8.self) } == ["credential", "webhook", "user"])
            for blob in sealed { #expect(throws: (any Error).self) { try stale.open(blob) } }
        }
    }

    @Test("a registration without authority keeps the user and the protected tags a device has, in the store itself", arguments: Driver.enabled)
    func registrationAuthority(driver: Driver) async throws {
        try await driver.withStore { store in
            let token = try DeviceToken(hex: String(repeating: "ab", count: 32))
            let app = RegistrationAuthority(mayBindUser: false, protectedTags: ["vip"])
            // The backend binds ann and a protected tag.
            _ = try await store.register(appID: "demo", DeviceRegistration(token: token, userID: "ann", tags: ["vip", "news"]), now: 1)
            // The app's key may keep ann, drop the user, change its own tags; never bind another user.
            let refusedUser = await #expect(throws: HeraldError.self) {
                _ = try await store.register(appID: "demo", DeviceRegistration(token: token, userID: "mallory"), authority: app, now: 2)
            }
            #expect(refusedUser?.code == "user_assertion_required")
            let refusedTag = await #expect(throws: HeraldError.self) {
                _ = try await store.register(appID: "demo", DeviceRegistration(token: token, userID: "ann", tags: ["vip"]), authority: app, now: 2)
            }
            #expect(refusedTag?.code == "tag_protected")
            let kept = try await store.register(
                appID: "demo", DeviceRegistration(token: token, userID: "ann", tags: ["sports"]), authority: app, now: 3)
            #expect(kept.registration.userID == "ann" && kept.registration.tags == ["sports", "vip"])
            let stored = try #require(try await store.device(appID: "demo", token: token.hex))
            #expect(stored.registration.tags.sorted() == ["sports", "vip"], "the protected tag is stored, not only answered")
            let anonymous = try await store.register(appID: "demo", DeviceRegistration(token: token, tags: []), authority: app, now: 4)
            #expect(anonymous.registration.userID == nil && anonymous.registration.tags == ["vip"])
            // A new token cannot be bound by the app's key alone.
            let other = try DeviceToken(hex: String(repeating: "cd", count: 32))
            let refusedNew = await #expect(throws: HeraldError.self) {
                _ = try await store.register(appID: "demo", DeviceRegistration(token: other, userID: "ann"), authority: app, now: 5)
            }
            #expect(refusedNew?.code == "user_assertion_required")
            #expect(try await store.device(appID: "demo", token: other.hex) == nil)
        }
    }
}

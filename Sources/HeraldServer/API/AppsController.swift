// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import FCMClient
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/apps` and each app's APNs credentials (admin keys).
struct AppsController {
    let store: any HeraldStore
    let secrets: SecretBox
    let clock: any EpochClock
    let appDeletions: AppDeletions

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let admin = v1.group("apps").add(middleware: RequireScope(.admin, store: self.store, clock: self.clock))
        admin.post(use: self.create)
        admin.get(use: self.list)
        admin.get(":app", use: self.show)
        admin.patch(":app", use: self.update)
        admin.put(":app/credentials/:environment", use: self.setCredentials)
        admin.post(":app/user-secret", use: self.newUserSecret)
        GovernanceController(store: self.store, secrets: self.secrets, clock: self.clock, appDeletions: self.appDeletions).addRoutes(to: v1)
        v1.group("apps/:app/user-assertions").add(middleware: RequireScope(.send, store: self.store, clock: self.clock)).post(
            use: self.newUserAssertion)
    }

    @Sendable func show(_ request: Request, context: APIRequestContext) async throws -> AppResponse {
        AppResponse(try context.requireApp())
    }

    /// Changes the app's user verification and protected tags.
    @Sendable func update(_ request: Request, context: APIRequestContext) async throws -> AppResponse {
        var app = try context.requireApp()
        let body = try await request.decode(as: UpdateAppRequest.self, context: context)
        if let on = body.userVerification { app.security.userVerification = on }
        if let on = body.unboundAssertions { app.security.unboundAssertions = on }
        if let limits = body.rateLimits {
            app.security.rateLimits = try Self.rateLimits(
                app.security.rateLimits,
                ["register": limits.register, "registerPerAddress": limits.registerPerAddress, "receipt": limits.receipt, "send": limits.send])
        }
        if let on = body.receipts { app.security.receipts = on }
        if let quiet = body.quietHours {
            switch (quiet.start, quiet.end) {
            case (nil, nil):
                app.security.quietHours = nil
            case (let start?, let end?):
                guard let parsed = QuietHours(start: start, end: end) else {
                    throw HeraldError.invalid(
                        "quietHours is {\"start\": \"HH:MM\", \"end\": \"HH:MM\"} (00:00 to 23:59, start and end differ), or {} for none",
                        code: "bad_quietHours")
                }
                app.security.quietHours = parsed
            default:
                throw HeraldError.invalid("quietHours needs both start and end, or neither ({} for none)", code: "bad_quietHours")
            }
        }
        if let throttle = body.throttlePerMinute {
            guard throttle == 0 || Throttle.limits.contains(throttle) else {
                throw HeraldError.invalid("throttlePerMinute is 1 to 100000 deliveries a minute, or 0 for none", code: "bad_throttlePerMinute")
            }
            app.security.throttlePerMinute = throttle == 0 ? nil : throttle
        }
        if let cap = body.frequencyCap {
            switch (cap.limit, cap.windowSeconds) {
            case (nil, nil) where cap.perCategory == nil:
                app.security.frequencyCap = nil
            case (let limit?, let window?):
                guard let parsed = FrequencyCap(limit: limit, windowSeconds: window, perCategory: cap.perCategory ?? false) else {
                    throw HeraldError.invalid(
                        "frequencyCap is {\"limit\": 1 to 1000, \"windowSeconds\": 60 to 2592000, \"perCategory\"?: bool}, or {} for none",
                        code: "bad_frequencyCap")
                }
                app.security.frequencyCap = parsed
            default:
                throw HeraldError.invalid("frequencyCap needs both limit and windowSeconds, or nothing ({} for none)", code: "bad_frequencyCap")
            }
        }
        if let tags = body.protectedTags {
            guard tags.count <= 100, tags.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 64 }) else {
                throw HeraldError.invalid("protectedTags is an array of up to 100 tags of 1 to 64 bytes", code: "bad_protectedTags")
            }
            app.security.protectedTags = Array(Set(tags)).sorted()
        }
        guard try await self.store.setAppSecurity(appID: app.id, app.security) else { throw HeraldError.notFound("app '\(app.id)'") }
        return AppResponse(app)
    }

    /// Makes the app's user secret, replacing the one before: shown once, stored sealed.
    @Sendable func newUserSecret(_ request: Request, context: APIRequestContext) async throws -> Answer<UserSecretResponse> {
        var app = try context.requireApp()
        let secret = "hus_" + Base64URL.encode(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
        do {
            app.security.sealedUserSecret = try self.secrets.seal(Array(secret.utf8))
        } catch {
            throw HeraldError(code: "seal_failed", "cannot encrypt the user secret")
        }
        guard try await self.store.setAppSecurity(appID: app.id, app.security) else { throw HeraldError.notFound("app '\(app.id)'") }
        return Answer(.created, UserSecretResponse(secret: secret))
    }

    /// `current` with the fields given changed: each `BURST/PER_SECOND`, or `0` (or empty) for
    /// none; 400 `bad_rateLimits` naming the field otherwise.
    static func rateLimits(_ current: AppRateLimits, _ given: [String: String?]) throws -> AppRateLimits {
        var limits = current
        for field in AppRateLimits.fields {
            guard case .some(.some(let raw)) = given[field] else { continue }
            let text = raw.trimmingCharacters(in: .whitespaces)
            if text.isEmpty || text == "0" || text == "off" {
                limits[field] = nil
                continue
            }
            guard let limit = TokenBucket.Limit(parsing: text) else {
                throw HeraldError.invalid(
                    "rateLimits.\(field) is BURST/PER_SECOND (such as 100/10), or 0 for none", code: "bad_rateLimits")
            }
            limits[field] = limit
        }
        return limits
    }

    /// Signs a user assertion with the app's secret, for a backend holding a send key (or a test).
    @Sendable func newUserAssertion(_ request: Request, context: APIRequestContext) async throws -> Answer<UserAssertionResponse> {
        let app = try context.requireApp()
        let body = try await request.decode(as: CreateUserAssertionRequest.self, context: context)
        guard let user = body.userId, !user.isEmpty, user.utf8.count <= 256 else {
            throw HeraldError.invalid("userId is required (1 to 256 bytes)", code: "missing_userId")
        }
        let ttl = body.ttl ?? 600
        guard (1...UserAssertion.maximumLifetime).contains(ttl) else {
            throw HeraldError.invalid("ttl is 1 to \(UserAssertion.maximumLifetime) seconds", code: "bad_ttl")
        }
        // Bound to the one device it may bind: the token as it will be registered (an APNs
        // token in lowercase hex, as the registry keeps it).
        var tokenHash: String?
        if let token = body.token {
            guard !token.isEmpty, token.utf8.count <= 4096 else { throw HeraldError.invalid("token is 1 to 4096 bytes", code: "bad_token") }
            tokenHash = UserAssertion.tokenHash((try? DeviceToken(hex: token).hex) ?? token)
        } else if !app.security.unboundAssertions {
            throw HeraldError.invalid("token is required: an assertion is bound to the device token it may register", code: "missing_token")
        }
        let secret = try UserSecrets.open(app, secrets: self.secrets)
        let assertion = UserAssertion(appID: app.id, userID: user, expiresAt: self.clock.nowMilliseconds / 1000 + ttl, tokenHash: tokenHash)
        return Answer(.created, UserAssertionResponse(assertion: assertion.signed(secret: secret), expiresAt: assertion.expiresAt))
    }

    @Sendable func create(_ request: Request, context: APIRequestContext) async throws -> Answer<AppResponse> {
        let body = try await request.decode(as: CreateAppRequest.self, context: context)
        let id = try Validate.string(body.id, "id", pattern: .identifier)
        let bundleID = try Validate.string(body.bundleId, "bundleId", pattern: .bundleID)
        let app = App(id: id, bundleID: bundleID, createdAt: self.clock.nowMilliseconds)
        try await self.store.createApp(app)
        return Answer(.created, AppResponse(app))
    }

    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> AppList {
        AppList(apps: try await self.store.apps().map(AppResponse.init))
    }

    @Sendable func setCredentials(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let route = try Self.credentialRoute(context)
        let body = try await request.decode(as: CredentialRequest.self, context: context)
        let plain: [UInt8]
        if route == .webpush {
            throw HeraldError.invalid(
                "Herald makes each app's VAPID key: GET /v1/apps/{app}/webpush/key shows it, POST there makes a new one", code: "bad_credentials")
        } else if route == .fcm {
            plain = try Self.fcmCredential(body)
        } else {
            guard body.serviceAccount == nil else {
                throw HeraldError.invalid("serviceAccount is FCM's credential: PUT it to credentials/fcm", code: "bad_credentials")
            }
            plain = CredentialCoding.encode(try Self.credential(body))
        }
        let sealed: [UInt8]
        do {
            sealed = try self.secrets.seal(plain)
        } catch {
            throw HeraldError(code: "seal_failed", "cannot encrypt the credentials")
        }
        try await self.store.setCredential(appID: app.id, environment: route, sealed: sealed, now: self.clock.nowMilliseconds)
        return Response(status: .noContent)
    }

    /// The path's `:environment`: an APNs environment, or `fcm` (`bad_environment`).
    static func credentialRoute(_ context: APIRequestContext) throws -> Route {
        let name = context.parameters.get("environment") ?? ""
        if name == "fcm" { return .fcm }
        if name == "webpush" { return .webpush }
        guard let environment = APNSEnvironment(name: name) else {
            throw HeraldError.invalid("the environment must be development (sandbox), production, fcm or webpush", code: "bad_environment")
        }
        return .apns(environment)
    }

    /// An FCM credential: a service account's key file, read as Herald will use it
    /// (`bad_service_account` says what is wrong, never the key), kept as uploaded.
    static func fcmCredential(_ body: CredentialRequest) throws -> [UInt8] {
        guard let account = body.serviceAccount else {
            throw HeraldError.invalid("an FCM credential is a serviceAccount (the key file's JSON object)", code: "missing_serviceAccount")
        }
        guard body.keyId == nil, body.teamId == nil, body.privateKey == nil, body.certificate == nil, body.pkcs12 == nil, body.restrictedTo == nil
        else {
            throw HeraldError.invalid("an FCM credential is a serviceAccount alone", code: "bad_credentials")
        }
        let json = JSONValue(account).serialized()
        guard json.count <= 16_384 else { throw HeraldError.invalid("serviceAccount is larger than 16 KiB", code: "bad_service_account") }
        do {
            _ = try FCMServiceAccountKey(json: json)
        } catch {
            throw HeraldError.invalid("serviceAccount is not usable: \(error.description)", code: "bad_service_account")
        }
        return FCMClientProvider.encode(serviceAccount: json)
    }

    static func credential(_ body: CredentialRequest) throws -> CredentialMaterial {
        if let bundle = body.pkcs12 {
            guard body.certificate == nil, body.privateKey == nil, body.keyId == nil, body.teamId == nil else {
                throw HeraldError.invalid("give pkcs12 (with its passphrase) alone, or certificate and privateKey (PEM)", code: "bad_credentials")
            }
            let pem = try PKCS12Credential.pem(base64: bundle, passphrase: body.passphrase)
            return .certificate(certificatePEM: pem.certificate, privateKeyPEM: pem.privateKey)
        }
        if let pem = body.privateKey, let keyID = body.keyId, let teamID = body.teamId {
            do {
                _ = try SigningKey(pem: pem, keyID: keyID, teamID: teamID)
            } catch {
                throw HeraldError.unprocessable(error.description, code: "bad_key")
            }
            var restriction: APNSEnvironment?
            if let name = body.restrictedTo {
                guard let environment = APNSEnvironment(name: name) else {
                    throw HeraldError.invalid("restrictedTo must be development or production", code: "bad_environment")
                }
                restriction = environment
            }
            return .token(keyID: keyID, teamID: teamID, privateKeyPEM: pem, restrictedTo: restriction)
        }
        if let certificate = body.certificate, let key = body.privateKey {
            guard certificate.contains("BEGIN CERTIFICATE"), key.contains("PRIVATE KEY") else {
                throw HeraldError.unprocessable("certificate and privateKey must be PEM", code: "bad_certificate")
            }
            return .certificate(certificatePEM: certificate, privateKeyPEM: key)
        }
        throw HeraldError.invalid(
            "give keyId, teamId and privateKey (a .p8 key), certificate and privateKey (PEM), or pkcs12 (a .p12, base64) and its passphrase",
            code: "bad_credentials")
    }
}

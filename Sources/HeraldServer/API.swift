// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import HeraldKit
import Hummingbird
import HTTPTypes
import Logging
import NIOCore
import Prometheus

/// The `/v1` JSON API: apps and credentials (admin), devices (register), notifications (send),
/// keys (admin). Every error is `{"error": {"code", "message"}}`.
struct API: Sendable {
    let store: any HeraldStore
    let secrets: SecretBox
    let engine: DeliveryEngine
    let clock: any EpochClock
    let metrics: PrometheusCollectorRegistry?
    let events: DeliveryEvents
    /// Webhooks may point at loopback and private addresses.
    var webhookAllowInternal = false
    static let bodyLimit = 1 << 20

    func register(on router: Router<BasicRequestContext>) {
        router.add(middleware: ErrorMiddleware())
        router.add(middleware: MetricsMiddleware())
        router.get("/health") { _, _ in
            // Healthy means the database answers (within 3 s): without it nothing is accepted or recorded.
            let failure = await withTaskGroup(of: String?.self) { group in
                group.addTask {
                    do {
                        try await self.store.check()
                        return nil
                    } catch {
                        return "\(error)"
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(3))
                    return "no answer within 3 s"
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first
            }
            guard let failure else { return Self.json(.ok, .object([("status", "ok"), ("database", "ok")])) }
            return Self.json(.serviceUnavailable, .object([("status", "unhealthy"), ("database", .string(failure))]))
        }
        router.get("/metrics") { _, _ in
            guard let metrics = self.metrics else { throw HeraldError.notFound("metrics (not enabled)") }
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
        }
        router.get("/v1/openapi.yaml") { _, _ in
            guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"), let document = try? Data(contentsOf: url) else {
                throw HeraldError.notFound("the OpenAPI document")
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/yaml"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: document)))
        }

        let v1 = router.group("v1")
        v1.post("apps") { request, context in
            try await self.authorize(request, scope: .admin, app: nil)
            let body = try await Self.body(request, context)
            let id = try Self.string(body, "id", pattern: .identifier)
            let bundleID = try Self.string(body, "bundleId", pattern: .bundleID)
            let app = App(id: id, bundleID: bundleID, createdAt: self.clock.nowMilliseconds)
            try await self.store.createApp(app)
            return Self.json(.created, Self.appJSON(app))
        }
        v1.get("apps") { request, _ in
            try await self.authorize(request, scope: .admin, app: nil)
            return Self.json(.ok, .object([("apps", .array(try await self.store.apps().map(Self.appJSON)))]))
        }
        v1.put("apps/:app/credentials/:environment") { request, context in
            let app = try await self.app(request, context, scope: .admin)
            guard let environment = context.parameters.get("environment").flatMap(APNSEnvironment.init(name:)) else {
                throw HeraldError.invalid("the environment must be development (sandbox) or production", code: "bad_environment")
            }
            let body = try await Self.body(request, context)
            let material = try Self.credential(body)
            let sealed: [UInt8]
            do {
                sealed = try self.secrets.seal(CredentialCoding.encode(material))
            } catch {
                throw HeraldError(status: 500, code: "seal_failed", "cannot encrypt the credentials")
            }
            try await self.store.setCredential(appID: app.id, environment: environment, sealed: sealed, now: self.clock.nowMilliseconds)
            return Response(status: .noContent)
        }
        v1.post("keys") { request, context in
            try await self.authorize(request, scope: .admin, app: nil)
            let body = try await Self.body(request, context)
            guard let scope = body["scope"]?.stringValue.flatMap(APIScope.init(rawValue:)) else {
                throw HeraldError.invalid("scope must be register, send or admin", code: "bad_scope")
            }
            let appID = body["appId"]?.stringValue
            if let appID, try await self.store.app(appID) == nil { throw HeraldError.notFound("app '\(appID)'") }
            if scope == .register, appID == nil {
                throw HeraldError.invalid("a register key belongs to one app: give appId", code: "app_required")
            }
            let secret = APIKeySecret.generate()
            try await self.store.createAPIKey(
                id: secret.id, hash: secret.hash, scope: scope, appID: appID, name: body["name"]?.stringValue, now: self.clock.nowMilliseconds
            )
            return Self.json(.created, .object([("id", .string(secret.id)), ("key", .string(secret.token)), ("scope", .string(scope.rawValue))]))
        }
        v1.get("keys") { request, _ in
            try await self.authorize(request, scope: .admin, app: nil)
            return Self.json(.ok, .object([("keys", .array(try await self.store.apiKeys().map(Self.keyJSON)))]))
        }
        v1.delete("keys/:id") { request, context in
            try await self.authorize(request, scope: .admin, app: nil)
            let id = context.parameters.get("id") ?? ""
            guard try await self.store.revokeAPIKey(id: id, now: self.clock.nowMilliseconds) else { throw HeraldError.notFound("API key '\(id)'") }
            return Response(status: .noContent)
        }

        // Devices
        v1.put("apps/:app/devices/:token") { request, context in
            let app = try await self.app(request, context, scope: .register)
            let token = try Self.token(context.parameters.get("token") ?? "")
            let body = try await Self.body(request, context)
            let registration = try Self.registration(body, token: token)
            let device = try await self.store.register(appID: app.id, registration, now: self.clock.nowMilliseconds)
            return Self.json(.ok, Self.deviceJSON(device))
        }
        v1.delete("apps/:app/devices/:token") { request, context in
            let app = try await self.app(request, context, scope: .register)
            let token = try Self.token(context.parameters.get("token") ?? "")
            guard try await self.store.unregister(appID: app.id, token: token.hex) else { throw HeraldError.notFound("device") }
            return Response(status: .noContent)
        }
        v1.get("apps/:app/devices") { request, context in
            let app = try await self.app(request, context, scope: .send)
            let query = request.uri.queryParameters
            let limit = try Self.limit(request, fallback: 100, maximum: 1000)
            let devices = try await self.store.devices(
                appID: app.id,
                DeviceQuery(
                    userID: query["userId"].map(String.init), tag: query["tag"].map(String.init),
                    tokenPrefix: query["prefix"].map { String($0).lowercased() }, limit: limit
                )
            )
            return Self.json(.ok, .object([("devices", .array(devices.map(Self.deviceJSON)))]))
        }
        v1.get("apps/:app/devices/:token") { request, context in
            let app = try await self.app(request, context, scope: .send)
            let token = try Self.token(context.parameters.get("token") ?? "")
            guard let device = try await self.store.device(appID: app.id, token: token.hex) else { throw HeraldError.notFound("device") }
            let invalidations = try await self.store.invalidations(appID: app.id, deviceID: device.id)
            guard case .object(var members) = Self.deviceJSON(device) else { return Self.json(.ok, Self.deviceJSON(device)) }
            members.append((
                "invalidations",
                .array(invalidations.map { item in
                    .object([
                        ("reason", .string(item.reason)), ("apnsTimestamp", item.apnsTimestamp.map(JSONValue.int) ?? .null),
                        ("at", .int(item.at)), ("applied", .bool(item.applied)),
                    ])
                })
            ))
            return Self.json(.ok, .object(members))
        }
        v1.get("apps/:app/devices/:token/deliveries") { request, context in
            let app = try await self.app(request, context, scope: .send)
            let token = try Self.token(context.parameters.get("token") ?? "")
            let limit = try Self.limit(request, fallback: 50, maximum: 1000)
            guard try await self.store.device(appID: app.id, token: token.hex) != nil else { throw HeraldError.notFound("device") }
            let deliveries = try await self.store.deliveries(appID: app.id, token: token.hex, limit: limit)
            return Self.json(.ok, .object([("deliveries", .array(deliveries.map { Self.deliveryJSON($0, withNotification: true) }))]))
        }

        // Notifications
        v1.post("apps/:app/notifications") { request, context in
            let app = try await self.app(request, context, scope: .send)
            let body = try await Self.body(request, context)
            let spec = try NotificationRequest.parse(body, now: self.clock.nowMilliseconds)
            let id = UUIDText.random()
            let created = try await self.store.createNotification(appID: app.id, id: id, bundleID: app.bundleID, spec, now: self.clock.nowMilliseconds)
            if !created.existing { self.engine.ring() }
            return Self.json(
                created.existing ? .ok : .accepted,
                .object([("id", .string(created.id)), ("deliveries", .int(Int64(created.deliveries))), ("duplicate", .bool(created.existing))])
            )
        }
        v1.get("apps/:app/notifications") { request, context in
            let app = try await self.app(request, context, scope: .send)
            let limit = try Self.limit(request, fallback: 50, maximum: 500)
            var before: Int64?
            if let text = request.uri.queryParameters["before"] {
                guard let value = Int64(String(text)), value > 0 else {
                    throw HeraldError.invalid("before must be a time in milliseconds since 1970", code: "bad_before")
                }
                before = value
            }
            let summaries = try await self.store.notifications(appID: app.id, limit: limit, before: before)
            return Self.json(.ok, .object([("notifications", .array(summaries.map { .object(Self.summaryMembers($0)) }))]))
        }
        v1.get("apps/:app/notifications/:id") { request, context in
            let app = try await self.app(request, context, scope: .send)
            let id = context.parameters.get("id") ?? ""
            guard let status = try await self.store.notification(appID: app.id, id: id, deliveryLimit: 1000) else {
                throw HeraldError.notFound("notification")
            }
            return Self.json(.ok, Self.notificationJSON(status))
        }
        v1.delete("apps/:app/notifications/:id") { request, context in
            let app = try await self.app(request, context, scope: .send)
            let id = context.parameters.get("id") ?? ""
            guard try await self.store.notification(appID: app.id, id: id, deliveryLimit: 0) != nil else { throw HeraldError.notFound("notification") }
            let cancelled = try await self.store.cancelNotification(appID: app.id, id: id, now: self.clock.nowMilliseconds)
            return Self.json(.ok, .object([("cancelled", .bool(cancelled))]))
        }
        self.registerEvents(on: v1)
    }

    // MARK: auth

    /// Checks the bearer key: known, hash matches (constant time), scope allows, app matches.
    @discardableResult
    func authorize(_ request: Request, scope: APIScope, app appID: String?) async throws -> StoredAPIKey {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") else { throw HeraldError.unauthorized }
        let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        guard let id = APIKeySecret.id(of: token), let key = try await self.store.apiKey(id: id), APIKeySecret.matches(token, hash: key.hash) else {
            throw HeraldError.unauthorized
        }
        guard key.scope.allows(scope) else { throw HeraldError.forbidden("this key's scope (\(key.scope.rawValue)) does not allow this") }
        if let bound = key.appID, bound != appID { throw HeraldError.forbidden("this key belongs to another app") }
        return key
    }

    func app(_ request: Request, _ context: BasicRequestContext, scope: APIScope) async throws -> App {
        let id = context.parameters.get("app") ?? ""
        try await self.authorize(request, scope: scope, app: id)
        guard let app = try await self.store.app(id) else { throw HeraldError.notFound("app '\(id)'") }
        return app
    }

    // MARK: parsing

    static func body(_ request: Request, _ context: BasicRequestContext) async throws -> JSONValue {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: Self.bodyLimit)
        } catch {
            throw HeraldError.tooLarge
        }
        do {
            let value = try JSONValue.parse(buffer.readableBytesView)
            guard case .object = value else { throw HeraldError.invalid("the body must be a JSON object", code: "invalid_json") }
            return value
        } catch let error as HeraldError {
            throw error
        } catch {
            throw HeraldError.invalid("the body is not JSON: \(error)", code: "invalid_json")
        }
    }

    enum Pattern {
        case identifier, bundleID
    }

    static func string(_ body: JSONValue, _ key: String, pattern: Pattern) throws -> String {
        guard let value = body[key]?.stringValue, !value.isEmpty, value.utf8.count <= 128 else {
            throw HeraldError.invalid("\(key) is required (a string of 1 to 128 characters)", code: "missing_\(key)")
        }
        let allowed: (UInt8) -> Bool
        switch pattern {
        case .identifier: allowed = { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F }
        case .bundleID: allowed = { ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x2E }
        }
        guard value.utf8.allSatisfy(allowed) else {
            throw HeraldError.invalid(
                pattern == .identifier ? "\(key) may hold a-z, 0-9, - and _" : "\(key) is not a bundle identifier", code: "bad_\(key)"
            )
        }
        return value
    }

    static func token(_ text: String) throws -> DeviceToken {
        do {
            return try DeviceToken(hex: text.lowercased())
        } catch {
            throw HeraldError.invalid(error.description, code: "bad_device_token")
        }
    }

    static func credential(_ body: JSONValue) throws -> CredentialMaterial {
        if let pem = body["privateKey"]?.stringValue, let keyID = body["keyId"]?.stringValue, let teamID = body["teamId"]?.stringValue {
            do {
                _ = try SigningKey(pem: pem, keyID: keyID, teamID: teamID)
            } catch {
                throw HeraldError.unprocessable(error.description, code: "bad_key")
            }
            var restriction: APNSEnvironment?
            if let name = body["restrictedTo"]?.stringValue {
                guard let environment = APNSEnvironment(name: name) else {
                    throw HeraldError.invalid("restrictedTo must be development or production", code: "bad_environment")
                }
                restriction = environment
            }
            return .token(keyID: keyID, teamID: teamID, privateKeyPEM: pem, restrictedTo: restriction)
        }
        if let certificate = body["certificate"]?.stringValue, let key = body["privateKey"]?.stringValue {
            guard certificate.contains("BEGIN CERTIFICATE"), key.contains("PRIVATE KEY") else {
                throw HeraldError.unprocessable("certificate and privateKey must be PEM", code: "bad_certificate")
            }
            return .certificate(certificatePEM: certificate, privateKeyPEM: key)
        }
        throw HeraldError.invalid("give keyId, teamId and privateKey (a .p8 key), or certificate and privateKey (PEM)", code: "bad_credentials")
    }

    static func registration(_ body: JSONValue, token: DeviceToken) throws -> DeviceRegistration {
        func text(_ key: String, limit: Int = 256) throws -> String? {
            guard let value = body[key], !value.isNull else { return nil }
            guard let string = value.stringValue, string.utf8.count <= limit else {
                throw HeraldError.invalid("\(key) must be a string of at most \(limit) bytes", code: "bad_\(key)")
            }
            return string
        }
        var kind = DeviceKind.device
        if let name = try text("kind") {
            guard let parsed = DeviceKind(rawValue: name) else {
                throw HeraldError.invalid("kind must be one of \(DeviceKind.allCases.map(\.rawValue).joined(separator: ", "))", code: "bad_kind")
            }
            kind = parsed
        }
        var environment = APNSEnvironment.production
        if let name = try text("environment") {
            guard let parsed = APNSEnvironment(name: name) else {
                throw HeraldError.invalid("environment must be sandbox (development) or production", code: "bad_environment")
            }
            environment = parsed
        }
        var tags: [String] = []
        if let value = body["tags"], !value.isNull {
            guard let array = value.arrayValue, array.count <= 100 else { throw HeraldError.invalid("tags must be an array of up to 100 strings", code: "bad_tags") }
            for item in array {
                guard let tag = item.stringValue, !tag.isEmpty, tag.utf8.count <= 64 else {
                    throw HeraldError.invalid("each tag is a string of 1 to 64 bytes", code: "bad_tags")
                }
                tags.append(tag)
            }
        }
        var publicKey: [UInt8]?
        let publicKeyType = try text("publicKeyType", limit: 16)
        if let encoded = try text("publicKey", limit: 200) {
            guard let type = publicKeyType, let bytes = Data(base64Encoded: encoded) else {
                throw HeraldError.invalid("publicKey is base64, with publicKeyType x25519 or p256", code: "bad_public_key")
            }
            do {
                try EncryptedPayload.validate(EncryptedPayload.PublicKey(type: type, data: bytes))
            } catch {
                throw HeraldError.invalid("publicKey is not a valid \(type) public key (x25519: 32 raw bytes; p256: 65 bytes X9.63)", code: "bad_public_key")
            }
            publicKey = Array(bytes)
        } else if publicKeyType != nil {
            throw HeraldError.invalid("publicKeyType without publicKey", code: "bad_public_key")
        }
        let registration = DeviceRegistration(
            token: token, kind: kind, environment: environment, userID: try text("userId"), tags: tags, locale: try text("locale", limit: 35),
            timeZone: try text("timeZone", limit: 64), appVersion: try text("appVersion", limit: 64), platform: try text("platform", limit: 32),
            activityID: try text("activityId"), attributesType: try text("attributesType"), publicKey: publicKey,
            publicKeyType: publicKey == nil ? nil : publicKeyType
        )
        if kind == .liveActivity, registration.activityID == nil {
            throw HeraldError.invalid("a liveactivity token needs its activityId", code: "missing_activityId")
        }
        if kind == .pushToStart, registration.attributesType == nil {
            throw HeraldError.invalid("a push-to-start token needs its attributesType", code: "missing_attributesType")
        }
        return registration
    }

    // MARK: JSON out

    static func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: value.serialized())))
    }

    static func appJSON(_ app: App) -> JSONValue {
        .object([("id", .string(app.id)), ("bundleId", .string(app.bundleID)), ("createdAt", .int(app.createdAt))])
    }

    static func deviceJSON(_ device: Device) -> JSONValue {
        let r = device.registration
        func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        return .object([
            ("token", .string(r.token.hex)), ("kind", .string(r.kind.rawValue)),
            ("environment", .string(r.environment == .development ? "sandbox" : "production")), ("userId", optional(r.userID)),
            ("tags", .array(r.tags.map(JSONValue.string))), ("locale", optional(r.locale)), ("timeZone", optional(r.timeZone)),
            ("appVersion", optional(r.appVersion)), ("platform", optional(r.platform)), ("activityId", optional(r.activityID)),
            ("attributesType", optional(r.attributesType)), ("active", .bool(device.active)), ("createdAt", .int(device.createdAt)),
            ("lastRegisteredAt", .int(device.lastRegisteredAt)), ("invalidatedAt", device.invalidatedAt.map(JSONValue.int) ?? .null),
            ("invalidationReason", optional(device.invalidationReason)),
            ("publicKeyType", optional(r.publicKeyType)), ("publicKey", optional(r.publicKey.map { Data($0).base64EncodedString() })),
        ])
    }

    static func summaryMembers(_ summary: NotificationSummary) -> [(String, JSONValue)] {
        [
            ("id", .string(summary.id)), ("createdAt", .int(summary.createdAt)), ("scheduledAt", .int(summary.scheduledAt)),
            ("audience", .int(Int64(summary.audienceSize))), ("expanding", .bool(summary.expanding)),
            ("cancelledAt", summary.cancelledAt.map(JSONValue.int) ?? .null),
        ]
    }

    static func notificationJSON(_ status: NotificationStatus) -> JSONValue {
        .object(
            Self.summaryMembers(status.summary) + [
                ("counts", .object(DeliveryState.allCases.map { ($0.rawValue, .int(Int64(status.counts[$0] ?? 0))) })),
                ("deliveries", .array(status.deliveries.map { Self.deliveryJSON($0, withNotification: false) })),
            ]
        )
    }

    static func deliveryJSON(_ d: DeliveryRecord, withNotification: Bool) -> JSONValue {
        var members: [(String, JSONValue)] = withNotification ? [("notificationId", .string(d.notificationID))] : []
        members += [
            ("token", .string(d.token)), ("kind", d.kind.map { .string($0.rawValue) } ?? .null),
            ("environment", .string(d.environment == .development ? "sandbox" : "production")),
            ("pushType", .string(d.pushType.rawValue)), ("state", .string(d.state.rawValue)), ("attempts", .int(Int64(d.attempts))),
            ("apnsId", d.apnsID.map(JSONValue.string) ?? .null), ("status", d.status.map { .int(Int64($0)) } ?? .null),
            ("reason", d.reason.map(JSONValue.string) ?? .null), ("latencyMs", d.latencyMilliseconds.map(JSONValue.int) ?? .null),
            ("updatedAt", .int(d.updatedAt)),
        ]
        return .object(members)
    }

    static func keyJSON(_ key: StoredAPIKey) -> JSONValue {
        .object([
            ("id", .string(key.id)), ("scope", .string(key.scope.rawValue)), ("appId", key.appID.map(JSONValue.string) ?? .null),
            ("name", key.name.map(JSONValue.string) ?? .null), ("createdAt", .int(key.createdAt)),
            ("revokedAt", key.revokedAt.map(JSONValue.int) ?? .null),
        ])
    }

    /// `limit` from the query string: `fallback` when absent, 1…`maximum` otherwise.
    static func limit(_ request: Request, fallback: Int, maximum: Int) throws -> Int {
        guard let text = request.uri.queryParameters["limit"] else { return fallback }
        guard let limit = Int(String(text)), (1...maximum).contains(limit) else {
            throw HeraldError.invalid("limit must be 1 to \(maximum)", code: "bad_limit")
        }
        return limit
    }
}

/// Turns `HeraldError` (and anything unexpected) into the JSON error shape.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HeraldError {
            return Self.response(error)
        } catch let error as HTTPError {
            let code = error.status == .notFound ? "not_found" : error.status == .methodNotAllowed ? "method_not_allowed" : "http_error"
            return Self.response(HeraldError(status: Int(error.status.code), code: code, error.body ?? error.status.reasonPhrase))
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(error)"])
            return Self.response(HeraldError(status: 500, code: "internal_error", "the server failed to handle the request"))
        }
    }

    static func response(_ error: HeraldError) -> Response {
        API.json(
            HTTPResponse.Status(code: error.status),
            .object([("error", .object([("code", .string(error.code)), ("message", .string(error.message))]))])
        )
    }
}

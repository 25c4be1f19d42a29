// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HTTPTypes
import HeraldAPI
import HeraldCore
import Hummingbird
import NIOCore
import WebPush

/// The web's doors: the app's VAPID public key (`GET …/webpush/key`, register keys — what a page
/// subscribes with; made on first ask), a new one (`POST`, admin keys, audited: every browser
/// subscribed with the old key must subscribe again), and the browser SDK (`/sdk/herald-web.js`,
/// `/sdk/herald-sw.js`, public: no key).
struct WebPushController {
    let store: any HeraldStore
    let keys: VAPIDKeys
    let clock: any EpochClock

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        v1.group("apps/:app/webpush/key").add(middleware: RequireScope(.register, store: self.store, clock: self.clock))
            .get(use: self.publicKey)
        v1.group("apps/:app/webpush/key").add(middleware: RequireScope(.admin, store: self.store, clock: self.clock))
            .post(use: self.rotate)
    }

    @Sendable func publicKey(_ request: Request, context: APIRequestContext) async throws -> WebPushKeyResponse {
        WebPushKeyResponse(publicKey: try await self.applicationServerKey(appID: try context.requireApp().id))
    }

    @Sendable func rotate(_ request: Request, context: APIRequestContext) async throws -> WebPushKeyResponse {
        WebPushKeyResponse(publicKey: try await self.newKey(appID: try context.requireApp().id, by: context.key?.id))
    }

    /// The app's VAPID public key (base64url), made and stored now if it has none: what `GET`
    /// answers and the dashboard's app page shows. Never the private key.
    func applicationServerKey(appID: String) async throws -> String {
        try await self.keys.ensure(appID: appID).publicKeyBase64URL
    }

    /// A new VAPID key for the app, audited `webpush.rotate` by `keyID`: its public key. What
    /// `POST` does and the dashboard's "New key" form does; every browser subscribed with the
    /// old key must subscribe again.
    func newKey(appID: String, by keyID: String?) async throws -> String {
        let key = try await self.keys.rotate(appID: appID)
        try await self.store.addAudit(
            AuditRecord(at: self.clock.nowMilliseconds, keyID: keyID, action: "webpush.rotate", appID: appID, subject: nil))
        return key.publicKeyBase64URL
    }

    /// The SDK's files, compiled in (`EmbeddedResources`, `Web/`).
    static let sdkFiles: [String: ByteBuffer] = {
        var files: [String: ByteBuffer] = [:]
        for name in ["herald-web.js", "herald-sw.js"] {
            if let bytes = EmbeddedResources.bytes("Web/" + name) { files[name] = ByteBuffer(bytes: bytes) }
        }
        return files
    }()

    /// `GET /sdk/{file}`: the SDK, to any origin (a page imports it as a module across origins).
    @Sendable static func sdk(_ request: Request, context: APIRequestContext) throws -> Response {
        guard let name = context.parameters.get("file"), let body = Self.sdkFiles[name] else { throw HeraldError.notFound("SDK file") }
        var headers = HTTPFields()
        headers[.contentType] = "text/javascript; charset=utf-8"
        headers[.cacheControl] = "no-cache"
        headers[.accessControlAllowOrigin] = "*"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: body))
    }
}

/// Cross-origin calls from the pages of origins the operator lists (`--web-origin`), to the doors
/// a page uses with a register key: registration, its VAPID key, receipts, unregistering. A
/// preflight is answered here (it carries no key); every other door stays closed to pages.
struct WebOriginMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext
    let origins: Set<String>

    /// `/v1/apps/{app}/` followed by one of these (the last with a device after it).
    static let doors = ["registrations", "receipts", "webpush/key", "devices/"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], self.origins.contains(origin), Self.isDoor(request.uri.path) else {
            return try await next(request, context)
        }
        if request.method == .options {
            var headers = HTTPFields()
            headers[.accessControlAllowOrigin] = origin
            headers[.accessControlAllowMethods] = "GET, POST, PUT, DELETE"
            headers[.accessControlAllowHeaders] = "authorization, content-type"
            headers[.accessControlMaxAge] = "600"
            headers[.vary] = "Origin"
            return Response(status: .noContent, headers: headers)
        }
        var response = try await next(request, context)
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.vary] = "Origin"
        return response
    }

    static func isDoor(_ path: String) -> Bool {
        let parts = path.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        // "", "v1", "apps", "{app}/…"
        guard parts.count == 4, parts[1] == "v1", parts[2] == "apps", let slash = parts[3].firstIndex(of: "/") else { return false }
        let rest = parts[3][parts[3].index(after: slash)...]
        return Self.doors.contains { door in door.hasSuffix("/") ? rest.hasPrefix(door) && rest.count > door.count : rest == door }
    }
}

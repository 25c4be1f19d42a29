// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HTTPTypes
import HeraldAPI
import HeraldCore
import Hummingbird
import NIOCore

/// The `/v1` JSON API: one controller per resource behind one authenticator, plus `/health`,
/// `/livez` and the OpenAPI document (`/metrics` has a listener of its own: ``MetricsServer``). Every error is `{"error": {"code", "message"}}`.
struct API: Sendable {
    let store: any HeraldStore
    let secrets: SecretBox
    let engine: DeliveryEngine
    /// The apps' APNs clients (channel management goes through them).
    let clients: ClientProvider
    let clock: any EpochClock
    let events: DeliveryEvents
    /// Deletes apps in the background once their deletion began.
    let appDeletions: AppDeletions
    /// Webhooks may point at loopback and private addresses.
    var webhookAllowInternal = false
    /// The rate limits on registration and sending; nil: none.
    var rateLimit: RateLimitGate?
    /// The apps' VAPID keys (Web Push).
    let vapidKeys: VAPIDKeys
    /// Which Web Push endpoints subscriptions may name.
    var webPushEndpoints = WebPushEndpointPolicy()
    /// Origins whose pages may call the register-key doors across origins (CORS).
    var webOrigins: Set<String> = []
    static let bodyLimit = 1 << 20
    /// When each key's use was last written down, for every path that authenticates.
    let keyUsage = KeyUsage()
    /// Failed authentication per client address, for every door that takes a key (the API, the
    /// registration lane, the dashboard's sign-in).
    var authenticationFailures = AuthenticationFailures(limit: AuthenticationFailures.defaultLimit)

    var authenticator: APIKeyAuthenticator {
        APIKeyAuthenticator(
            store: self.store, clock: self.clock, usage: self.keyUsage, failures: self.authenticationFailures,
            limits: self.rateLimit?.limits ?? RateLimits())
    }
    var devices: DevicesController {
        DevicesController(
            store: self.store, secrets: self.secrets, clock: self.clock, rateLimit: self.rateLimit, webPushEndpoints: self.webPushEndpoints)
    }

    var webhooks: WebhooksController {
        WebhooksController(store: self.store, secrets: self.secrets, clock: self.clock, events: self.events, allowInternal: self.webhookAllowInternal)
    }

    func register(on router: Router<APIRequestContext>) {
        // Outermost: error answers carry the CORS headers too, so a page reads their code.
        if !self.webOrigins.isEmpty { router.add(middleware: WebOriginMiddleware(origins: self.webOrigins)) }
        router.add(middleware: ErrorMiddleware())
        router.add(middleware: MetricsMiddleware())
        router.get("/health", use: self.health)
        router.get("/sdk/:file", use: WebPushController.sdk)
        router.get("/livez", use: Self.live)
        router.get("/v1/openapi.yaml", use: Self.openAPIDocument)

        let v1 = router.group("v1").add(middleware: self.authenticator)
        AppsController(store: self.store, secrets: self.secrets, clock: self.clock, appDeletions: self.appDeletions).addRoutes(to: v1)
        KeysController(store: self.store, clock: self.clock).addRoutes(to: v1)
        self.devices.addRoutes(to: v1)
        NotificationsController(store: self.store, engine: self.engine, clients: self.clients, clock: self.clock, rateLimit: self.rateLimit)
            .addRoutes(to: v1)
        self.webhooks.addRoutes(to: v1)
        TemplatesController(store: self.store, clock: self.clock).addRoutes(to: v1)
        ChannelsController(store: self.store, clients: self.clients, clock: self.clock).addRoutes(to: v1)
        LiveActivitiesController(store: self.store, engine: self.engine, clients: self.clients, clock: self.clock, rateLimit: self.rateLimit)
            .addRoutes(to: v1)
        EventsController(store: self.store, events: self.events, clock: self.clock).addRoutes(to: v1)
        ReceiptsController(store: self.store, secrets: self.secrets, clock: self.clock, events: self.events, rateLimit: self.rateLimit)
            .addRoutes(to: v1)
        WebPushController(store: self.store, keys: self.vapidKeys, clock: self.clock).addRoutes(to: v1)
    }

    /// Alive means this process answers HTTP: nothing else is asked, so a liveness probe never
    /// restarts a server whose database is down (`/health` is the readiness check). It is also
    /// the API's own ceiling in `Benchmarks/api-bench.sh`: every middleware, no work.
    @Sendable static func live(_ request: Request, context: APIRequestContext) -> HTTPResponse.Status { .noContent }

    /// Healthy means the database answers (within 3 s): without it nothing is accepted or recorded.
    @Sendable func health(_ request: Request, context: APIRequestContext) async throws -> Response {
        let store = self.store
        let failure = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                do {
                    try await store.check()
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
        guard let failure else { return try Answer(.ok, HealthResponse(status: "ok", database: "ok")).response(from: request, context: context) }
        return try Answer(.serviceUnavailable, HealthResponse(status: "unhealthy", database: failure)).response(from: request, context: context)
    }

    @Sendable static func openAPIDocument(_ request: Request, context: APIRequestContext) async throws -> Response {
        guard let document = Self.openAPIYAML else { throw HeraldError.notFound("the OpenAPI document") }
        var headers = HTTPFields()
        headers[.contentType] = "application/yaml"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: document)))
    }

    /// The OpenAPI document this server answers to (`openapi.yaml`, compiled in: `EmbeddedResources`).
    static let openAPIYAML: [UInt8]? = EmbeddedResources.bytes("openapi.yaml")

    static func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        Self.json(status, value.serialized())
    }

    /// An answer of JSON already written.
    static func json(_ status: HTTPResponse.Status, _ bytes: [UInt8]) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

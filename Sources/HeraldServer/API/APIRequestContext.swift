// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Hummingbird
import Logging
import NIOCore

/// The request context of every route: what the authenticator found (the key) and, on routes
/// under `/v1/apps/{app}`, the app the key was checked against.
struct APIRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    /// The TCP peer (the rate limits' client address, unless it is a trusted proxy).
    let remoteAddress: SocketAddress?
    /// The caller's key, set by ``APIKeyAuthenticator`` when the request carried a valid one.
    var key: StoredAPIKey?
    /// The client the request counts against (``RateLimits/clientAddress(peer:forwardedFor:)``),
    /// named by ``APIKeyAuthenticator`` for its gate and read again by the rate limits.
    var clientAddress: String?
    /// The app named by the path, set by ``RequireScope`` once the key may act on it.
    var app: App?

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    var requestDecoder: APIRequestDecoder { APIRequestDecoder() }
    var responseEncoder: APIResponseEncoder { APIResponseEncoder() }
    var maxUploadSize: Int { API.bodyLimit }

    /// The key the scope middleware let through (routes behind ``RequireScope`` only).
    func requireKey() throws -> StoredAPIKey {
        guard let key = self.key else { throw HeraldError.unauthorized }
        return key
    }

    /// The app the scope middleware loaded (routes under `apps/:app` only).
    func requireApp() throws -> App {
        guard let app = self.app else { throw HeraldError.notFound("app '\(self.parameters.get("app") ?? "")'") }
        return app
    }
}

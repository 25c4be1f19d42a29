// SPDX-License-Identifier: Apache-2.0
import APNSModels
import CoreMetrics
import HTTPTypes
import HeraldCore
import Hummingbird
import Logging
import ServiceLifecycle

/// The rate limits of one server: the configured ``RateLimits``, the limiter that keeps the
/// buckets (in memory on SQLite, leased from shared rows on PostgreSQL) and the counters of
/// refusals at `/metrics` (`herald_rate_limited_total{operation, scope, limit}`).
struct RateLimitGate: Sendable {
    let limits: RateLimits
    let limiter: any RateLimiter
    let clock: any EpochClock
    /// Where an app's own limits are read (through the store's cache of apps).
    let store: any HeraldStore
    private let refused: [String: Counter]

    init(limits: RateLimits, store: any HeraldStore, clock: any EpochClock) {
        self.limits = limits
        self.clock = clock
        self.store = store
        if let shared = store as? any RateBucketStore {
            self.limiter = LeasedRateLimiter(store: shared, limits: limits)
        } else {
            self.limiter = LocalRateLimiter(maxBuckets: limits.maxBuckets)
        }
        var refused: [String: Counter] = [:]
        for operation in RateLimits.Operation.allCases {
            for scope in APIScope.allCases {
                for kind in RateLimits.Kind.allCases {
                    refused[Self.name(operation, scope, kind)] = Counter(
                        label: "herald_rate_limited_total",
                        dimensions: [("operation", operation.rawValue), ("scope", scope.rawValue), ("limit", kind.rawValue)]
                    )
                }
            }
        }
        self.refused = refused
    }

    private static func name(_ operation: RateLimits.Operation, _ scope: APIScope, _ kind: RateLimits.Kind) -> String {
        "\(operation.rawValue) \(scope.rawValue) \(kind.rawValue)"
    }

    /// A request over one of its limits: which, and when to come back (whole seconds, at least 1).
    struct Refusal {
        let kind: RateLimits.Kind
        let retryAfter: Int

        /// 429 `rate_limited`, answered with `Retry-After: retryAfter`.
        var error: HeraldError {
            let whose = self.kind == .key ? "this API key" : self.kind == .app ? "this app" : "this client address"
            return HeraldError(code: "rate_limited", "too many requests from \(whose); retry in \(self.retryAfter) s")
        }
    }

    /// Nil when the request may go on; else the bucket that refused it and when to come back.
    /// `app`: the app the request acts on, whose own limits (``AppRateLimits``) apply too.
    func check(_ operation: RateLimits.Operation, key: StoredAPIKey, address: String?, app: App?) async throws -> Refusal? {
        let now = self.clock.nowMilliseconds
        let own = app.flatMap { $0.security.rateLimits.isEmpty ? nil : (id: $0.id, limits: $0.security.rateLimits) }
        for bucket in self.limits.buckets(operation, scope: key.scope, keyID: key.id, address: address, app: own) {
            if case .refused(let seconds) = try await self.limiter.take(bucket, now: now) {
                self.refused[Self.name(operation, key.scope, bucket.kind)]?.increment()
                return Refusal(kind: bucket.kind, retryAfter: seconds)
            }
        }
        return nil
    }
}

/// Applies the rate limits to a route group (after authentication, so that the key is known):
/// a request over its limit is answered 429 `rate_limited` with `Retry-After` in whole seconds
/// (at least 1), before the route reads anything. A request without a key goes on (and
/// ``RequireScope`` refuses it).
struct RateLimit: RouterMiddleware {
    typealias Context = APIRequestContext
    let operation: RateLimits.Operation
    let gate: RateLimitGate?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let gate = self.gate, let key = context.key else { return try await next(request, context) }
        // Named by the authenticator already (a key is there, so it ran).
        let address =
            context.clientAddress
            ?? gate.limits.clientAddress(peer: context.remoteAddress?.ipAddress, forwardedFor: request.headers[values: .forwardedFor])
        // The app of the path (read through the store's cache), for its own limits: only when the
        // key may act on it (``KeyAccess``), so that another app's key cannot spend them (the
        // scope check refuses it next); none when it does not exist (404 next).
        var app: App?
        if let id = context.parameters.get("app"),
            (try? KeyAccess.authorize(key, at: .api(scope: self.operation.scope, appID: id), now: gate.clock.nowMilliseconds)) != nil
        {
            app = try await gate.store.app(id)
        }
        guard let refused = try await gate.check(self.operation, key: key, address: address, app: app) else {
            return try await next(request, context)
        }
        var response = try refused.error.response(from: request, context: context)
        response.headers[.retryAfter] = String(refused.retryAfter)
        return response
    }
}

extension HTTPField.Name {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
}

/// Forgets the shared buckets that are full again, every 10 minutes (PostgreSQL only).
struct RateBucketPruner: Service {
    let store: any RateBucketStore
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                _ = try await self.store.pruneRateBuckets()
            } catch {
                self.logger.warning("pruning rate-limit buckets failed", metadata: ["error": "\(error)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(600)) }
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// A signed provider token as sent: the whole `authorization` header value and when it was issued.
public struct ProviderToken: Sendable, Hashable {
    /// `bearer <JWT>`.
    public let authorization: String
    /// UNIX seconds (`iat`).
    public let issuedAt: Int64
    /// Counts the tokens this source has signed; a connection that sees a new generation knows
    /// the token changed.
    public let generation: Int
}

/// One provider token per signing key, shared by every connection that uses the key, as Apple
/// asks: signed once, reused, refreshed after `refreshAfter` (50 minutes by default, inside
/// APNs's one-hour limit and well past its 20-minute minimum between changes on a connection).
///
/// Reading the current token takes a lock, not an `await`: it sits on every request's path, and
/// signing happens only once per refresh interval.
public final class ProviderTokenSource: Sendable {
    /// APNs refuses tokens older than an hour.
    public static let maximumAgeSeconds: Int64 = 3600
    /// APNs refuses a new token on a connection within 20 minutes of the last change.
    public static let minimumChangeIntervalSeconds: Int64 = 20 * 60

    public let key: SigningKey
    public let refreshAfterSeconds: Int64
    private let clock: any EpochClock
    private let state = Mutex<ProviderToken?>(nil)

    /// - Parameter refreshAfterSeconds: between 20 and 59 minutes; 50 by default.
    public init(key: SigningKey, clock: any EpochClock = SystemEpochClock(), refreshAfterSeconds: Int64 = 50 * 60) {
        self.key = key
        self.clock = clock
        self.refreshAfterSeconds = min(max(refreshAfterSeconds, Self.minimumChangeIntervalSeconds), Self.maximumAgeSeconds - 60)
    }

    /// The token to send now: the shared one, or a fresh one once it is `refreshAfter` old.
    public func current() throws(APNSValidationError) -> ProviderToken {
        let now = self.clock.nowSeconds
        return try self.state.withLock { (current) throws(APNSValidationError) -> ProviderToken in
            if let token = current, now - token.issuedAt < self.refreshAfterSeconds, token.issuedAt <= now + 60 {
                return token
            }
            let token = try self.sign(now: now, generation: (current?.generation ?? 0) + 1)
            current = token
            return token
        }
    }

    /// After APNs answered `ExpiredProviderToken` for `rejected`: a new token, unless another
    /// connection already replaced it (then that one). The caller retries on a fresh connection,
    /// where any token may come first.
    public func refresh(replacing rejected: ProviderToken) throws(APNSValidationError) -> ProviderToken {
        let now = self.clock.nowSeconds
        return try self.state.withLock { (current) throws(APNSValidationError) -> ProviderToken in
            if let token = current, token.generation != rejected.generation {
                return token
            }
            let token = try self.sign(now: now, generation: (current?.generation ?? 0) + 1)
            current = token
            return token
        }
    }

    private func sign(now: Int64, generation: Int) throws(APNSValidationError) -> ProviderToken {
        ProviderToken(authorization: "bearer " + (try self.key.providerToken(issuedAt: now)), issuedAt: now, generation: generation)
    }
}

// SPDX-License-Identifier: Apache-2.0
public import Foundation

/// How often and how patiently the client tries again when the network or the server fails.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts within one call; a registration that still fails stays pending (see
    /// ``HeraldClient``) and is tried again on a later call or launch.
    public var maximumAttempts: Int
    /// Seconds before the second attempt; doubles each time.
    public var initialDelaySeconds: TimeInterval
    /// The cap on the wait between two attempts, in seconds.
    public var maximumDelaySeconds: TimeInterval

    public init(maximumAttempts: Int = 6, initialDelaySeconds: TimeInterval = 0.5, maximumDelaySeconds: TimeInterval = 30) {
        self.maximumAttempts = maximumAttempts
        self.initialDelaySeconds = initialDelaySeconds
        self.maximumDelaySeconds = maximumDelaySeconds
    }

    @available(macOS 13, iOS 16, watchOS 9, tvOS 16, *)
    public init(maximumAttempts: Int = 6, initialDelay: Duration, maximumDelay: Duration = .seconds(30)) {
        self.init(maximumAttempts: maximumAttempts, initialDelaySeconds: initialDelay.seconds, maximumDelaySeconds: maximumDelay.seconds)
    }

    /// The wait in seconds before attempt `attempt + 1` (attempt counts from 1): doubling, capped,
    /// with jitter ×0.5–1 so that many devices failing together do not come back together.
    func delay(after attempt: Int) -> TimeInterval {
        let doubled = self.initialDelaySeconds * Double(1 << min(max(attempt - 1, 0), 20))
        return min(doubled, self.maximumDelaySeconds) * Double.random(in: 0.5...1)
    }
}

@available(macOS 13, iOS 16, watchOS 9, tvOS 16, *)
extension Duration {
    var seconds: TimeInterval {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

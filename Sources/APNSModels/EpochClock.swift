// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Wall-clock time in milliseconds since 1970: what provider tokens (`iat`), expirations and 410
/// timestamps are measured in. Injected so tests can move time instead of waiting for it.
public protocol EpochClock: Sendable {
    var nowMilliseconds: Int64 { get }
}

extension EpochClock {
    public var nowSeconds: Int64 { self.nowMilliseconds / 1000 }
}

/// The system's clock.
public struct SystemEpochClock: EpochClock {
    public init() {}

    public var nowMilliseconds: Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
}

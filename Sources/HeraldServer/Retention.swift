// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Logging
import ServiceLifecycle

/// Deletes delivery records (and then their notifications) older than the retention period,
/// at start and every `interval`, in batches so that no transaction holds the writer long.
/// Pending deliveries are never deleted, however old; nor are webhook messages still being sent.
package struct Retention: Service {
    let store: any HeraldStore
    let keep: Duration
    let interval: Duration
    let clock: any EpochClock
    let logger: Logger
    static let batch = 10_000

    package func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let before = self.clock.nowMilliseconds - self.keep.wholeMilliseconds
            var total = 0
            do {
                while !Task.isShuttingDownGracefully {
                    let deleted = try await self.store.prune(before: before, limit: Self.batch)
                    total += deleted
                    if deleted < Self.batch { break }
                }
                if total > 0 { self.logger.info("retention: old delivery records deleted", metadata: ["herald.deleted": "\(total)"]) }
                // Finished webhook messages (acknowledged or expired) go after the same period.
                let messages = try await self.store.pruneWebhookMessages(before: before)
                if messages > 0 { self.logger.info("retention: finished webhook messages deleted", metadata: ["herald.deleted": "\(messages)"]) }
            } catch {
                self.logger.error("retention failed", metadata: ["error": "\(error)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
        }
    }
}

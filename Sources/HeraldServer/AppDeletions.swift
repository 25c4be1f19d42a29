// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Logging
import ServiceLifecycle

/// Deletes the apps whose deletion began (`DELETE /v1/apps/{app}` answers 202 once it has
/// begun), chunk by chunk, each chunk its own short transaction, so other apps' deliveries go on.
/// The work is in the database (``App/deletion``): after a restart, or in another process of a
/// shared PostgreSQL database, it goes on where it stopped. Rung when a deletion begins; looks
/// again every `interval` for ones begun elsewhere.
final class AppDeletions: Service {
    let store: any HeraldStore
    let clock: any EpochClock
    let logger: Logger
    let interval: Duration
    private let doorbell = Doorbell()

    init(store: any HeraldStore, clock: any EpochClock, logger: Logger, interval: Duration = .seconds(10)) {
        self.store = store
        self.clock = clock
        self.logger = logger
        self.interval = interval
    }

    /// A deletion began: look now.
    func ring() { self.doorbell.ring() }

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let seen = self.doorbell.rings
            do {
                for appID in try await self.store.appsBeingDeleted() {
                    // One app failing does not hold up the others: it is tried again next time.
                    do {
                        try await self.delete(appID)
                    } catch {
                        self.logger.warning("deleting an app failed; trying again later", metadata: ["app": "\(appID)", "error": "\(error)"])
                    }
                }
            } catch {
                self.logger.warning("listing the apps being deleted failed; trying again later", metadata: ["error": "\(error)"])
            }
            await cancelWhenGracefulShutdown { await self.doorbell.wait(after: seen, timeout: self.interval) }
        }
    }

    /// Deletes `appID`'s rows until none is left (then the app), or until shutdown begins.
    private func delete(_ appID: String) async throws {
        var total = 0
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let deleted = try await self.store.deleteAppRows(appID: appID, limit: GovernancePolicy.deletionChunk, now: self.clock.nowMilliseconds)
            if deleted == 0 {
                self.logger.info("app deleted", metadata: ["app": "\(appID)", "rows": "\(total)"])
                return
            }
            total += deleted
        }
    }
}

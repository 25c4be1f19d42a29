// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Logging
import ServiceLifecycle
import UnixSignals

/// Changes the master key of a running process: on SIGHUP it reads the keys again (the file
/// behind `HERALD_MASTER_KEY_FILE`, or `master.key`), and when the master key changed it seals
/// with the new one from then on, keeps the old one for opening, and re-seals every stored secret
/// under the new key — one process changes its master key without stopping.
struct MasterKeyReloader: Service {
    let secrets: SecretBox
    let store: any HeraldStore
    let directory: String
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            do {
                try await self.reload()
            } catch {
                self.logger.error("the master key was not changed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Reads the keys again; re-seals everything when the master key changed. How many secrets.
    @discardableResult
    func reload() async throws -> Int {
        let keys = try loadMasterKeys(directory: self.directory, generate: false)
        guard !self.secrets.seals(with: keys.current) else {
            self.logger.info("SIGHUP: the master key is unchanged")
            return 0
        }
        try self.secrets.replaceKeys(current: keys.current, previous: self.secrets.currentKeyForOpening() + keys.previous)
        let secrets = self.secrets
        let count = try await self.store.resealSecrets { try secrets.reseal($0) }
        self.logger.info("master key changed: stored secrets sealed again", metadata: ["herald.secrets": "\(count)"])
        return count
    }
}

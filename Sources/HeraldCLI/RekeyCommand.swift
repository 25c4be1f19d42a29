// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer
import Logging

struct RekeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Seal every stored secret again under a new master key.",
        discussion: """
            Reads the new master key from HERALD_MASTER_KEY or HERALD_MASTER_KEY_FILE (else <data-dir>/master.key) and \
            the old one from HERALD_PREVIOUS_MASTER_KEY or HERALD_PREVIOUS_MASTER_KEY_FILE, opens every stored secret \
            (APNs credentials, webhook secrets, apps' user secrets) with either, and seals it under the new one, in one \
            transaction. Processes that still run with the old key only cannot open them afterwards: give every process \
            both keys first (HERALD_PREVIOUS_MASTER_KEY*), then rekey, then drop the old key. A single herald serve can \
            instead be sent SIGHUP after its key file changed: it re-seals by itself. See docs/server.md, "Master key".
            """
    )

    @OptionGroup var store: StoreOptions

    func run() async throws {
        let (database, dataDir) = (self.store.resolvedDatabase, self.store.resolvedDataDir)
        let keys = try loadMasterKeys(directory: dataDir, generate: false)
        let secrets = try SecretBox(masterKey: keys.current, previous: keys.previous)
        let count = try await withHeraldStore(database: database, dataDirectory: dataDir, logger: Logger(label: "herald")) { store in
            try await store.resealSecrets { try secrets.reseal($0) }
        }
        print("sealed \(count) stored secrets under the new master key")
    }
}

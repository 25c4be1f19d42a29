// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer
import Logging

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply Herald's database migrations (herald serve also applies them on start).",
        discussion: """
            SQLite and PostgreSQL share one history of numbered versions, recorded in schema_version. On \
            PostgreSQL the migrations run in one transaction under an advisory lock, so processes starting \
            together apply each version once.
            """
    )

    @OptionGroup var store: StoreOptions

    func run() async throws {
        let (database, dataDir) = (self.store.resolvedDatabase, self.store.resolvedDataDir)
        let version = try await withHeraldStore(database: database, dataDirectory: dataDir, logger: Logger(label: "herald")) { store in
            try await store.schemaVersion()
        }
        print("database at schema version \(version)")
    }
}

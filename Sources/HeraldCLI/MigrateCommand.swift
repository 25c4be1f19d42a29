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

    @Option(help: "A SQLite file or a postgres:// URL [HERALD_DATABASE; <data-dir>/herald.sqlite].") var database: String?
    @Option(help: "Data directory [HERALD_DATA_DIR; .herald].") var dataDir: String?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let database = self.database ?? environment["HERALD_DATABASE"]
        let dataDir = self.dataDir ?? environment["HERALD_DATA_DIR"] ?? ".herald"
        let version = try await withHeraldStore(database: database, dataDirectory: dataDir, logger: Logger(label: "herald")) { store in
            try await store.schemaVersion()
        }
        print("database at schema version \(version)")
    }
}

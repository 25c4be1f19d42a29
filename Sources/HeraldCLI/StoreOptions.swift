// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation

/// Where the store is, for the commands that open it without serving: `--database` (or
/// `HERALD_DATABASE`) and `--data-dir` (or `HERALD_DATA_DIR`, default `.herald`).
struct StoreOptions: ParsableArguments {
    @Option(help: "A SQLite file or a postgres:// URL [HERALD_DATABASE; <data-dir>/herald.sqlite].") var database: String?
    @Option(help: "Data directory [HERALD_DATA_DIR; .herald].") var dataDir: String?

    var resolvedDatabase: String? { self.database ?? ProcessInfo.processInfo.environment["HERALD_DATABASE"] }
    var resolvedDataDir: String { self.dataDir ?? ProcessInfo.processInfo.environment["HERALD_DATA_DIR"] ?? ".herald" }
}

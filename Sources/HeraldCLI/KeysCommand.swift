// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer
import Logging

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage API keys in Herald's database.",
        subcommands: [Create.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an API key and print it (once: only its hash is stored).",
            discussion: """
                Scopes: register (one app; can only register and unregister devices, safe to ship inside the app), \
                send (one app with --app, or every app), admin (everything).
                """
        )

        @Option(help: "register, send or admin.") var scope: String
        @Option(help: "The app the key belongs to (required for register).") var app: String?
        @Option(help: "A name to recognise the key by.") var name: String?
        @OptionGroup var store: StoreOptions

        func run() async throws {
            guard let scope = APIScope(rawValue: self.scope) else { throw ValidationError("--scope must be register, send or admin") }
            if scope == .register, self.app == nil { throw ValidationError("a register key belongs to one app: give --app") }
            let (database, dataDir) = (self.store.resolvedDatabase, self.store.resolvedDataDir)
            let path = database ?? dataDir + "/herald.sqlite"
            guard isShared(database: database) || FileManager.default.fileExists(atPath: path) else {
                throw ValidationError("no database at \(path); run herald serve first")
            }
            let token = try await withHeraldStore(database: database, dataDirectory: dataDir, logger: Logger(label: "herald")) { store in
                if let app = self.app, try await store.app(app) == nil { throw ValidationError("no app '\(app)'") }
                let secret = APIKeySecret.generate()
                try await store.createAPIKey(
                    id: secret.id, hash: secret.hash, scope: scope, appID: self.app, name: self.name,
                    now: Int64(Date().timeIntervalSince1970 * 1000)
                )
                return secret.token
            }
            print(token)
        }
    }
}

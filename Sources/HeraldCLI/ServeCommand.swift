// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import ArgumentParser
import Foundation
import HeraldServer
import Logging
import ServiceLifecycle
import UnixSignals

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run Herald: the API, the delivery engine, and a built-in APNs emulator for apps without Apple credentials.",
        discussion: """
            Everything lives in --data-dir: the SQLite database (WAL), the master key that seals stored \
            credentials (unless HERALD_MASTER_KEY is set), and the built-in emulator's CA. On first start an \
            admin API key is printed once. SIGTERM or SIGINT stop claiming work, finish what is in flight, and exit.
            """
    )

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "API port (0: a free one).") var port = 8080
    @Option(help: "Data directory.") var dataDir = ".herald"
    @Option(help: "SQLite database file (default: <data-dir>/herald.sqlite).") var database: String?
    @Flag(help: "Do not start the built-in APNs emulator.") var noEmulator = false
    @Option(help: "Built-in emulator: development port.") var emulatorPort = 2197
    @Option(help: "Built-in emulator: production port.") var emulatorProductionPort = 2196
    @Option(help: "Built-in emulator: control API port.") var emulatorControlPort = 2198
    @Option(help: "Log level.") var logLevel: Logger.Level = .info

    func run() async throws {
        var logger = Logger(label: "herald")
        logger.logLevel = self.logLevel
        var configuration = ServerConfiguration()
        configuration.host = self.host
        configuration.port = self.port
        configuration.dataDirectory = self.dataDir
        configuration.databasePath = self.database
        configuration.builtInEmulator = !self.noEmulator
        configuration.emulatorPorts = (self.emulatorPort, self.emulatorProductionPort, self.emulatorControlPort)
        let finalLogger = logger
        try await withHeraldServer(configuration: configuration, logger: logger) { server in
            if let key = server.initialAdminKey {
                say("Admin API key (shown once; keep it secret):\n  \(key)")
            }
            say("Herald listening on http://\(self.host):\(server.port)")
            if let emulator = server.emulator, let control = emulator.controlPort {
                say("Built-in APNs emulator: control API http://127.0.0.1:\(control)")
            }
            // Until SIGTERM/SIGINT.
            let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
            for await _ in signals { break }
            finalLogger.info("shutting down")
        }
    }
}

/// Writes a line to standard output at once (unbuffered), so it shows in a pipe or a log file.
private func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

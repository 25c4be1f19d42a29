// SPDX-License-Identifier: Apache-2.0
public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A program left running while a test talks to it (a server), then stopped with a signal.
public final class BackgroundProcess: Sendable {
    private let process: Process
    private let box = Box()

    private final class Box: Sendable {
        let output = Mutex<Data>(Data())
        let exit = Mutex<Int32?>(nil)
    }

    /// Starts `executable` (a path) with `arguments`; standard output and error are collected together.
    public init(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        self.process = process
        let box = self.box
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil  // EOF: stop polling
                return
            }
            box.output.withLock { $0.append(data) }
        }
        process.terminationHandler = { finished in box.exit.withLock { $0 = finished.terminationStatus } }
        try ProcessLaunch.run(process)
    }

    deinit {
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
    }

    /// What it printed so far.
    public var printed: String { String(decoding: self.box.output.withLock { $0 }, as: UTF8.self) }

    /// Waits (bounded) until it printed `text`; false if it did not within `timeout` seconds.
    public func waitFor(_ text: String, timeout: TimeInterval = 30) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if self.printed.contains(text) { return true }
            if self.box.exit.withLock({ $0 }) != nil { return self.printed.contains(text) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Sends `signal` and waits (bounded) for the exit status; kills it if it outlives `timeout`.
    public func stop(signal: Int32 = SIGTERM, timeout: TimeInterval = 15) async throws -> Int32? {
        kill(self.process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = self.box.exit.withLock({ $0 }) { return status }
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(self.process.processIdentifier, SIGKILL)
        return nil
    }

    /// The built `herald` executable beside the test bundle (`swift test` builds it).
    public static var heraldExecutable: String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // The test bundle may sit inside an .xctest directory.
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("herald").path), directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("herald").path
    }
}

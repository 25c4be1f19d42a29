// SPDX-License-Identifier: Apache-2.0
package import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A program left running while a test talks to it (a server), then stopped with a signal.
package final class BackgroundProcess: Sendable {
    private let child: ChildProcess

    /// Starts `executable` (a path) with `arguments`; standard output and error are collected
    /// together. With `keepInput`, its standard input stays open until ``closeInput()``: a program
    /// that reads it to the end waits for the test's signal without a timer of its own.
    package init(_ executable: String, _ arguments: [String], keepInput: Bool = false) throws {
        self.child = try ChildProcess(executable, arguments, mergeErrors: true, keepInput: keepInput)
    }

    /// Closes its standard input (kept open with `keepInput`): end of file for the program.
    package func closeInput() {
        self.child.writeInputAndClose([])
    }

    deinit {
        self.child.signal(SIGKILL)
    }

    /// What it printed so far.
    package var printed: String { String(decoding: self.child.output, as: UTF8.self) }

    /// Waits (bounded: `timeout` seconds is a hang guard) until it exits by itself; its status, nil if it did not.
    package func exit(timeout: TimeInterval) async throws -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = self.child.status { return status }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Waits until it printed a whole line starting with `prefix` (`timeout` seconds is a hang
    /// guard: the wait ends at the line); what follows the prefix, nil if no such line came.
    package func line(startingWith prefix: String, timeout: TimeInterval = 300) async throws -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            // The last piece has no newline yet: a line still being written.
            let lines = self.printed.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            if let line = lines.first(where: { $0.hasPrefix(prefix) }) { return String(line.dropFirst(prefix.count)) }
            if self.child.status != nil { return nil }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Waits (bounded) until it printed `text`; false if it did not within `timeout` seconds.
    package func waitFor(_ text: String, timeout: TimeInterval = 30) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if self.printed.contains(text) { return true }
            if self.child.status != nil { return self.printed.contains(text) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Sends `signal` without waiting.
    package func signal(_ signal: Int32) {
        self.child.signal(signal)
    }

    /// Sends `signal` and waits (bounded) for the exit status; kills it if it outlives `timeout`.
    package func stop(signal: Int32 = SIGTERM, timeout: TimeInterval = 15) async throws -> Int32? {
        self.child.signal(signal)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = self.child.status { return status }
            try await Task.sleep(for: .milliseconds(50))
        }
        self.child.signal(SIGKILL)
        return nil
    }

    /// The built `herald` executable beside the test bundle (`swift test` builds it).
    package static var heraldExecutable: String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // The test bundle may sit inside an .xctest directory.
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("herald").path), directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("herald").path
    }
}

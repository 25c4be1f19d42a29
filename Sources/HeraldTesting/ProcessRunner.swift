// SPDX-License-Identifier: Apache-2.0
public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs an external program (curl, nghttp, h2load, openssl) and collects what it printed.
/// Tests use these clients on purpose: they are not Herald's code, so they cannot share its bugs.
public struct ProcessResult: Sendable {
    public var exitCode: Int32
    public var standardOutput: String
    public var standardError: String
}

public enum ProcessRunner {
    /// Runs `executable` (looked up on PATH) with `arguments`, feeding `input` to standard input.
    /// After `timeout` seconds the process is killed. Waiting happens off Swift's cooperative
    /// pool, so many tests can run programs at once without starving each other.
    public static func run(
        _ executable: String,
        _ arguments: [String],
        input: Data? = nil,
        timeout: TimeInterval = 30
    ) async throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        let output = Pipe()
        let error = Pipe()
        let inputPipe = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = inputPipe
        let collector = OutputCollector()
        let group = DispatchGroup()
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { finished in
                // Both pipes are read to their end before the result is handed back.
                group.notify(queue: .global()) { continuation.resume(returning: finished.terminationStatus) }
            }
            // Enter before the child can possibly exit, so the notify above waits for both readers.
            group.enter()
            group.enter()
            do {
                try ProcessLaunch.run(process)
            } catch {
                group.leave()
                group.leave()
                continuation.resume(throwing: error)
                return
            }
            for (pipe, isError) in [(output, false), (error, true)] {
                DispatchQueue.global().async {
                    collector.set(pipe.fileHandleForReading.readDataToEndOfFile(), isError: isError)
                    group.leave()
                }
            }
            if let input { inputPipe.fileHandleForWriting.write(input) }
            try? inputPipe.fileHandleForWriting.close()
            let pid = process.processIdentifier
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                if process.isRunning { kill(pid, SIGKILL) }
            }
        }
        return ProcessResult(
            exitCode: status,
            standardOutput: String(decoding: collector.output, as: UTF8.self),
            standardError: String(decoding: collector.error, as: UTF8.self)
        )
    }
}

private final class OutputCollector: Sendable {
    private let state = Mutex<(output: Data, error: Data)>((Data(), Data()))

    func set(_ data: Data, isError: Bool) {
        self.state.withLock { if isError { $0.error = data } else { $0.output = data } }
    }

    var output: Data { self.state.withLock { $0.output } }
    var error: Data { self.state.withLock { $0.error } }
}

/// A directory under the system's temporary folder, removed by ``remove()``.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(prefix: String = "herald-test") throws {
        self.path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    /// Writes `contents` to `name` inside the directory and returns the file's path.
    @discardableResult
    public func write(_ name: String, _ contents: String) throws -> String {
        let file = self.path + "/" + name
        try contents.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

/// Launches processes one at a time. swift-corelibs-foundation's `Process.run()` was seen to
/// crash (a bad read inside it) when many tests launched processes at once; launching is quick,
/// so serializing it costs nothing measurable, while the processes themselves still run in parallel.
enum ProcessLaunch {
    private static let lock = Mutex<Void>(())

    static func run(_ process: Process) throws {
        try self.lock.withLock { _ in try process.run() }
    }
}

// SPDX-License-Identifier: Apache-2.0
public import Foundation
import Synchronization

/// Runs an external program (curl, nghttp, h2load, openssl) and collects what it printed.
/// Tests use these clients on purpose: they are not Herald's code, so they cannot share its bugs.
public struct ProcessResult: Sendable {
    public var exitCode: Int32
    public var standardOutput: String
    public var standardError: String
}

public enum ProcessRunner {
    /// Runs `executable` (looked up on PATH) with `arguments`, feeding `input` to standard input.
    /// Gives up after `timeout` seconds (the process is terminated).
    public static func run(
        _ executable: String,
        _ arguments: [String],
        input: Data? = nil,
        timeout: TimeInterval = 30
    ) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        let output = Pipe()
        let error = Pipe()
        let inputPipe = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = inputPipe
        try process.run()
        if let input { inputPipe.fileHandleForWriting.write(input) }
        try inputPipe.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(timeout)
        // Read both pipes while waiting so a chatty child cannot block on a full pipe.
        let collector = OutputCollector()
        let group = DispatchGroup()
        for (pipe, isError) in [(output, false), (error, true)] {
            group.enter()
            DispatchQueue.global().async {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                collector.set(data, isError: isError)
                group.leave()
            }
        }
        while process.isRunning, Date() < deadline { usleep(2000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        group.wait()
        return ProcessResult(
            exitCode: process.terminationStatus,
            standardOutput: String(decoding: collector.output, as: UTF8.self),
            standardError: String(decoding: collector.error, as: UTF8.self)
        )
    }

    /// Whether `executable` is on PATH.
    public static func isAvailable(_ executable: String) -> Bool {
        (try? run("which", [executable]).exitCode) == 0
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

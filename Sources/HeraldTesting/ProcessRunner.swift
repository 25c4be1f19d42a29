// SPDX-License-Identifier: Apache-2.0
package import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs an external program (curl, nghttp, h2load, openssl) and collects what it printed.
/// Tests use these clients on purpose: they are not Herald's code, so they cannot share its bugs.
package struct ProcessResult: Sendable {
    package var exitCode: Int32
    package var standardOutput: String
    package var standardError: String
}

package enum ProcessRunner {
    /// At most this many programs run at once: a few dozen TLS clients starting together on two
    /// cores starved the servers under test for seconds, and tests with deadlines failed.
    static let slots = AsyncSlots(4)

    /// Runs `executable` (looked up on PATH) with `arguments`, feeding `input` to standard input.
    /// After `timeout` seconds the process is killed. Waiting happens off Swift's cooperative
    /// pool (see ``ChildProcess``), so many tests can run programs at once without starving each other.
    package static func run(
        _ executable: String,
        _ arguments: [String],
        input: Data? = nil,
        timeout: TimeInterval = 30
    ) async throws -> ProcessResult {
        let asked = ContinuousClock.now
        await Self.slots.acquire()
        defer { Self.slots.release() }
        // Said, not failed: a long wait here is what a test that then times out was doing.
        let waited = ContinuousClock.now - asked
        if waited > .seconds(30) {
            FileHandle.standardError.write(Data("ProcessRunner: \(executable) waited \(waited) for one of \(Self.slots.count) slots\n".utf8))
        }
        let child = try ChildProcess(executable, arguments, keepInput: true)
        child.writeInputAndClose(input.map { Array($0) } ?? [])
        let status = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await child.wait() }
            group.addTask {
                // The watchdog: a program that outlives `timeout` is killed.
                try? await Task.sleep(for: .seconds(timeout))
                return nil
            }
            for await result in group {
                if let status = result {
                    group.cancelAll()
                    return status
                }
                child.signal(SIGKILL)
            }
            return -1
        }
        return ProcessResult(
            exitCode: status,
            standardOutput: String(decoding: child.output, as: UTF8.self),
            standardError: String(decoding: child.error, as: UTF8.self)
        )
    }
}

/// A directory under the system's temporary folder, removed by ``remove()``.
package struct TemporaryDirectory: Sendable {
    package let path: String

    package init(prefix: String = "herald-test") throws {
        self.path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    /// Writes `contents` to `name` inside the directory and returns the file's path.
    @discardableResult
    package func write(_ name: String, _ contents: String) throws -> String {
        let file = self.path + "/" + name
        try contents.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    package func remove() {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

/// A counting semaphore for async code: `acquire` suspends (never blocks a thread) while all
/// slots are taken.
final class AsyncSlots: Sendable {
    let count: Int
    private let state: Mutex<(free: Int, waiters: [CheckedContinuation<Void, Never>])>

    init(_ count: Int) {
        self.count = count
        self.state = Mutex((count, []))
    }

    func acquire() async {
        await withCheckedContinuation { continuation in
            let granted = self.state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A program started with `posix_spawnp`, its standard streams on pipes.
///
/// Not Foundation's `Process`: swift-corelibs-foundation's `Process.run()` crashed inside
/// (a bad read in a `memmove`) in CI runs where many tests start programs at once, even when
/// launches were serialized. Here every pipe is created close-on-exec, so concurrent spawns
/// never leak each other's pipe ends, and blocking reads and `waitpid` run on threads of their
/// own, off Swift's cooperative pool (on Linux, Dispatch's global queues share its threads).
final class ChildProcess: Sendable {
    let pid: pid_t
    private let state = Mutex<(output: [UInt8], error: [UInt8], status: Int32?, readersLeft: Int, waiters: [CheckedContinuation<Int32, Never>])>(
        ([], [], nil, 0, [])
    )
    private let input: Int32?
    private let inputOpen = Mutex(true)
    private static let spawnLock = NSLock()
    private static let ignoreBrokenPipes: Void = { _ = Glibc.signal(SIGPIPE, SIG_IGN) }()

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does not export.
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    private static func closeFrom3(_ actions: inout posix_spawn_file_actions_t) {
        if let closeFrom = Self.closeFrom, closeFrom(&actions, 3) == 0 { return }
        // Older glibc: close what is open now, one by one.
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
        for fd in open where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
    }

    /// Starts `executable` (a path, or a name looked up on PATH). With `mergeErrors`, standard
    /// error goes to the same buffer as standard output. With `keepInput`, standard input is a
    /// pipe to write through `write(_:)`; otherwise it is /dev/null.
    init(_ executable: String, _ arguments: [String], mergeErrors: Bool = false, keepInput: Bool = false) throws {
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            return (fds[0], fds[1])
        }
        // Pipes are made and the child spawned under one lock: between `pipe` and `fcntl` a
        // pipe is not yet close-on-exec, and no other spawn may inherit it then.
        Self.spawnLock.lock()
        defer { Self.spawnLock.unlock() }
        // A child that exits before reading its input must not end the tests with SIGPIPE.
        _ = Self.ignoreBrokenPipes
        let output = try makePipe()
        let error = mergeErrors ? nil : try makePipe()
        let input = keepInput ? try makePipe() : nil
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, output.write, 1)
        posix_spawn_file_actions_adddup2(&actions, error?.write ?? output.write, 2)
        // Nothing else is inherited: a child holding a copy of a test server's socket would keep
        // a connection open after the server closed it.
        Self.closeFrom3(&actions)
        let argv = ([executable] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let status = (argv + [nil]).withUnsafeBufferPointer { argvPointer in
            posix_spawnp(&pid, executable, &actions, nil, argvPointer.baseAddress!, environ)
        }
        close(output.write)
        if let error { close(error.write) }
        if let input { close(input.read) }
        guard status == 0 else {
            close(output.read)
            if let error { close(error.read) }
            if let input { close(input.write) }
            throw POSIXError(POSIXErrorCode(rawValue: status) ?? .ENOENT)
        }
        self.pid = pid
        self.input = input?.write
        self.state.withLock { $0.readersLeft = error == nil ? 1 : 2 }
        self.startReader(output.read, isError: false)
        if let error { self.startReader(error.read, isError: true) }
    }

    deinit {
        self.closeInput()
    }

    /// Closes standard input's pipe, once: a second `close` could close a descriptor number
    /// that another part of the process (a NIO socket) has been given since.
    private func closeInput() {
        guard let input = self.input,
            self.inputOpen.withLock({ open in
                defer { open = false }
                return open
            })
        else { return }
        close(input)
    }

    private func startReader(_ fd: Int32, isError: Bool) {
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                self.state.withLock { state in
                    if isError { state.error += buffer[0..<count] } else { state.output += buffer[0..<count] }
                }
            }
            close(fd)
            // The last reader to finish reaps the child, so the status is only known once
            // everything it printed has been read.
            let last = self.state.withLock { state -> Bool in
                state.readersLeft -= 1
                return state.readersLeft == 0
            }
            if last { self.reap() }
        }
        thread.stackSize = 256 << 10
        thread.start()
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(self.pid, &status, 0) < 0, errno == EINTR {}
        // Exit status, or the signal's number when a signal ended it (as Foundation reports).
        let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : status & 0x7F
        let waiters = self.state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            state.status = code
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: code) }
    }

    /// Writes `data` to standard input, then closes it.
    func writeInputAndClose(_ data: [UInt8]) {
        guard let input = self.input else { return }
        defer { self.closeInput() }
        var offset = 0
        while offset < data.count {
            let written = data[offset...].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
    }

    /// The exit status once it has exited and its output is read; nil while it runs.
    var status: Int32? { self.state.withLock { $0.status } }

    var output: [UInt8] { self.state.withLock { $0.output } }
    var error: [UInt8] { self.state.withLock { $0.error } }

    /// Waits for the exit (and the end of its output).
    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let done = self.state.withLock { state -> Int32? in
                if let status = state.status { return status }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    func signal(_ signal: Int32) {
        if self.status == nil { kill(self.pid, signal) }
    }
}

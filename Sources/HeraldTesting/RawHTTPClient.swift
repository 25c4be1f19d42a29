// SPDX-License-Identifier: Apache-2.0
package import APNSModels
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What came back over HTTP/1.1.
package struct RawResponse: Sendable {
    package var status: Int
    /// Lowercased names.
    package var headers: [String: String]
    package var body: String

    package var json: JSONValue? { try? JSONValue.parse(self.body) }
}

package enum RawHTTPError: Error, Equatable {
    case connect(Int32)
    /// The server closed the connection without writing a byte.
    case closedWithoutResponse
    case malformed
}

/// A blocking HTTP/1.1 client over a plain socket (the emulators' tests share it), run on a thread of its own (off Swift's
/// cooperative pool): not Herald's code and not NIO, so it cannot share their bugs, and it shows
/// exactly what the server wrote, including nothing at all.
package enum RawHTTPClient {
    package static func send(
        port: Int, method: String, path: String, headers: [(String, String)] = [], body: [UInt8] = []
    ) async throws -> RawResponse {
        var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "Content-Length: \(body.count)\r\n\r\n"
        let bytes = Array(request.utf8) + body
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try Self.exchange(port: port, bytes) })
            }
            thread.start()
        }
    }

    package static func json(
        port: Int, _ method: String, _ path: String, _ json: String? = nil, headers: [(String, String)] = []
    ) async throws
        -> RawResponse
    {
        let extra = json == nil ? headers : headers + [("Content-Type", "application/json")]
        return try await Self.send(port: port, method: method, path: path, headers: extra, body: Array((json ?? "").utf8))
    }

    package static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawHTTPError.connect(errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw RawHTTPError.connect(code)
        }
        return fd
    }

    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    private static func exchange(port: Int, _ bytes: [UInt8]) throws -> RawResponse {
        let fd = try Self.connect(port: port)
        defer { close(fd) }
        Self.writeAll(fd, bytes)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        guard !received.isEmpty else { throw RawHTTPError.closedWithoutResponse }
        guard let (status, headers, rest) = Self.head(received) else { throw RawHTTPError.malformed }
        let body = headers["transfer-encoding"]?.lowercased() == "chunked" ? Self.dechunk(rest).payload : rest
        return RawResponse(status: status, headers: headers, body: String(decoding: body, as: UTF8.self))
    }

    /// The status line and headers, and the bytes after them; `nil` until the head is complete.
    package static func head(_ bytes: [UInt8]) -> (Int, [String: String], [UInt8])? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = bytes.firstRange(of: separator) else { return nil }
        let lines = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1."),
            let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers, Array(bytes[end.upperBound...]))
    }

    /// Decodes as much chunked encoding as `bytes` holds: the payload and the bytes left over.
    package static func dechunk(_ bytes: [UInt8]) -> (payload: [UInt8], rest: [UInt8], finished: Bool) {
        var payload: [UInt8] = []
        var index = 0
        while let lineEnd = bytes[index...].firstRange(of: [13, 10]) {
            let sizeText = String(decoding: bytes[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { break }
            if size == 0 { return (payload, [], true) }
            let start = lineEnd.upperBound
            guard bytes.count >= start + size + 2 else { break }
            payload += bytes[start..<start + size]
            index = start + size + 2
        }
        return (payload, Array(bytes[index...]), false)
    }
}

/// A server-sent-events subscription read on a thread of its own.
package final class EventStreamClient: Sendable {
    package let events: AsyncStream<String>
    private let fd: Int32
    private let closed = Mutex(false)

    /// Opens `path` and returns once the server said it is subscribed (its first comment).
    package static func open(port: Int, path: String) async throws -> EventStreamClient {
        let fd = try RawHTTPClient.connect(port: port)
        RawHTTPClient.writeAll(fd, Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n".utf8))
        let (events, continuation) = AsyncStream.makeStream(of: String.self)
        let client = EventStreamClient(fd: fd, events: events)
        var iterator = events.makeAsyncIterator()
        Thread { client.read(into: continuation) }.start()
        guard await iterator.next() == ":subscribed" else {
            client.close()
            throw RawHTTPError.malformed
        }
        return client
    }

    private init(fd: Int32, events: AsyncStream<String>) {
        self.fd = fd
        self.events = events
    }

    /// The data of the next `message` event; `nil` when the stream ended.
    package func next() async -> String? {
        var iterator = self.events.makeAsyncIterator()
        return await iterator.next()
    }

    /// Hangs up (the reading thread then ends the events and closes the socket).
    package func close() {
        self.closed.withLock { closed in
            if !closed { shutdown(self.fd, Int32(SHUT_RDWR)) }
        }
    }

    private func read(into continuation: AsyncStream<String>.Continuation) {
        defer {
            continuation.finish()
            self.closed.withLock { closed in
                closed = true
                Glibc.close(self.fd)
            }
        }
        var received: [UInt8] = []
        var headDone = false
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            received += buffer[0..<count]
            if !headDone {
                guard let (status, _, rest) = RawHTTPClient.head(received), status == 200 else { continue }
                headDone = true
                received = rest
            }
            let (payload, rest, finished) = RawHTTPClient.dechunk(received)
            received = rest
            text += String(decoding: payload, as: UTF8.self)
            while let end = text.range(of: "\n\n") {
                let block = text[..<end.lowerBound]
                text.removeSubrange(..<end.upperBound)
                if block.hasPrefix(": subscribed") {
                    continuation.yield(":subscribed")
                } else if block.contains("event: message") {
                    for line in block.split(separator: "\n") where line.hasPrefix("data: ") {
                        continuation.yield(String(line.dropFirst(6)))
                    }
                }
            }
            if finished { return }
        }
    }
}

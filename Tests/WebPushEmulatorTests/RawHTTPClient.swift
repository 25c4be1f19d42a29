// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldTesting

#if canImport(Glibc)
import Glibc
#endif

/// What the push services' answers carry, read from a raw response.
extension RawResponse {
    /// Apple's `{"reason": …}`.
    var reason: String? { self.json?["reason"]?.stringValue }
    /// Mozilla's `{"errno": …}`.
    var mozillaErrno: Int? { self.json?["errno"]?.intValue.map { Int($0) } }
}

extension RawHTTPClient {
    /// Sends a WebSocket upgrade for `/` and returns the response head (status, headers); the
    /// socket is closed right after.
    static func upgradeHead(port: Int, protocols: String?) async throws -> (Int, [String: String]) {
        var request = "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let protocols { request += "Sec-WebSocket-Protocol: \(protocols)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        return try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Result {
                        let fd = try Self.connect(port: port)
                        defer { close(fd) }
                        Self.writeAll(fd, bytes)
                        var received: [UInt8] = []
                        var buffer = [UInt8](repeating: 0, count: 4096)
                        while Self.head(received) == nil {
                            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                            if count < 0, errno == EINTR { continue }
                            guard count > 0 else { throw RawHTTPError.closedWithoutResponse }
                            received += buffer[0..<count]
                        }
                        guard let (status, headers, _) = Self.head(received) else { throw RawHTTPError.malformed }
                        return (status, headers)
                    }
                )
            }.start()
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A frame as a raw HTTP/2 peer saw it.
package struct RawFrame: Sendable, Hashable {
    package var type: UInt8
    package var flags: UInt8
    package var streamID: UInt32
    package var payload: [UInt8]

    package static let settingsType: UInt8 = 0x4
    package static let goAwayType: UInt8 = 0x7
    package static let rstStreamType: UInt8 = 0x3
    package static let pingType: UInt8 = 0x6
    package static let headersType: UInt8 = 0x1

    /// For GOAWAY: the error code and the debug data as text.
    package var goAway: (lastStreamID: UInt32, errorCode: UInt32, debug: String)? {
        guard self.type == Self.goAwayType, self.payload.count >= 8 else { return nil }
        let last = self.payload[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
        let code = self.payload[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return (last, code, String(decoding: self.payload[8...], as: UTF8.self))
    }
}

/// A deliberately dumb HTTP/2 peer (a Python script over a plain or TLS socket) for what no
/// ordinary client does: stay idle, send garbage, or watch every frame the server sends.
package enum RawHTTP2 {
    static let script = #"""
        import socket, ssl, sys, time, binascii, json
        host, port, use_tls, ca, send_hex, read_seconds, alpn = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5], float(sys.argv[6]), sys.argv[7] == "1"
        stop_type, stop_stream = int(sys.argv[8]), int(sys.argv[9])
        def seen_stop_frame(data):
            i = 0
            while i + 9 <= len(data):
                length = int.from_bytes(data[i:i+3], "big")
                if i + 9 + length > len(data): return False
                if data[i+3] == stop_type and (int.from_bytes(data[i+5:i+9], "big") & 0x7fffffff) == stop_stream: return True
                i += 9 + length
            return False
        sock = socket.create_connection((host, port), timeout=5)
        if use_tls:
            context = ssl.create_default_context(cafile=ca)
            if alpn: context.set_alpn_protocols(["h2"])
            sock = context.wrap_socket(sock, server_hostname="localhost")
        sock.sendall(binascii.unhexlify(send_hex))
        deadline = time.time() + read_seconds
        data = b""
        closed = False
        while time.time() < deadline:
            sock.settimeout(max(0.05, deadline - time.time()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except (ConnectionResetError, ssl.SSLError, OSError):
                closed = True
                break
            if not chunk:
                closed = True
                break
            data += chunk
            if stop_type >= 0 and seen_stop_frame(data):
                break
        frames = []
        i = 0
        while i + 9 <= len(data):
            length = int.from_bytes(data[i:i+3], "big")
            if i + 9 + length > len(data): break
            frames.append({"type": data[i+3], "flags": data[i+4], "stream": int.from_bytes(data[i+5:i+9], "big") & 0x7fffffff, "payload": data[i+9:i+9+length].hex()})
            i += 9 + length
        print(json.dumps({"closed": closed, "frames": frames}))
        """#

    /// The client preface and an empty SETTINGS frame.
    package static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]

    /// Connects, sends `bytes`, and collects the server's frames for up to `seconds`, until it
    /// closes, or until a frame of `stopFrame`'s type on its stream has arrived.
    package static func exchange(
        port: Int,
        tls: Bool,
        caFile: String = "",
        send bytes: [UInt8],
        readFor seconds: Double,
        offerALPN: Bool = true,
        until stopFrame: (type: UInt8, streamID: UInt32)? = nil
    ) async throws -> (closed: Bool, frames: [RawFrame]) {
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let result = try await ProcessRunner.run(
            "python3",
            [
                "-c", Self.script, "127.0.0.1", String(port), tls ? "1" : "0", caFile, hex, String(seconds), offerALPN ? "1" : "0",
                stopFrame.map { String($0.type) } ?? "-1", stopFrame.map { String($0.streamID) } ?? "0",
            ],
            timeout: seconds + 15
        )
        guard let data = result.standardOutput.data(using: .utf8),
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let frames = object["frames"] as? [[String: Any]]
        else {
            throw CurlError(exitCode: result.exitCode, message: result.standardError)
        }
        return (
            object["closed"] as? Bool ?? false,
            frames.map { frame in
                let hexPayload = frame["payload"] as? String ?? ""
                var payload: [UInt8] = []
                var index = hexPayload.startIndex
                while index < hexPayload.endIndex {
                    let next = hexPayload.index(index, offsetBy: 2)
                    payload.append(UInt8(hexPayload[index..<next], radix: 16) ?? 0)
                    index = next
                }
                return RawFrame(
                    type: UInt8(frame["type"] as? Int ?? 0), flags: UInt8(frame["flags"] as? Int ?? 0),
                    streamID: UInt32(frame["stream"] as? Int ?? 0), payload: payload
                )
            }
        )
    }
}

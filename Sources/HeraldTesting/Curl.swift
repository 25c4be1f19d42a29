// SPDX-License-Identifier: Apache-2.0
package import Foundation

/// One HTTP/2 request for curl to send.
package struct CurlRequest: Sendable {
    package var method: String
    package var path: String
    package var headers: [(String, String)]
    package var body: [UInt8]?

    package init(method: String = "POST", path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    package init(method: String = "POST", path: String, headers: [(String, String)] = [], json: String) {
        self.init(method: method, path: path, headers: headers, body: Array(json.utf8))
    }
}

/// What curl saw come back.
package struct CurlResponse: Sendable {
    package var status: Int
    /// Lowercased names; the last value wins.
    package var headers: [String: String]
    package var body: String
    /// Whether curl opened a new connection for this request (0 means it reused one).
    package var newConnections: Int
    package var httpVersion: String

    /// The `reason` of an APNs error body.
    package var reason: String? {
        guard let data = self.body.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["reason"] as? String
    }

    package var json: [String: Any]? {
        guard let data = self.body.data(using: .utf8) else { return nil }
        return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    }
}

/// curl (built with nghttp2) as an independent HTTP/2 client of the emulator.
package struct Curl: Sendable {
    package let baseURL: String
    /// `--cacert` for TLS; `nil` for cleartext prior-knowledge HTTP/2.
    package let caFile: String?
    package var clientCertificate: (certificate: String, key: String)?
    package var directory: TemporaryDirectory

    package init(baseURL: String, caFile: String?, directory: TemporaryDirectory, clientCertificate: (certificate: String, key: String)? = nil) {
        self.baseURL = baseURL
        self.caFile = caFile
        self.directory = directory
        self.clientCertificate = clientCertificate
    }

    /// Sends one request on a new connection.
    package func send(_ request: CurlRequest) async throws -> CurlResponse {
        try await self.send([request])[0]
    }

    /// Sends the requests one after another; curl keeps them on one HTTP/2 connection.
    package func send(_ requests: [CurlRequest], timeout: TimeInterval = 30) async throws -> [CurlResponse] {
        var arguments: [String] = []
        let stamp = UUID().uuidString
        var files: [(headers: String, body: String)] = []
        for (index, request) in requests.enumerated() {
            if index > 0 { arguments.append("--next") }
            let headerFile = "\(self.directory.path)/\(stamp)-\(index).headers"
            let bodyFile = "\(self.directory.path)/\(stamp)-\(index).body"
            files.append((headerFile, bodyFile))
            arguments += ["-s", "-S", "--max-time", String(Int(timeout)), "-X", request.method, "-D", headerFile, "-o", bodyFile]
            arguments += ["-w", "%{num_connects} %{http_version}\\n", "-H", "user-agent:", "-H", "accept:"]
            if let caFile = self.caFile {
                arguments += ["--http2", "--cacert", caFile]
            } else {
                arguments += ["--http2-prior-knowledge"]
            }
            if let client = self.clientCertificate {
                arguments += ["--cert", client.certificate, "--key", client.key]
            }
            for (name, value) in request.headers {
                arguments += ["-H", value.isEmpty ? "\(name);" : "\(name): \(value)"]
            }
            if let body = request.body {
                let payloadFile = "\(self.directory.path)/\(stamp)-\(index).payload"
                _ = FileManager.default.createFile(atPath: payloadFile, contents: Data(body))
                arguments += ["--data-binary", "@" + payloadFile, "-H", "content-type: application/json"]
            }
            arguments.append(self.baseURL + request.path)
        }
        let result = try await ProcessRunner.run("curl", arguments, timeout: timeout + 5)
        let stats = result.standardOutput.split(separator: "\n")
        var responses: [CurlResponse] = []
        for (index, file) in files.enumerated() {
            let rawHeaders = (try? String(contentsOfFile: file.headers, encoding: .utf8)) ?? ""
            let body = (try? String(contentsOfFile: file.body, encoding: .utf8)) ?? ""
            var status = 0
            var headers: [String: String] = [:]
            for line in rawHeaders.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }) {
                if line.hasPrefix("HTTP/") {
                    status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
                } else if let colon = line.firstIndex(of: ":") {
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
            let stat = index < stats.count ? stats[index].split(separator: " ") : []
            responses.append(
                CurlResponse(
                    status: status, headers: headers, body: body,
                    newConnections: stat.first.flatMap { Int($0) } ?? -1,
                    httpVersion: stat.count > 1 ? String(stat[1]) : ""
                )
            )
        }
        if responses.allSatisfy({ $0.status == 0 }), result.exitCode != 0 {
            throw CurlError(exitCode: result.exitCode, message: result.standardError)
        }
        return responses
    }
}

/// curl failed before any response arrived (connection refused, reset, TLS failure…).
package struct CurlError: Error, CustomStringConvertible {
    package var exitCode: Int32
    package var message: String
    package var description: String { "curl exited \(self.exitCode): \(self.message)" }
}

// SPDX-License-Identifier: Apache-2.0
package import APNSEmulator
package import APNSModels
import Foundation
import Synchronization

/// A running emulator with what a test needs around it: a trusted signing key, the CA file on
/// disk, curl clients for both environments and for the control API, and a clock to move.
package struct EmulatorFixture: Sendable {
    package let emulator: APNSEmulator
    package let directory: TemporaryDirectory
    package let caFile: String
    package let key: SigningKey
    let tokens = TokenCache()
    package static let bundleID = "com.example.app"
    package static let teamID = "TEAM123456"
    package static let keyID = "KEY1234567"

    package var clock: EmulatorClock { self.emulator.clock }

    /// Every token kind with a push type it takes, its topic and a body that fits: one row per
    /// end-to-end delivery test case.
    package static let pushKinds: [(kind: String, pushType: String, topic: String, body: String)] = [
        ("device", "alert", "com.example.app", #"{"aps":{"alert":{"title":"T","body":"B"}}}"#),
        ("device", "background", "com.example.app", #"{"aps":{"content-available":1}}"#),
        ("voip", "voip", "com.example.app.voip", #"{"callUUID":"1","handle":"bob"}"#),
        ("complication", "complication", "com.example.app.complication", #"{"aps":{"content-available":1}}"#),
        ("fileprovider", "fileprovider", "com.example.app.pushkit.fileprovider", #"{"container-identifier":"x"}"#),
        ("location", "location", "com.example.app.location-query", #"{"aps":{}}"#),
        ("pushtotalk", "pushtotalk", "com.example.app.voip-ptt", #"{"activeSpeaker":"Ann"}"#),
        (
            "liveactivity", "liveactivity", "com.example.app.push-type.liveactivity",
            #"{"aps":{"timestamp":1,"event":"update","content-state":{"score":1}}}"#
        ),
        (
            "push-to-start", "liveactivity", "com.example.app.push-type.liveactivity",
            #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"alert":{"title":"x"}}}"#
        ),
        ("widgets", "widgets", "com.example.app.push-type.widgets", #"{"aps":{"content-changed":true}}"#),
        ("controls", "controls", "com.example.app.push-type.controls", #"{"aps":{"content-changed":true}}"#),
    ]

    /// curl against the development (sandbox) TLS port.
    package var development: Curl {
        Curl(baseURL: "https://localhost:\(self.emulator.ports[.development]!)", caFile: self.caFile, directory: self.directory)
    }

    /// curl against the production TLS port.
    package var production: Curl {
        Curl(baseURL: "https://localhost:\(self.emulator.ports[.production]!)", caFile: self.caFile, directory: self.directory)
    }

    /// A provider token from the fixture's key, issued now by the emulator's clock unless told
    /// otherwise. Like a real client, the fixture signs once per key and `iat` and reuses the
    /// token (ECDSA signatures differ every time, and APNs limits token changes per connection).
    package func bearer(_ key: SigningKey? = nil, issuedAt: Int64? = nil) throws -> String {
        let key = key ?? self.key
        let issuedAt = issuedAt ?? self.clock.nowSeconds
        let cacheKey = "\(key.keyID)/\(key.publicKeyPEM.hashValue)/\(issuedAt)"
        if let token = self.tokens.withLock({ $0[cacheKey] }) { return token }
        let token = "bearer " + (try key.providerToken(issuedAt: issuedAt))
        self.tokens.withLock { $0[cacheKey] = token }
        return token
    }

    /// Headers of a valid alert push for `topic`.
    package func alertHeaders(topic: String = EmulatorFixture.bundleID, pushType: String = "alert") throws -> [(String, String)] {
        [("authorization", try self.bearer()), ("apns-topic", topic), ("apns-push-type", pushType)]
    }

    /// A control-API request through curl (HTTP/1.1).
    @discardableResult
    package func control(_ method: String, _ path: String, json: String? = nil) async throws -> CurlResponse {
        var arguments = ["-s", "-S", "--max-time", "20", "-X", method, "-D", "-", "-H", "user-agent:"]
        if let json { arguments += ["--data-binary", json, "-H", "content-type: application/json"] }
        arguments.append("http://127.0.0.1:\(self.emulator.controlPort!)\(path)")
        let result = try await ProcessRunner.run("curl", arguments)
        let text = result.standardOutput
        guard let split = text.range(of: "\r\n\r\n") else {
            throw CurlError(exitCode: result.exitCode, message: result.standardError)
        }
        let head = text[..<split.lowerBound]
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        return CurlResponse(status: status, headers: [:], body: String(text[split.upperBound...]), newConnections: 1, httpVersion: "1.1")
    }

    /// Creates a virtual device through the control API and returns its token.
    package func createDevice(
        bundleID: String = EmulatorFixture.bundleID,
        environment: String = "development",
        kind: String = "device",
        online: Bool = true
    ) async throws -> String {
        let response = try await self.control(
            "POST", "/v1/devices",
            json: #"{"bundleId":"\#(bundleID)","environment":"\#(environment)","kind":"\#(kind)","online":\#(online)}"#
        )
        guard response.status == 201, let token = response.json?["token"] as? String else {
            throw CurlError(exitCode: 0, message: "device creation answered \(response.status): \(response.body)")
        }
        return token
    }

    /// The device's inbox as parsed JSON objects.
    package func inbox(_ token: String) async throws -> [[String: Any]] {
        (try await self.control("GET", "/v1/devices/\(token)/inbox").json?["notifications"] as? [[String: Any]]) ?? []
    }

    /// The emulator's counters as parsed JSON.
    package func counters() async throws -> [String: Any] {
        try await self.control("GET", "/v1/counters").json ?? [:]
    }

    /// One numeric counter (0 when absent).
    package func counter(_ name: String) async throws -> Int {
        (try await self.counters())[name] as? Int ?? 0
    }
}

/// Signed provider tokens by key and issue time.
final class TokenCache: Sendable {
    private let tokens = Mutex<[String: String]>([:])

    func withLock<Result>(_ body: (inout [String: String]) -> Result) -> Result {
        self.tokens.withLock { body(&$0) }
    }
}

/// Starts an emulator on free ports with a CA in a temporary directory and one trusted key,
/// runs `body`, then stops it and removes the directory.
package func withEmulatorFixture<Result>(
    clock: EmulatorClock? = nil,
    configure: (inout APNSEmulator.Configuration) -> Void = { _ in },
    _ body: (EmulatorFixture) async throws -> Result
) async throws -> Result {
    let directory = try TemporaryDirectory(prefix: "herald-emulator")
    defer { directory.remove() }
    var configuration = APNSEmulator.Configuration.testing()
    configuration.dataDirectory = directory.path + "/data"
    configure(&configuration)
    // A clock that stands still unless a test moves it: token ages and expiries stay exact.
    let clock = clock ?? EmulatorClock(fixedAt: Int64(Date().timeIntervalSince1970))
    return try await withAPNSEmulator(configuration: configuration, clock: clock) { emulator in
        let key = SigningKey.generate(keyID: EmulatorFixture.keyID, teamID: EmulatorFixture.teamID)
        emulator.register(key: key)
        let caFile = try directory.write("ca.pem", emulator.certificateAuthorityPEM)
        return try await body(EmulatorFixture(emulator: emulator, directory: directory, caFile: caFile, key: key))
    }
}

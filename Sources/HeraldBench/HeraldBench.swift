// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import ArgumentParser
import FCMClient
import Foundation
import Logging
import WebPush

#if canImport(Glibc)
import Glibc
#endif

/// Herald's APNs client as a peer of `../shared/bench/run-peers.sh`: pushes N copies of the
/// benchmark payload to one token through the bulk API with C in flight, after one untimed
/// warm-up push, and prints the harness's `RESULT` line. Paths default to the harness's own
/// layout (it runs peers from its directory).
@main
struct HeraldBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-bench",
        abstract: "Herald's client-side benchmarks; without a subcommand, `push`.",
        subcommands: [PushBench.self, WebPushEncryptBench.self],
        defaultSubcommand: PushBench.self
    )
}

struct PushBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Push N notifications through Herald's APNs client and print a RESULT line."
    )

    @Option(help: "Server port on --host.") var port: Int
    @Option(name: .customShort("n"), help: "Notifications to push (after the warm-up).") var count: Int
    @Option(name: .customShort("c"), help: "Most notifications in flight.") var concurrency: Int
    @Option(help: "Connections in the pool.") var connections = 1
    @Option(help: "Server host.") var host = "127.0.0.1"
    @Option(help: "CA or server certificate to trust (PEM).") var caFile = ".peers/certs/server.crt"
    @Option(help: "Signing key (.p8).") var keyFile = ".peers/certs/AuthKey_TEST123456.p8"
    @Option(help: "Key id.") var keyId = "TEST123456"
    @Option(help: "Team id.") var teamId = "TEAMID1234"
    @Option(help: "Topic.") var topic = "com.example.app"
    @Option(help: "apns-push-type (alert, liveactivity, …); the topic must suit it.") var pushType = "alert"
    @Option(help: "Device token (hex).") var token = String(repeating: "a", count: 64)
    @Option(help: "Payload file (JSON).") var payloadFile = "data/payload.json"
    @Option(help: "FCM instead of APNs: FCM's origin (an emulator's http://127.0.0.1:PORT); --port and TLS options are unused.")
    var fcmEndpoint: String?
    @Option(help: "With --fcm-endpoint: the service account's JSON (its token_uri is where tokens come from).") var serviceAccount: String?

    func run() async throws {
        guard self.count > 0, self.concurrency > 0, self.connections > 0 else {
            throw ValidationError("-n, -c and --connections must be positive")
        }
        if let endpoint = self.fcmEndpoint {
            try await self.runFCM(endpoint: endpoint)
            return
        }
        let key = try SigningKey(pem: try String(contentsOfFile: self.keyFile, encoding: .utf8), keyID: self.keyId, teamID: self.teamId)
        var configuration = APNSClientConfiguration(
            credential: .token(key),
            environment: .development,
            host: self.host,
            port: self.port,
            trustRoots: .pemFile(self.caFile)
        )
        configuration.connections = self.connections
        configuration.requestTimeout = .seconds(60)
        configuration.maximumQueuedRequests = max(self.concurrency, 1000)
        guard let pushType = PushType(rawValue: self.pushType) else { throw ValidationError("unknown --push-type \(self.pushType)") }
        let payload = Array(try Data(contentsOf: URL(fileURLWithPath: self.payloadFile)))
        let request = APNSRequest(
            deviceToken: try DeviceToken(hex: self.token),
            headers: NotificationHeaders(pushType: pushType, topic: self.topic, priority: .immediate),
            payload: payload
        )
        let total = self.count
        let concurrency = self.concurrency
        try await withAPNSClient(configuration: configuration) { client in
            try await client.send(request)  // warm-up: connects and ramps the stream limit
            var ok = 0
            var failed = 0
            var firstError: APNSClientError?
            let clock = ContinuousClock()
            let start = clock.now
            try await client.send(Repeated(request: request, count: total), maxInFlight: concurrency) { outcome in
                switch outcome.result {
                case .success: ok += 1
                case .failure(let error):
                    failed += 1
                    if firstError == nil { firstError = error }
                }
            }
            let elapsed = clock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if let firstError { FileHandle.standardError.write(Data("first failure: \(firstError)\n".utf8)) }
            print(
                "RESULT client=herald n=\(total) ok=\(ok) failed=\(failed) seconds=\(String(format: "%.3f", seconds)) "
                    + "rate=\(String(format: "%.0f", Double(ok) / seconds)) concurrency=\(concurrency)"
            )
        }
    }
}

/// `count` copies of one request, as an async sequence that never suspends.
struct Repeated: AsyncSequence, Sendable {
    let request: APNSRequest
    let count: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        let request: APNSRequest
        var remaining: Int

        mutating func next() async -> APNSRequest? {
            guard self.remaining > 0 else { return nil }
            self.remaining -= 1
            return self.request
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(request: self.request, remaining: self.count) }
}

extension PushBench {
    /// Herald's FCM client: N copies of one message (`--token` an FCM registration token) to the
    /// FCM endpoint, C in flight, after one untimed warm-up (which gets the access token).
    func runFCM(endpoint: String) async throws {
        guard let path = self.serviceAccount else { throw ValidationError("--fcm-endpoint needs --service-account") }
        let key = try FCMServiceAccountKey(json: Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        var configuration = FCMClient.Configuration()
        configuration.endpoint = endpoint
        configuration.concurrency = self.concurrency
        configuration.requestTimeout = .seconds(60)
        let client = FCMClient(key: key, configuration: configuration, logger: Logger(label: "herald-bench"))
        let body = Array(#"{"message":{"token":"\#(self.token)","notification":{"title":"Bench","body":"A push"},"data":{"n":"1"}}}"#.utf8)
        if case .failure(let error) = await client.send(body) {
            await client.shutdown()
            throw ValidationError("warm-up failed: \(error)")
        }
        var ok = 0
        var failed = 0
        var firstError: FCMError?
        let clock = ContinuousClock()
        let start = clock.now
        await client.send([[UInt8]](repeating: body, count: self.count)) { _, result in
            switch result {
            case .success: ok += 1
            case .failure(let error):
                failed += 1
                if firstError == nil { firstError = error }
            }
        }
        let elapsed = clock.now - start
        await client.shutdown()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        if let firstError { FileHandle.standardError.write(Data("first failure: \(firstError)\n".utf8)) }
        print(
            "RESULT client=herald-fcm n=\(self.count) ok=\(ok) failed=\(failed) seconds=\(String(format: "%.3f", seconds)) "
                + "rate=\(String(format: "%.0f", Double(ok) / seconds)) concurrency=\(self.concurrency)"
        )
    }
}

/// `herald-bench webpush-encrypt --count N`: Herald's RFC 8291 encryption alone, one core, N
/// messages of a typical ~300-octet payload, each for the next of `--subscriptions` distinct
/// subscriptions (made before the clock starts). One message is one P-256 key generation, one
/// ECDH, the HKDF chain and AES-128-GCM: what `Benchmarks/webpush-crypto-bench.sh` compares with
/// `openssl speed ecdhp256`.
struct WebPushEncryptBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush-encrypt",
        abstract: "Encrypt N Web Push messages (aes128gcm) and print a RESULT line with messages/s and CPU µs per message."
    )

    @Option(help: "Messages to encrypt (after 100 untimed).") var count = 20_000
    @Option(help: "Distinct subscriptions the messages go to, round robin.") var subscriptions = 1_000

    static let payload =
        Array(
            #"{"title":"Your order has shipped","body":"Order #48213 left our warehouse and should arrive Thursday. Tap to follow the parcel.","#
                .utf8
        )
        + Array(
            #""icon":"https://shop.example/icons/parcel-192.png","data":{"orderId":"48213","url":"https://shop.example/orders/48213/track","kind":"shipping"},"tag":"order-48213"}"#
                .utf8)

    func run() throws {
        guard self.count > 0, self.subscriptions > 0 else { throw ValidationError("--count and --subscriptions must be positive") }
        // Any P-256 public key serves as a browser's p256dh; a VAPID key is one.
        let keys = try (0..<self.subscriptions).map { _ in
            try WebPushSubscriptionKeys(
                p256dh: VAPIDKey().publicKey,
                auth: (0..<16).map { _ in UInt8.random(in: 0...255) }
            )
        }
        for i in 0..<100 { _ = try WebPushEncryption.encrypt(Self.payload, for: keys[i % keys.count]) }
        var octets = 0
        let cpuStart = Self.processCPUSeconds()
        let clock = ContinuousClock()
        let start = clock.now
        for i in 0..<self.count {
            octets &+= try WebPushEncryption.encrypt(Self.payload, for: keys[i % keys.count]).count
        }
        let elapsed = clock.now - start
        let cpu = Self.processCPUSeconds() - cpuStart
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "RESULT bench=webpush-encrypt n=\(self.count) payload=\(Self.payload.count) body=\(octets / self.count) "
                + "subscriptions=\(keys.count) seconds=\(String(format: "%.3f", seconds)) "
                + "rate=\(String(format: "%.0f", Double(self.count) / seconds)) "
                + "cpu_us_per_message=\(String(format: "%.2f", cpu * 1e6 / Double(self.count)))"
        )
    }

    /// CPU time of the whole process (user + system), in seconds.
    static func processCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore
import HeraldServer
import HeraldTesting
import Prometheus
import Synchronization
import Testing

/// The rate limits through the real API: 429 `rate_limited` with `Retry-After` after the burst,
/// accepted again once the bucket refills; the per-address limit on register-key traffic; and
/// two servers on one PostgreSQL database sharing one bucket.
extension ServerTests {
    /// The system's clock, which a test can stop (so that no token comes back during a burst,
    /// however slow the machine) and move on while stopped.
    final class PausableClock: EpochClock {
        /// Where the clock stands while stopped; nil while it follows the system's.
        private let stoppedAt = Mutex<Int64?>(nil)

        var nowMilliseconds: Int64 {
            self.stoppedAt.withLock { $0 ?? SystemEpochClock().nowMilliseconds }
        }

        func stop() {
            self.stoppedAt.withLock { $0 = SystemEpochClock().nowMilliseconds }
        }

        /// Moves a stopped clock on by `milliseconds`.
        func advance(by milliseconds: Int64) {
            self.stoppedAt.withLock { stoppedAt in stoppedAt = stoppedAt.map { $0 + milliseconds } }
        }
    }

    struct Answer {
        var status: Int
        var code: String?
        var retryAfter: Int?
    }

    /// A request with its status, error code and `Retry-After`.
    func limited(
        _ base: String, _ method: String, _ path: String, key: String, json: String? = nil, forwardedFor: String? = nil
    ) async throws -> Answer {
        var arguments = ["-s", "-S", "--max-time", "20", "-X", method, "-o", "-", "-w", "\n%{http_code} %header{retry-after}"]
        arguments += ["-H", "authorization: Bearer \(key)"]
        if let json { arguments += ["--data-binary", json, "-H", "content-type: application/json"] }
        if let forwardedFor { arguments += ["-H", "x-forwarded-for: \(forwardedFor)"] }
        arguments.append(base + path)
        let result = try await ProcessRunner.run("curl", arguments)
        let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        let last = (lines.last ?? "").split(separator: " ")
        let body = (try? JSONSerialization.jsonObject(with: Data(lines.dropLast().joined(separator: "\n").utf8))) as? [String: Any]
        return Answer(
            status: last.first.flatMap { Int($0) } ?? 0, code: (body?["error"] as? [String: Any])?["code"] as? String,
            retryAfter: last.count > 1 ? Int(last[1]) : nil)
    }

    static func register(_ n: Int) -> String { "/v1/apps/demo/devices/" + String(repeating: "0", count: 60) + String(format: "%04x", n) }
    static let sandbox = #"{"environment":"sandbox"}"#

    @Test("a key over its limit is answered 429 rate_limited with Retry-After, counted at /metrics, and accepted again once its bucket refills")
    func keyLimit() async throws {
        let clock = PausableClock()
        try await self.withServer(
            clock: clock,
            configure: { configuration in
                configuration.metrics = ServerDocumentTests.registry
                configuration.rateLimits.perKey[.send] = TokenBucket.Limit(capacity: 3, perSecond: 2)
                configuration.rateLimits.perAddress = [:]
            }
        ) { context in
            let keys = try await self.setUp(context)
            let base = context.api.base
            clock.stop()
            // A send key registering (its scope allows it): 3 at once, then refused.
            for n in 0..<3 { #expect(try await self.limited(base, "PUT", Self.register(n), key: keys.send, json: Self.sandbox).status == 200) }
            var refused = try await self.limited(base, "PUT", Self.register(9), key: keys.send, json: Self.sandbox)
            #expect(refused.status == 429 && refused.code == "rate_limited", "\(refused)")
            #expect(refused.retryAfter == 1, "half a second to the next token, in whole seconds: \(refused)")
            // Sending shares the key's bucket.
            refused = try await self.limited(base, "POST", "/v1/apps/demo/notifications", key: keys.send, json: #"{"audience":"all","body":"m"}"#)
            #expect(refused.status == 429 && refused.retryAfter.map { $0 >= 1 } == true, "\(refused)")
            // Other keys are not held back.
            #expect(try await self.limited(base, "PUT", Self.register(10), key: keys.register, json: Self.sandbox).status == 200)
            let metrics = try await ProcessRunner.run("curl", ["-s", context.metrics]).standardOutput
            let counted = metrics.split(separator: "\n").first {
                $0.hasPrefix("herald_rate_limited_total{") && $0.contains(#"operation="register""#) && $0.contains(#"scope="send""#)
                    && $0.contains(#"limit="key""#)
            }
            #expect(counted.map { !$0.hasSuffix(" 0") } == true, "\(counted ?? "no counter")")
            // Recovers once the time it named has passed: the stopped clock is moved on by the
            // Retry-After, so no real time has to pass however busy the machine is.
            clock.advance(by: Int64(refused.retryAfter ?? 1) * 1000)
            let accepted = try await self.limited(base, "PUT", Self.register(11), key: keys.send, json: Self.sandbox)
            #expect(accepted.status == 200, "accepted again once the bucket refilled: \(accepted)")
        }
    }

    @Test(
        "register-key traffic is limited per client address: another key from the same address is refused, another address is not; X-Forwarded-For counts only from a trusted proxy"
    )
    func addressLimit() async throws {
        for trusted in [false, true] {
            let clock = PausableClock()
            clock.stop()
            try await self.withServer(
                clock: clock,
                configure: { configuration in
                    configuration.rateLimits.perAddress[.register] = TokenBucket.Limit(capacity: 3, perSecond: 0.5)
                    if trusted { configuration.rateLimits.trustedProxies = [IPRange("127.0.0.1")].compactMap { $0 } }
                }
            ) { context in
                let keys = try await self.setUp(context)
                let other = try #require(
                    try await context.api.call("POST", "/v1/keys", key: context.admin, json: #"{"scope":"register","appId":"demo"}"#).body["key"]
                        as? String)
                let base = context.api.base
                for (n, key) in [keys.register, keys.register, other].enumerated() {
                    let answer = try await self.limited(
                        base, "PUT", Self.register(n), key: key, json: Self.sandbox, forwardedFor: "203.0.113.7")
                    #expect(answer.status == 200, "\(answer)")
                }
                let refused = try await self.limited(base, "DELETE", Self.register(0), key: other, forwardedFor: "203.0.113.7")
                #expect(refused.status == 429 && refused.code == "rate_limited" && refused.retryAfter.map { $0 >= 1 } == true, "\(refused)")
                // A client naming another address: believed only from a trusted proxy.
                let elsewhere = try await self.limited(base, "PUT", Self.register(5), key: other, json: Self.sandbox, forwardedFor: "203.0.113.8")
                #expect(elsewhere.status == (trusted ? 200 : 429), "trusted: \(trusted), \(elsewhere)")
                // A send key (the backend) is not limited per address.
                #expect(
                    try await self.limited(base, "PUT", Self.register(6), key: keys.send, json: Self.sandbox, forwardedFor: "203.0.113.7").status
                        == 200)
            }
        }
    }

    @Test(
        "two servers on one PostgreSQL database admit together no more than one key's bucket holds",
        .enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipMessage)))
    func sharedAcrossProcesses() async throws {
        let capacity = 40
        let rate = 0.01
        try await PostgresTestDatabase.with { database in
            let first = try TemporaryDirectory(prefix: "herald-rate-a")
            let second = try TemporaryDirectory(prefix: "herald-rate-b")
            defer {
                first.remove()
                second.remove()
            }
            let masterKey = SecretBox.generateMasterKey()
            @Sendable func configuration(_ directory: TemporaryDirectory) -> ServerConfiguration {
                var configuration = Self.configuration(directory)
                configuration.database = database.url
                configuration.masterKey = masterKey
                configuration.builtInEmulator = false
                configuration.rateLimits.perKey[.send] = TokenBucket.Limit(capacity: Double(capacity), perSecond: rate)
                configuration.rateLimits.leaseLifetimeMilliseconds = 600_000
                return configuration
            }
            let lease = RateLimits().leaseSize(TokenBucket.Limit(capacity: Double(capacity), perSecond: rate))
            try await withHeraldServer(configuration: configuration(first)) { one in
                try await withHeraldServer(configuration: configuration(second)) { two in
                    let context = Context(
                        api: HTTP(base: "http://127.0.0.1:\(one.port)"), control: HTTP(base: "http://127.0.0.1:0"),
                        admin: try #require(one.initialAdminKey), server: one)
                    let keys = try await self.setUp(context)
                    let bases = ["http://127.0.0.1:\(one.port)", "http://127.0.0.1:\(two.port)"]
                    let started = ContinuousClock.now
                    // 4 lanes to each server, 52 requests each: more than the bucket holds.
                    let answers = try await withThrowingTaskGroup(of: [Int].self) { group in
                        for lane in 0..<8 {
                            group.addTask {
                                var statuses: [Int] = []
                                for n in 0..<13 {
                                    let answer = try await self.limited(
                                        bases[lane % 2], "PUT", Self.register(lane * 100 + n), key: keys.send, json: Self.sandbox)
                                    statuses.append(answer.status)
                                    if answer.status == 429 { #expect(answer.retryAfter.map { $0 >= 1 } == true) }
                                }
                                return statuses
                            }
                        }
                        var all: [Int] = []
                        for try await statuses in group { all += statuses }
                        return all
                    }
                    let elapsed = ContinuousClock.now - started
                    let refilled = Int((Double(elapsed.components.seconds + 1) * rate).rounded(.up))
                    let admitted = answers.filter { $0 == 200 }.count
                    #expect(answers.allSatisfy { $0 == 200 || $0 == 429 }, "\(answers)")
                    // Every token admitted was taken from the one shared bucket (plus what refilled meanwhile).
                    #expect(admitted <= capacity + refilled, "admitted \(admitted) of \(answers.count)")
                    // At most lease − 1 tokens per process are left unspent when the requests stop.
                    #expect(admitted >= capacity - 2 * (lease - 1), "admitted \(admitted) of \(answers.count)")
                }
            }
        }
    }
}

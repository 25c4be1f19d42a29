// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldTesting
import WebPush
import WebPushEmulator

/// An emulator started for one test, and an application server (a VAPID key) to push with.
struct Fixture: Sendable {
    static let subject = "mailto:push@example.com"

    let emulator: WebPushEmulator
    let vapid = VAPIDKey()
    var port: Int { self.emulator.port ?? 0 }

    /// A virtual browser subscribed with ``vapid``'s public key (or `key`).
    func browser(_ personality: WebPushPersonality, key: [UInt8]? = nil) throws -> WebPushBrowserSubscription {
        try self.emulator.makeBrowser(personality: personality, applicationServerKey: key ?? self.vapid.publicKey)
    }

    /// `Authorization` as an application server writes it, with knobs to get it wrong.
    func authorization(
        key: VAPIDKey? = nil, audience: String? = nil, subject: String = Fixture.subject, lifetime: Int64 = 3600
    ) -> String {
        (key ?? self.vapid).authorization(
            audience: audience ?? self.emulator.origin, subject: subject, expiresAt: self.emulator.clock.nowSeconds + lifetime
        )
    }

    /// `text` encrypted for `browser`'s subscription keys.
    static func encrypt(_ text: String, for browser: WebPushBrowserSubscription) throws -> [UInt8] {
        let keys = try WebPushSubscriptionKeys(p256dh: browser.p256dh, auth: browser.auth)
        return try WebPushEncryption.encrypt(Array(text.utf8), for: keys)
    }

    /// The usual RFC 8030 headers: VAPID, `TTL`, `Content-Encoding: aes128gcm`, then `extra`;
    /// a `nil` value in `extra` removes that header.
    func headers(ttl: String? = "60", _ extra: [(String, String?)] = []) -> [(String, String)] {
        var headers: [(String, String?)] = [
            ("Authorization", self.authorization()), ("TTL", ttl), ("Content-Encoding", "aes128gcm"),
            ("Content-Type", "application/octet-stream"),
        ]
        for (name, value) in extra {
            headers.removeAll { $0.0.lowercased() == name.lowercased() }
            headers.append((name, value))
        }
        return headers.compactMap { name, value in value.map { (name, $0) } }
    }

    /// `POST`s `body` to the endpoint's path.
    func push(_ endpoint: String, body: [UInt8], headers: [(String, String)]) async throws -> RawResponse {
        try await RawHTTPClient.send(port: self.port, method: "POST", path: Self.path(of: endpoint), headers: headers, body: body)
    }

    /// Encrypts `text` for `browser` and pushes it with the usual headers plus `extra`.
    func push(_ text: String, to browser: WebPushBrowserSubscription, _ extra: [(String, String?)] = []) async throws -> RawResponse {
        try await self.push(browser.endpoint, body: try Self.encrypt(text, for: browser), headers: self.headers(extra))
    }

    /// The path of an `http://127.0.0.1:P/…` endpoint.
    static func path(of endpoint: String) -> String {
        guard let schemeEnd = endpoint.range(of: "://"), let slash = endpoint[schemeEnd.upperBound...].firstIndex(of: "/") else {
            return endpoint
        }
        return String(endpoint[slash...])
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
}

/// Starts an emulator on a free port, runs `body`, shuts it down.
func withFixture<Result: Sendable>(
    clock: WebPushEmulatorClock = .system, _ body: (Fixture) async throws -> Result
) async throws -> Result {
    let emulator = WebPushEmulator(clock: clock)
    try await emulator.start()
    do {
        let result = try await body(Fixture(emulator: emulator))
        await emulator.shutdown()
        return result
    } catch {
        await emulator.shutdown()
        throw error
    }
}

struct TimedOut: Error, CustomStringConvertible {
    var description: String { "timed out (hang guard)" }
}

/// Runs `body`, failing with ``TimedOut`` if it takes longer than `seconds`: a guard against a
/// hang, not a wait (the body returns as soon as what it waits for happens).
func withHangGuard<Result: Sendable>(
    seconds: Int = 30, _ body: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Result.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimedOut()
        }
        defer { group.cancelAll() }
        guard let result = try await group.next() else { throw TimedOut() }
        return result
    }
}

/// The next event of `kind` from `events`, skipping others; `nil` if the stream ends.
func next(_ kind: WebPushEvent.Kind, in events: AsyncStream<WebPushEvent>) async -> WebPushEvent? {
    for await event in events where event.kind == kind { return event }
    return nil
}

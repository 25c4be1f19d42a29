// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Synchronization
import WebPush

/// Each app's VAPID key (RFC 8292), made by Herald and sealed like every credential (route
/// `webpush`): its public half is the `applicationServerKey` browsers subscribe with. Made on
/// first ask (``ensure(appID:)``); a new one (``rotate(appID:)``) leaves every subscription made
/// with the old one unusable — the push services refuse it (`VapidPkHashMismatch`, 401/403) and
/// Herald invalidates those devices, so that the SDK subscribes again with the new key.
///
/// The signed header is made once per push service origin and reused: `exp` 12 hours ahead,
/// made again when less than 6 are left (Apple asks for no new token more often than hourly and
/// refuses one more than a day ahead).
final class VAPIDKeys: Sendable {
    private struct Entry: Sendable {
        var sealed: [UInt8]
        var key: VAPIDKey
        /// Per origin: the `Authorization` value and its `exp` (UNIX seconds).
        var headers: [String: (value: String, expiresAt: Int64)] = [:]
    }

    static let lifetime: Int64 = 12 * 3600
    static let renewWithin: Int64 = 6 * 3600

    private let store: any HeraldStore
    private let secrets: SecretBox
    private let clock: any EpochClock
    /// The contact in every token's `sub` (`mailto:` or `https:`, as Apple and Mozilla require).
    let subject: String
    private let entries = Mutex<[String: Entry]>([:])

    init(store: any HeraldStore, secrets: SecretBox, clock: any EpochClock, subject: String) {
        self.store = store
        self.secrets = secrets
        self.clock = clock
        self.subject = subject
    }

    /// The app's key; `no_vapid_key` when it has none yet (no browser can have subscribed to it).
    func key(appID: String) async throws(HeraldError) -> VAPIDKey {
        guard let key = try await self.stored(appID: appID) else {
            throw HeraldError(code: "no_vapid_key", "app '\(appID)' has no VAPID key yet: no browser subscribed with one of Herald's")
        }
        return key
    }

    /// The app's key, made and stored now if it has none.
    func ensure(appID: String) async throws(HeraldError) -> VAPIDKey {
        if let key = try await self.stored(appID: appID) { return key }
        try await self.write(VAPIDKey(), appID: appID)
        // Read back: of two processes making one at once, the one stored last is everyone's.
        return try await self.key(appID: appID)
    }

    /// A new key for the app, replacing the old one.
    func rotate(appID: String) async throws(HeraldError) -> VAPIDKey {
        try await self.write(VAPIDKey(), appID: appID)
        return try await self.key(appID: appID)
    }

    /// The `Authorization` header for `origin` with the app's `key`.
    func authorization(appID: String, key: VAPIDKey, origin: String) -> String {
        let now = self.clock.nowMilliseconds / 1000
        return self.entries.withLock { entries in
            if let header = entries[appID]?.headers[origin], header.expiresAt - now > Self.renewWithin { return header.value }
            let expiresAt = now + Self.lifetime
            let value = key.authorization(audience: origin, subject: self.subject, expiresAt: expiresAt)
            entries[appID]?.headers[origin] = (value, expiresAt)
            return value
        }
    }

    private func stored(appID: String) async throws(HeraldError) -> VAPIDKey? {
        let sealed: [UInt8]?
        do {
            sealed = try await self.store.credentials(appID: appID)[.webpush]
        } catch {
            throw HeraldError(code: "store_unavailable", "cannot read credentials: \(error)")
        }
        guard let sealed else {
            self.entries.withLock { _ = $0.removeValue(forKey: appID) }
            return nil
        }
        if let entry = self.entries.withLock({ $0[appID] }), entry.sealed == sealed { return entry.key }
        let key = try Self.open(sealed, secrets: self.secrets)
        self.entries.withLock { $0[appID] = Entry(sealed: sealed, key: key) }
        return key
    }

    private func write(_ key: VAPIDKey, appID: String) async throws(HeraldError) {
        let sealed: [UInt8]
        do {
            sealed = try self.secrets.seal(Self.encode(key))
        } catch {
            throw HeraldError(code: "seal_failed", "cannot encrypt the VAPID key")
        }
        do {
            try await self.store.setCredential(appID: appID, environment: .webpush, sealed: sealed, now: self.clock.nowMilliseconds)
        } catch let error as HeraldError {
            throw error
        } catch {
            throw HeraldError(code: "store_unavailable", "cannot store the VAPID key: \(error)")
        }
    }

    // MARK: the sealed form

    static func encode(_ key: VAPIDKey) -> [UInt8] {
        JSONValue.object([("type", "vapid"), ("privateKey", .string(Base64URL.encode(key.rawRepresentation)))]).serialized()
    }

    static func open(_ sealed: [UInt8], secrets: SecretBox) throws(HeraldError) -> VAPIDKey {
        let plain: [UInt8]
        do {
            plain = try secrets.open(sealed)
        } catch {
            throw HeraldError(code: "credentials_unreadable", "stored credentials cannot be opened with this master key")
        }
        guard let value = try? JSONValue.parse(plain), value["type"]?.stringValue == "vapid",
            let text = value["privateKey"]?.stringValue, let raw = Base64URL.decode(text), let key = try? VAPIDKey(rawRepresentation: raw)
        else {
            throw HeraldError(code: "credentials_unreadable", "the stored VAPID key is not one Herald wrote")
        }
        return key
    }

    /// The public key of a sealed credential (for listings), nil when unreadable.
    static func publicKey(_ sealed: [UInt8], secrets: SecretBox) -> String? {
        (try? Self.open(sealed, secrets: secrets))?.publicKeyBase64URL
    }
}

/// Which push services Herald may post to — no request to an address a caller chose: `https`
/// endpoints on the browsers' own push services and hosts the operator added, and origins named
/// in full (the built-in emulator's; an emulator's in development).
package struct WebPushEndpointPolicy: Sendable, Hashable {
    /// The push services of Chrome and Edge (FCM), Firefox (Mozilla), Safari (Apple) and Edge on
    /// Windows (WNS). `*.` matches any subdomain.
    package static let browserServices = [
        "fcm.googleapis.com", "updates.push.services.mozilla.com", "*.push.services.mozilla.com", "web.push.apple.com",
        "*.push.apple.com", "*.notify.windows.com",
    ]

    /// Hosts reached over https on port 443 (exact, or `*.domain`).
    package var hosts: [String]
    /// Whole origins (`scheme://host[:port]`), any scheme: emulators.
    package var origins: Set<String>

    package init(hosts: [String] = Self.browserServices, origins: Set<String> = []) {
        self.hosts = hosts.map { $0.lowercased() }
        self.origins = Set(origins.compactMap { VAPID.origin(of: $0) })
    }

    /// The endpoint's origin (VAPID's `aud`) when Herald may post to it; nil otherwise.
    package func allowedOrigin(_ endpoint: String) -> String? {
        // Printable ASCII, no user info, no fragment: what a push service hands out, and nothing
        // that could make the URL mean one host to this check and another to the HTTP client.
        guard endpoint.utf8.count <= WebSubscription.maximumEndpointLength,
            endpoint.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "@") && $0 != UInt8(ascii: "#") && $0 != UInt8(ascii: "\\") }),
            let origin = VAPID.origin(of: endpoint)
        else { return nil }
        if self.origins.contains(origin) { return origin }
        guard origin.hasPrefix("https://") else { return nil }
        let host = origin.dropFirst("https://".count)
        // A port other than 443 is not a browser's push service: an origin must be named for it.
        guard !host.contains(":") else { return nil }
        let allowed = self.hosts.contains { pattern in
            pattern.hasPrefix("*.") ? host.hasSuffix(pattern.dropFirst(1)) : host == pattern
        }
        return allowed ? origin : nil
    }
}

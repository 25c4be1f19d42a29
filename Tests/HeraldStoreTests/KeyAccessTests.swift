// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Testing

/// The one rule for what a key may do (``KeyAccess``), the failed-authentication buckets, and
/// the device-bound user assertion, on plain values.
struct KeyAccessTests {
    static func key(_ scope: APIScope, app: String? = nil, expiresAt: Int64? = nil, revokedAt: Int64? = nil) -> StoredAPIKey {
        StoredAPIKey(id: "k1", hash: [], scope: scope, appID: app, name: nil, revokedAt: revokedAt, expiresAt: expiresAt)
    }

    static func code(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as HeraldError {
            return error.code
        } catch {
            return "\(error)"
        }
    }

    @Test("a key acts within its scope on its app; the dashboard takes only an admin key bound to no app; expired and revoked keys nowhere")
    func doors() {
        let now: Int64 = 1_000_000
        let cases: [(StoredAPIKey, KeyAccess.Door, String?)] = [
            (Self.key(.admin), .dashboard, nil),
            (Self.key(.admin, app: "demo"), .dashboard, "key_confined"),
            (Self.key(.send), .dashboard, "forbidden"),
            (Self.key(.admin, expiresAt: now), .dashboard, "key_expired"),
            (Self.key(.admin, expiresAt: now + 1), .dashboard, nil),
            (Self.key(.admin, revokedAt: now - 1), .dashboard, "unauthorized"),
            (Self.key(.send, app: "demo"), .api(scope: .send, appID: "demo"), nil),
            (Self.key(.send, app: "demo"), .api(scope: .send, appID: "other"), "forbidden"),
            (Self.key(.send, app: "demo"), .api(scope: .admin, appID: "demo"), "forbidden"),
            (Self.key(.admin, app: "demo"), .api(scope: .admin, appID: nil), "forbidden"),
            (Self.key(.register), .api(scope: .register, appID: "demo"), nil),
            (Self.key(.register, expiresAt: now - 1), .api(scope: .register, appID: "demo"), "key_expired"),
        ]
        for (key, door, expected) in cases {
            #expect(Self.code { try KeyAccess.authorize(key, at: door, now: now) } == expected, "\(key.scope) \(key.appID ?? "-") at \(door)")
        }
        #expect(KeyAccess.sessionEnd(Self.key(.admin), now: 10, lifetime: 100) == 110)
        #expect(KeyAccess.sessionEnd(Self.key(.admin, expiresAt: 50), now: 10, lifetime: 100) == 50, "a session never outlives its key")
    }

    @Test("failed authentications are counted per address, taken before the lookup and given back for a good key; an IPv6 /48 has a bucket too")
    func failures() {
        let failures = AuthenticationFailures(limit: TokenBucket.Limit(capacity: 3, perSecond: 1), maxBuckets: 64)
        // Attempts in flight at once each hold a token: the fourth is refused before any lookup ends.
        for _ in 0..<3 { #expect(failures.attempt(address: "198.51.100.1", now: 0) == nil) }
        #expect(failures.attempt(address: "198.51.100.1", now: 0) == 1)
        // One of them was a good key: its token comes back.
        failures.succeeded(address: "198.51.100.1", now: 0)
        #expect(failures.attempt(address: "198.51.100.1", now: 0) == nil)
        #expect(failures.attempt(address: "198.51.100.1", now: 0) == 1)
        #expect(failures.attempt(address: "198.51.100.2", now: 0) == nil, "another address is not refused")
        #expect(failures.attempt(address: "198.51.100.1", now: 1000) == nil, "a token back after a second")
        #expect(AuthenticationFailures(limit: nil).attempt(address: "198.51.100.1", now: 0) == nil)
        // 16 /64s of one /48, three failures each: the /48's bucket (48) is empty, and a 17th /64 waits.
        for n in 0..<16 {
            for _ in 0..<3 { #expect(failures.attempt(address: RateLimits.prefix("2001:db8:1:\(n)::1"), now: 0) == nil) }
        }
        #expect(failures.attempt(address: RateLimits.prefix("2001:db8:1:99::1"), now: 0) != nil)
        #expect(failures.attempt(address: RateLimits.prefix("2001:db8:2::1"), now: 0) == nil, "another /48")
    }

    /// Signed by Python's standard library (hmac, hashlib), not by Herald:
    /// `secret = b"hus_known-answer-secret-for-herald-tests-000"`, claims
    /// `{"app":"demo","sub":"ann","exp":2000000000,"tkh":b64url(sha256(("ab"*32).encode()))}`.
    static let secret = Array("hus_known-answer-secret-for-herald-tests-000".utf8)
    static let bound =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJhcHAiOiJkZW1vIiwic3ViIjoiYW5uIiwiZXhwIjoyMDAwMDAwMDAwLCJ0a2giOiJKeHBCTzlNNXhYQ2YzT3JzUWZGUEVlbjctMUJDMXkwekhHWHpLeWhNMEpvIn0.AZh9WEA42t5SCdALn-F-y3Rieg2WEx7cz0Ddg7W-Wgc"
    static let unbound =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJhcHAiOiJkZW1vIiwic3ViIjoiYW5uIiwiZXhwIjoyMDAwMDAwMDAwfQ.O_sYScgqW5otgXC1HjzV-xlXDBWociqR7w08X_OVFk8"

    @Test("a user assertion signed elsewhere binds only the device its tkh names; an unbound one only where the app allows it")
    func assertionVectors() throws {
        let now: Int64 = 2_000_000_000 - 600
        let device = String(repeating: "ab", count: 32)
        #expect(UserAssertion.tokenHash(device) == "JxpBO9M5xXCf3OrsQfFPEen7-1BC1y0zHGXzKyhM0Jo")
        let verified = try UserAssertion.verify(Self.bound, secret: Self.secret, appID: "demo", now: now, device: device, allowUnbound: false)
        #expect(verified.userID == "ann" && verified.tokenHash == UserAssertion.tokenHash(device))
        let other = String(repeating: "cd", count: 32)
        #expect(
            Self.code { _ = try UserAssertion.verify(Self.bound, secret: Self.secret, appID: "demo", now: now, device: other, allowUnbound: true) }
                == "user_assertion_wrong_device", "a bound assertion binds no other device, even where unbound ones are allowed")
        #expect(
            Self.code {
                _ = try UserAssertion.verify(Self.unbound, secret: Self.secret, appID: "demo", now: now, device: device, allowUnbound: false)
            }
                == "user_assertion_unbound")
        #expect(
            try UserAssertion.verify(Self.unbound, secret: Self.secret, appID: "demo", now: now, device: device, allowUnbound: true).tokenHash == nil)
        // Herald's own signing gives what the Python signer gave, byte for byte.
        let signed = UserAssertion(appID: "demo", userID: "ann", expiresAt: 2_000_000_000, tokenHash: UserAssertion.tokenHash(device)).signed(
            secret: Self.secret)
        #expect(signed == Self.bound)
    }

    @Test("revoking the last admin key that governs (bound to no app, usable) is refused; expired and confined ones do not count")
    func lastGoverningKey() {
        let now: Int64 = 1000
        func admin(_ id: String, app: String? = nil, expiresAt: Int64? = nil) -> StoredAPIKey {
            StoredAPIKey(id: id, hash: [], scope: .admin, appID: app, name: nil, expiresAt: expiresAt)
        }
        let root = admin("root")
        let others = [admin("confined", app: "demo"), admin("expired", expiresAt: now), root]
        #expect(Self.code { try KeyAccess.requireAnotherGoverningKey(revoking: root, admins: others, now: now) } == "last_admin_key")
        #expect(Self.code { try KeyAccess.requireAnotherGoverningKey(revoking: others[0], admins: others, now: now) } == nil)
        #expect(Self.code { try KeyAccess.requireAnotherGoverningKey(revoking: others[1], admins: others, now: now) } == nil)
        let later = others + [admin("later", expiresAt: now + 1)]
        #expect(Self.code { try KeyAccess.requireAnotherGoverningKey(revoking: root, admins: later, now: now) } == nil)
    }
}

import HTTPTypes
// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Hummingbird

/// A signed-in admin: the key it signed in with, and the CSRF token its forms carry.
struct DashboardSession: Sendable {
    var key: StoredAPIKey
    var csrf: String

    /// The name shown in "Sign out (…)".
    var name: String { self.key.name ?? self.key.id }
}

/// Sign-in sessions and CSRF tokens.
///
/// Sign-in takes an admin key bound to no app (``KeyAccess``'s dashboard door: the dashboard
/// governs every app) and gives a session cookie (HttpOnly, SameSite=Strict) that is signed with a
/// key derived from the master key, so every process of a shared database accepts it. Every
/// request of a session asks ``KeyAccess`` again, so a key revoked, expired or rotated out ends its
/// sessions at once; a session never outlives its key's expiry. Every form carries a CSRF token
/// derived from the session. Failed sign-ins count against the address as a wrong API key does.
struct DashboardSessions: Sendable {
    static let cookie = "herald_session"
    static let lifetimeSeconds: Int64 = 12 * 3600
    static let signedOutCookie = "\(cookie)=; Path=/dashboard; Max-Age=0; HttpOnly; SameSite=Strict"

    let backend: DashboardBackend

    /// The key `token` is, once it may open the dashboard; else the refusal (401 for a key that is
    /// not one, or not any more; 403 for one the dashboard does not take; 429 for an address over
    /// its failures).
    func signIn(_ token: String, address: String?) async throws -> StoredAPIKey {
        let now = self.backend.nowMilliseconds
        // A key that is not one (or not any more) is a failed authentication of the address;
        // an admin key the dashboard does not take is 403 and counted as a good key.
        let key = try await self.backend.authenticator.gated(token: token, address: address, now: now)
        try KeyAccess.authorize(key, at: .dashboard, now: now)
        return key
    }

    /// The `Set-Cookie` value of a new session for `key`; `secure` behind a TLS-terminating proxy.
    /// It ends after ``lifetimeSeconds`` or at the key's expiry, whichever comes first.
    func cookie(for key: StoredAPIKey, secure: Bool) -> String {
        let now = self.backend.nowMilliseconds
        let expires = KeyAccess.sessionEnd(key, now: now, lifetime: Self.lifetimeSeconds * 1000) / 1000
        let maxAge = max(0, expires - now / 1000)
        let value = "\(key.id).\(expires).\(self.backend.authenticationCode("session|\(key.id)|\(expires)"))"
        return "\(Self.cookie)=\(value); Path=/dashboard; Max-Age=\(maxAge); HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    /// The signed-in admin, from the session cookie: signature, expiry, and the key still let in.
    func current(_ request: Request) async throws -> DashboardSession? {
        guard let value = request.cookies[Self.cookie]?.value else { return nil }
        return try await self.session(cookie: value)
    }

    /// The session a cookie's value holds, while it is valid (asked again by the emulated phone's stream).
    func session(cookie value: String) async throws -> DashboardSession? {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let now = self.backend.nowMilliseconds
        guard parts.count == 3, let expires = Int64(parts[1]), expires > now / 1000,
            Self.constantTimeEqual(parts[2], self.backend.authenticationCode("session|\(parts[0])|\(expires)")),
            let key = try await self.backend.store.apiKey(id: parts[0])
        else { return nil }
        do {
            try KeyAccess.authorize(key, at: .dashboard, now: now)
        } catch {
            return nil
        }
        return DashboardSession(key: key, csrf: self.backend.authenticationCode("csrf|\(value)"))
    }

    /// A state-changing request: a session and its CSRF token (a form field or `X-CSRF-Token`).
    func authorized(_ request: Request, form: [String: String]) async throws -> DashboardSession {
        guard let session = try await self.current(request) else { throw HeraldError.unauthorized }
        let presented = form["csrf"] ?? request.headers[HTTPField.Name("X-CSRF-Token")!] ?? ""
        guard Self.constantTimeEqual(presented, session.csrf) else {
            throw HeraldError.forbidden("the form is stale or came from another site (CSRF check failed): reload the page")
        }
        return session
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}

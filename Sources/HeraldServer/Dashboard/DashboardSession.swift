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
/// Sign-in takes an admin key and gives a session cookie (HttpOnly, SameSite=Strict) that is
/// signed with a key derived from the master key, so every process of a shared database accepts
/// it and a revoked admin key ends its sessions at once. Every form carries a CSRF token derived
/// from the session.
struct DashboardSessions: Sendable {
    static let cookie = "herald_session"
    static let lifetimeSeconds: Int64 = 12 * 3600
    static let signedOutCookie = "\(cookie)=; Path=/dashboard; Max-Age=0; HttpOnly; SameSite=Strict"

    let backend: DashboardBackend

    /// The admin key `token` is, or nil when it is not an admin key of this server.
    func adminKey(_ token: String) async throws -> StoredAPIKey? {
        guard let id = APIKeySecret.id(of: token), let key = try await self.backend.store.apiKey(id: id), APIKeySecret.matches(token, hash: key.hash),
            key.scope == .admin
        else { return nil }
        return key
    }

    /// The `Set-Cookie` value of a new session for `key`; `secure` behind a TLS-terminating proxy.
    func cookie(for key: StoredAPIKey, secure: Bool) -> String {
        let expires = self.backend.nowMilliseconds / 1000 + Self.lifetimeSeconds
        let value = "\(key.id).\(expires).\(self.backend.authenticationCode("session|\(key.id)|\(expires)"))"
        return "\(Self.cookie)=\(value); Path=/dashboard; Max-Age=\(Self.lifetimeSeconds); HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    /// The signed-in admin, from the session cookie: signature, expiry and the key still valid.
    func current(_ request: Request) async throws -> DashboardSession? {
        guard let value = request.cookies[Self.cookie]?.value else { return nil }
        let parts = value.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let expires = Int64(parts[1]), expires > self.backend.nowMilliseconds / 1000,
            Self.constantTimeEqual(parts[2], self.backend.authenticationCode("session|\(parts[0])|\(expires)")),
            let key = try await self.backend.store.apiKey(id: parts[0]), key.scope == .admin
        else { return nil }
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

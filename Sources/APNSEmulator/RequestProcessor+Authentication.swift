// SPDX-License-Identifier: Apache-2.0
import APNSModels

struct AuthFailure: Error {
    var reason: APNSReason
    var status: Int
    /// The credentials were valid and this was their first use on the connection, though the
    /// request fails for another reason: the stream limit is raised all the same.
    var firstAuthentication = false
}

extension RequestProcessor {
    /// How long a provider token stays valid after its `iat`.
    static let tokenLifetimeMilliseconds: Int64 = 3_600_000
    /// The least time between two token changes on one connection.
    static let tokenUpdateIntervalMilliseconds: Int64 = 20 * 60_000

    /// Checks the request's credentials. Success carries whether this was the connection's first
    /// authenticated request. `topic` is checked against a topic-specific key or the certificate.
    func authenticate(
        _ headers: RequestHeaders,
        topic: Substring?,
        pushType: String,
        connection: inout ConnectionContext,
        now: Int64
    ) -> Result<Bool, AuthFailure> {
        if let certificate = connection.certificate {
            return Self.authenticateCertificate(certificate, topic: topic, pushType: pushType, connection: &connection)
        }
        let result = self.authenticateToken(headers.authorization, topic: topic, connection: &connection, now: now)
        // MDM pushes go out with the MDM vendor's push certificate only.
        if case .success(let first) = result, pushType == "mdm" {
            return .failure(AuthFailure(reason: .topicDisallowed, status: 400, firstAuthentication: first))
        }
        return result
    }

    private static func authenticateCertificate(
        _ certificate: ProviderCertificateInfo,
        topic: Substring?,
        pushType: String,
        connection: inout ConnectionContext
    ) -> Result<Bool, AuthFailure> {
        if WirePushType.needsTokenAuthentication(pushType) {
            return .failure(AuthFailure(reason: .topicDisallowed, status: 400))
        }
        if let topic, !certificate.topics.contains(where: { $0 == topic }) {
            return .failure(AuthFailure(reason: .badTopic, status: 400))
        }
        let first = !connection.authenticated
        connection.authenticated = true
        return .success(first)
    }

    private func authenticateToken(
        _ authorization: String?,
        topic: Substring?,
        connection: inout ConnectionContext,
        now: Int64
    ) -> Result<Bool, AuthFailure> {
        func failure(_ reason: APNSReason, _ status: Int = 403) -> Result<Bool, AuthFailure> {
            .failure(AuthFailure(reason: reason, status: status))
        }
        guard let authorization, authorization.utf8.count > 7,
            authorization.utf8.prefix(7).elementsEqual("bearer ".utf8, by: { $0 | 0x20 == $1 | 0x20 })
        else {
            return failure(.missingProviderToken)
        }
        let bearer = authorization[authorization.utf8.index(authorization.utf8.startIndex, offsetBy: 7)...]

        // Parse and verify the signature, unless this connection or the cache already did.
        let claims: ProviderTokenClaims
        let key: RegisteredKey
        let cached = connection.verifiedClaims.map { self.state.keyWithGeneration(id: $0.keyID) }
        if authorization == connection.verifiedAuthorization, let verified = connection.verifiedClaims,
            let known = cached?.key, cached?.generation == connection.verifiedGeneration
        {
            claims = verified
            key = known
        } else {
            guard let parsed = try? ProviderTokenClaims(token: String(bearer)), parsed.algorithm == "ES256" else {
                return failure(.invalidProviderToken)
            }
            let (found, generation) = self.state.keyWithGeneration(id: parsed.keyID)
            guard let known = found, known.teamID == parsed.teamID else { return failure(.invalidProviderToken) }
            if !self.tokenCache.isVerified(bearer, generation: generation) {
                guard parsed.isSigned(by: known.publicKey) else { return failure(.invalidProviderToken) }
                self.tokenCache.insert(bearer, generation: generation)
            }
            claims = parsed
            key = known
            connection.verifiedAuthorization = authorization
            connection.verifiedClaims = parsed
            connection.verifiedGeneration = generation
        }

        // The first team to push on a connection owns it.
        if let team = connection.boundTeamID, team != claims.teamID { return failure(.invalidProviderToken) }
        guard key.environments.contains(connection.environment) else { return failure(.badEnvironmentKeyIdInToken) }
        if let boundKeyID = connection.boundKeyID, boundKeyID != key.keyID {
            guard let bound = self.state.key(id: boundKeyID), Self.keysMayShareConnection(bound, key) else {
                return failure(.unrelatedKeyIdInToken)
            }
        }
        let (issuedAt, overflow) = claims.issuedAt.multipliedReportingOverflow(by: 1000)
        if overflow { return failure(.invalidProviderToken) }
        if now - issuedAt > Self.tokenLifetimeMilliseconds { return failure(.expiredProviderToken) }
        if issuedAt - now > Self.tokenLifetimeMilliseconds { return failure(.invalidProviderToken) }
        if let current = connection.currentAuthorization, current != authorization {
            // A new token within 20 minutes of the connection's last change is refused, unless it
            // is itself a refresh: issued 20 minutes or more after the token it replaces (a client
            // that shares one token across connections refreshes them all at once).
            let refreshed = issuedAt - connection.currentIssuedAt >= Self.tokenUpdateIntervalMilliseconds
            if now - connection.bearerChangedAt < Self.tokenUpdateIntervalMilliseconds, !refreshed {
                return failure(.tooManyProviderTokenUpdates, 429)
            }
            connection.currentAuthorization = authorization
            connection.currentIssuedAt = issuedAt
            connection.bearerChangedAt = now
        } else if connection.currentAuthorization == nil {
            connection.currentAuthorization = authorization
            connection.currentIssuedAt = issuedAt
            connection.bearerChangedAt = now
        }
        if let topic, !key.allows(topic: topic) { return failure(.invalidProviderToken) }

        connection.boundTeamID = claims.teamID
        if connection.boundKeyID == nil { connection.boundKeyID = key.keyID }
        let first = !connection.authenticated
        connection.authenticated = true
        return .success(first)
    }

    /// Apple's key-mixing rules: a team-scoped key shares a connection only with team-scoped keys
    /// (a key of the other environment was already refused); a topic-specific key only with its
    /// related key.
    static func keysMayShareConnection(_ bound: RegisteredKey, _ other: RegisteredKey) -> Bool {
        switch (bound.topics, other.topics) {
        case (nil, nil): return bound.teamID == other.teamID
        case (.some, .some): return bound.relatedKeyID == other.keyID || other.relatedKeyID == bound.keyID
        default: return false
        }
    }
}

// SPDX-License-Identifier: Apache-2.0

/// `POST /v1/keys`: `scope` is register, send or admin; a register key names its `appId`.
public struct CreateKeyRequest: Sendable, Hashable, Codable {
    public var scope: String?
    public var appId: String?
    public var name: String?
    /// When it stops working (ms since 1970, in the future); none by default.
    public var expiresAt: Int64?

    public init(scope: String, appId: String? = nil, name: String? = nil, expiresAt: Int64? = nil) {
        self.scope = scope
        self.appId = appId
        self.name = name
        self.expiresAt = expiresAt
    }
}

/// `POST /v1/keys/{id}/rotate`: a new key like this one; the old one keeps working for
/// `overlapSeconds` (default 86400, at most 30 days; 0 ends it now).
public struct RotateKeyRequest: Sendable, Hashable, Codable {
    public var overlapSeconds: Int64?
    /// The new key's expiry (ms since 1970); none by default.
    public var expiresAt: Int64?

    public init(overlapSeconds: Int64? = nil, expiresAt: Int64? = nil) {
        self.overlapSeconds = overlapSeconds
        self.expiresAt = expiresAt
    }
}

/// The answer to a rotation: the new key (its secret shown once) and the old one as it is now.
public struct RotatedKey: Sendable, Hashable, Codable {
    public var key: CreatedKey
    public var previous: APIKeyResponse

    public init(key: CreatedKey, previous: APIKeyResponse) {
        self.key = key
        self.previous = previous
    }
}

/// The answer to `POST /v1/keys`: the only time the secret `key` is shown.
public struct CreatedKey: Sendable, Hashable, Codable {
    public var id: String
    public var key: String
    public var scope: String

    public init(id: String, key: String, scope: String) {
        self.id = id
        self.key = key
        self.scope = scope
    }
}

/// An API key's metadata (never its secret).
public struct APIKeyResponse: Sendable, Hashable, Codable {
    public var id: String
    public var scope: String
    public var appId: String?
    public var name: String?
    public var createdAt: Int64
    public var revokedAt: Int64?
    public var expiresAt: Int64?
    /// When it last authorized a request, to the minute.
    public var lastUsedAt: Int64?

    public init(
        id: String, scope: String, appId: String?, name: String?, createdAt: Int64, revokedAt: Int64?, expiresAt: Int64? = nil,
        lastUsedAt: Int64? = nil
    ) {
        self.expiresAt = expiresAt
        self.lastUsedAt = lastUsedAt
        self.id = id
        self.scope = scope
        self.appId = appId
        self.name = name
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// `GET /v1/keys`.
public struct KeyList: Sendable, Hashable, Codable {
    public var keys: [APIKeyResponse]

    public init(keys: [APIKeyResponse]) { self.keys = keys }
}

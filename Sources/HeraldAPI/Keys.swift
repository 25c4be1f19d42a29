// SPDX-License-Identifier: Apache-2.0

/// `POST /v1/keys`: `scope` is register, send or admin; a register key names its `appId`.
public struct CreateKeyRequest: Sendable, Hashable, Codable {
    public var scope: String?
    public var appId: String?
    public var name: String?

    public init(scope: String, appId: String? = nil, name: String? = nil) {
        self.scope = scope
        self.appId = appId
        self.name = name
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

    public init(id: String, scope: String, appId: String?, name: String?, createdAt: Int64, revokedAt: Int64?) {
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

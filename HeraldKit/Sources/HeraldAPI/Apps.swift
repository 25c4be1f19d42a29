// SPDX-License-Identifier: Apache-2.0

/// `POST /v1/apps`.
public struct CreateAppRequest: Sendable, Hashable, Codable {
    public var id: String?
    public var bundleId: String?

    public init(id: String, bundleId: String) {
        self.id = id
        self.bundleId = bundleId
    }
}

/// An app, as every app call answers it.
public struct AppResponse: Sendable, Hashable, Codable {
    public var id: String
    public var bundleId: String
    public var createdAt: Int64
    /// Binding a device to a user with a register key needs a user assertion.
    public var userVerification: Bool
    /// Tags only send and admin keys may set.
    public var protectedTags: [String]
    /// Whether the app has a user secret to sign assertions with.
    public var userSecretSet: Bool
    /// Pushes carry a receipt id (payload key `hr`) and devices may report receipts. On by default.
    public var receipts: Bool

    public init(
        id: String, bundleId: String, createdAt: Int64, userVerification: Bool, protectedTags: [String], userSecretSet: Bool, receipts: Bool = true
    ) {
        self.receipts = receipts
        self.id = id
        self.bundleId = bundleId
        self.createdAt = createdAt
        self.userVerification = userVerification
        self.protectedTags = protectedTags
        self.userSecretSet = userSecretSet
    }
}

/// `PATCH /v1/apps/{app}`: the fields given are changed.
public struct UpdateAppRequest: Sendable, Hashable, Codable {
    public var userVerification: Bool?
    public var protectedTags: [String]?
    /// Whether pushes carry receipt ids (and devices may report receipts).
    public var receipts: Bool?

    public init(userVerification: Bool? = nil, protectedTags: [String]? = nil, receipts: Bool? = nil) {
        self.receipts = receipts
        self.userVerification = userVerification
        self.protectedTags = protectedTags
    }
}

/// `POST /v1/apps/{app}/user-secret`: the new secret, shown this once (the one before it stops working).
public struct UserSecretResponse: Sendable, Hashable, Codable {
    /// `hus_` and 43 base64url characters; the HMAC-SHA256 key is the UTF-8 of the whole string.
    public var secret: String

    public init(secret: String) { self.secret = secret }
}

/// `POST /v1/apps/{app}/user-assertions`: Herald signs an assertion, for a backend that holds a
/// send key rather than the secret, and for tests.
public struct CreateUserAssertionRequest: Sendable, Hashable, Codable {
    public var userId: String?
    /// Seconds until it expires: 1 to 3600, default 600.
    public var ttl: Int64?

    public init(userId: String, ttl: Int64? = nil) {
        self.userId = userId
        self.ttl = ttl
    }
}

public struct UserAssertionResponse: Sendable, Hashable, Codable {
    public var assertion: String
    public var expiresAt: Int64

    public init(assertion: String, expiresAt: Int64) {
        self.assertion = assertion
        self.expiresAt = expiresAt
    }
}

/// `GET /v1/apps`.
public struct AppList: Sendable, Hashable, Codable {
    public var apps: [AppResponse]

    public init(apps: [AppResponse]) { self.apps = apps }
}

/// `PUT /v1/apps/{app}/credentials/{environment}`: a token key (`keyId`, `teamId`, `privateKey`
/// as the .p8 PEM, optionally `restrictedTo`) or a certificate (`certificate` and `privateKey`, PEM).
public struct CredentialRequest: Sendable, Hashable, Codable {
    public var keyId: String?
    public var teamId: String?
    public var privateKey: String?
    public var restrictedTo: String?
    public var certificate: String?
    /// A certificate and its key as a PKCS#12 bundle (a `.p12` file, base64), instead of PEM.
    public var pkcs12: String?
    /// The `.p12`'s passphrase (none when nil).
    public var passphrase: String?

    public init(
        keyId: String? = nil, teamId: String? = nil, privateKey: String? = nil, restrictedTo: String? = nil, certificate: String? = nil,
        pkcs12: String? = nil, passphrase: String? = nil
    ) {
        self.keyId = keyId
        self.teamId = teamId
        self.privateKey = privateKey
        self.restrictedTo = restrictedTo
        self.certificate = certificate
        self.pkcs12 = pkcs12
        self.passphrase = passphrase
    }
}

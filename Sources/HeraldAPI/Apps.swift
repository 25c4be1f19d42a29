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

    public init(id: String, bundleId: String, createdAt: Int64) {
        self.id = id
        self.bundleId = bundleId
        self.createdAt = createdAt
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

    public init(keyId: String? = nil, teamId: String? = nil, privateKey: String? = nil, restrictedTo: String? = nil, certificate: String? = nil) {
        self.keyId = keyId
        self.teamId = teamId
        self.privateKey = privateKey
        self.restrictedTo = restrictedTo
        self.certificate = certificate
    }
}

// SPDX-License-Identifier: Apache-2.0

/// One environment's APNs credential, as metadata: never the key or certificate material.
public struct CredentialInfo: Sendable, Hashable, Codable {
    /// `sandbox`, `production` or `fcm`.
    public var environment: String
    /// `token` (a .p8 key), `certificate`, `serviceAccount` (FCM), or `unreadable` (sealed under
    /// another master key).
    public var kind: String
    public var keyId: String?
    public var teamId: String?
    /// The one environment a token key is restricted to, if any.
    public var restrictedTo: String?
    public var certificateSubject: String?
    /// When the certificate stops being valid (ms since 1970).
    public var certificateExpiresAt: Int64?
    /// A service account's Firebase project and account.
    public var projectId: String?
    public var clientEmail: String?
    /// When it was set (ms).
    public var updatedAt: Int64

    public init(
        environment: String, kind: String, keyId: String? = nil, teamId: String? = nil, restrictedTo: String? = nil,
        certificateSubject: String? = nil, certificateExpiresAt: Int64? = nil, projectId: String? = nil, clientEmail: String? = nil,
        updatedAt: Int64
    ) {
        self.projectId = projectId
        self.clientEmail = clientEmail
        self.environment = environment
        self.kind = kind
        self.keyId = keyId
        self.teamId = teamId
        self.restrictedTo = restrictedTo
        self.certificateSubject = certificateSubject
        self.certificateExpiresAt = certificateExpiresAt
        self.updatedAt = updatedAt
    }
}

/// `GET /v1/apps/{app}/credentials`: the environments that have one.
public struct CredentialList: Sendable, Hashable, Codable {
    public var credentials: [CredentialInfo]

    public init(credentials: [CredentialInfo]) { self.credentials = credentials }
}

/// `GET /v1/apps/{app}/users/{userId}`: everything Herald holds about the user.
public struct UserDataResponse: Sendable, Hashable, Codable {
    public var userId: String
    /// The user's devices, with their tags, keys and invalidations.
    public var devices: [DeviceResponse]
    /// Every delivery to those devices, newest first.
    public var deliveries: [DeliveryResponse]

    public init(userId: String, devices: [DeviceResponse], deliveries: [DeliveryResponse]) {
        self.userId = userId
        self.devices = devices
        self.deliveries = deliveries
    }
}

/// `DELETE /v1/apps/{app}/users/{userId}`: what the erasure changed.
public struct UserErasureResponse: Sendable, Hashable, Codable {
    public var userId: String
    /// Devices removed.
    public var devices: Int
    /// Delivery records kept for the counts, without their token.
    public var deliveries: Int
    /// Notifications whose payload only this user was to receive, emptied.
    public var notifications: Int
    /// Webhook messages scrubbed of the user's tokens.
    public var webhookMessages: Int

    public init(userId: String, devices: Int, deliveries: Int, notifications: Int, webhookMessages: Int) {
        self.userId = userId
        self.devices = devices
        self.deliveries = deliveries
        self.notifications = notifications
        self.webhookMessages = webhookMessages
    }
}

/// One audited act of data governance.
public struct AuditRecordResponse: Sendable, Hashable, Codable {
    public var id: Int64
    /// When (ms).
    public var at: Int64
    /// The API key that did it.
    public var keyId: String?
    /// `user.export`, `user.erase`, `app.delete`, `credentials.delete`.
    public var action: String
    public var appId: String?
    /// What it was about (the user id).
    public var subject: String?

    public init(id: Int64, at: Int64, keyId: String?, action: String, appId: String?, subject: String?) {
        self.id = id
        self.at = at
        self.keyId = keyId
        self.action = action
        self.appId = appId
        self.subject = subject
    }
}

/// `GET /v1/audit`: newest first.
public struct AuditList: Sendable, Hashable, Codable {
    public var records: [AuditRecordResponse]

    public init(records: [AuditRecordResponse]) { self.records = records }
}

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
    /// The app's quiet hours (each device's local time), or nil: none.
    public var quietHours: QuietHoursSetting?
    /// The app's frequency cap, or nil: none.
    public var frequencyCap: FrequencyCapSetting?
    /// The app's default throttle: at most this many deliveries of a send per minute; nil: none.
    public var throttlePerMinute: Int?
    /// User assertions without a `tkh` claim (bound to no device) are still accepted: on only
    /// for apps made before assertions were bound, until their backends send bound ones.
    public var unboundAssertions: Bool
    /// The app's own rate limits, over the server's; nil: none of its own.
    public var rateLimits: AppRateLimitsSetting?
    /// Set while the app is being deleted (`DELETE /v1/apps/{app}` answered 202): since when, and
    /// how many of its rows are gone so far.
    public var deletion: AppDeletionStatus?

    public init(
        id: String, bundleId: String, createdAt: Int64, userVerification: Bool, protectedTags: [String], userSecretSet: Bool, receipts: Bool = true,
        quietHours: QuietHoursSetting? = nil, frequencyCap: FrequencyCapSetting? = nil, throttlePerMinute: Int? = nil,
        unboundAssertions: Bool = false,
        rateLimits: AppRateLimitsSetting? = nil, deletion: AppDeletionStatus? = nil
    ) {
        self.deletion = deletion
        self.rateLimits = rateLimits
        self.unboundAssertions = unboundAssertions
        self.throttlePerMinute = throttlePerMinute
        self.frequencyCap = frequencyCap
        self.quietHours = quietHours
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
    /// Sets the app's quiet hours (`{"start": "22:00", "end": "08:00"}`); `{}` turns them off.
    public var quietHours: QuietHoursSetting?
    /// Sets the app's frequency cap (`{"limit": 3, "windowSeconds": 86400, "perCategory": false}`); `{}` turns it off.
    public var frequencyCap: FrequencyCapSetting?
    /// Sets the app's default throttle (deliveries of a send per minute, 1 to 100000); 0 turns it off.
    public var throttlePerMinute: Int?
    /// Whether user assertions bound to no device (no `tkh` claim) are still accepted.
    public var unboundAssertions: Bool?
    /// Sets the app's own rate limits: each field given is `BURST/PER_SECOND`, or `"0"` for none.
    public var rateLimits: AppRateLimitsSetting?

    public init(
        userVerification: Bool? = nil, protectedTags: [String]? = nil, receipts: Bool? = nil, quietHours: QuietHoursSetting? = nil,
        frequencyCap: FrequencyCapSetting? = nil, throttlePerMinute: Int? = nil, unboundAssertions: Bool? = nil,
        rateLimits: AppRateLimitsSetting? = nil
    ) {
        self.rateLimits = rateLimits
        self.unboundAssertions = unboundAssertions
        self.throttlePerMinute = throttlePerMinute
        self.frequencyCap = frequencyCap
        self.quietHours = quietHours
        self.receipts = receipts
        self.userVerification = userVerification
        self.protectedTags = protectedTags
    }
}

/// An app's quiet hours: from `start` to `end` (`HH:MM`, 24-hour) in each device's time zone (UTC
/// for a device without one); a window whose end is earlier than its start goes over midnight.
/// Alerts that are not `time-sensitive` or `critical` wait until it ends.
public struct QuietHoursSetting: Sendable, Hashable, Codable {
    public var start: String?
    public var end: String?

    public init(start: String? = nil, end: String? = nil) {
        self.start = start
        self.end = end
    }
}

/// An app's frequency cap: at most `limit` alerts (1 to 1000) to one person (a user; a device
/// without one by itself) in any `windowSeconds` (60 to 2592000, rolling), per app or, with
/// `perCategory`, per app and `aps.category`.
public struct FrequencyCapSetting: Sendable, Hashable, Codable {
    public var limit: Int?
    public var windowSeconds: Int64?
    public var perCategory: Bool?

    public init(limit: Int? = nil, windowSeconds: Int64? = nil, perCategory: Bool? = nil) {
        self.limit = limit
        self.windowSeconds = windowSeconds
        self.perCategory = perCategory
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
    /// The device token (or other platform's identifier) the assertion may bind, as the app will
    /// register it: its hash becomes the `tkh` claim. Required unless the app still accepts
    /// unbound assertions.
    public var token: String?
    /// Seconds until it expires: 1 to 3600, default 600.
    public var ttl: Int64?

    public init(userId: String, token: String? = nil, ttl: Int64? = nil) {
        self.userId = userId
        self.token = token
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
    /// For `fcm`: the Firebase service account's key file, the JSON object as the Firebase
    /// console hands it out (the only field then).
    public var serviceAccount: JSON?

    public init(
        keyId: String? = nil, teamId: String? = nil, privateKey: String? = nil, restrictedTo: String? = nil, certificate: String? = nil,
        pkcs12: String? = nil, passphrase: String? = nil, serviceAccount: JSON? = nil
    ) {
        self.serviceAccount = serviceAccount
        self.keyId = keyId
        self.teamId = teamId
        self.privateKey = privateKey
        self.restrictedTo = restrictedTo
        self.certificate = certificate
        self.pkcs12 = pkcs12
        self.passphrase = passphrase
    }
}

/// An app's own rate limits, each `BURST/PER_SECOND` (`"100/10"`: a burst of 100, then 10 a
/// second): `register`, `receipt` and `send`, the app's whole rate of each across its keys and
/// addresses; `registerPerAddress`, its register key's limit per client address (it only
/// tightens the server's). In a `PATCH`, `"0"` removes one and a field left out is kept.
public struct AppRateLimitsSetting: Sendable, Hashable, Codable {
    public var register: String?
    public var registerPerAddress: String?
    public var receipt: String?
    public var send: String?

    public init(register: String? = nil, registerPerAddress: String? = nil, receipt: String? = nil, send: String? = nil) {
        self.register = register
        self.registerPerAddress = registerPerAddress
        self.receipt = receipt
        self.send = send
    }
}

/// An app's deletion under way.
public struct AppDeletionStatus: Sendable, Hashable, Codable {
    /// When it began (ms since 1970).
    public var since: Int64
    /// The app's rows deleted so far.
    public var deletedRows: Int64

    public init(since: Int64, deletedRows: Int64) {
        self.since = since
        self.deletedRows = deletedRows
    }
}

/// `GET /v1/apps/{app}/webpush/key` (register keys and above): the app's VAPID public key, the
/// `applicationServerKey` a page subscribes with; `POST` (admin) replaces it with a new one.
public struct WebPushKeyResponse: Sendable, Hashable, Codable {
    /// The uncompressed P-256 point (65 octets), unpadded base64url.
    public var publicKey: String

    public init(publicKey: String) {
        self.publicKey = publicKey
    }
}

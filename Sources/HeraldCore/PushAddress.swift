// SPDX-License-Identifier: Apache-2.0
package import APNSModels
import Crypto

/// The push service a device is reached through: APNs (every kind of Apple token), Firebase
/// Cloud Messaging, or a browser's Web Push service (RFC 8030). The delivery engine has one transport per case; the registry, policies,
/// templates and receipts do not care which.
package enum Transport: String, Sendable, Hashable, CaseIterable, Comparable {
    case apns
    case fcm
    case webpush

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The routes of this transport, as the `environment` columns hold them.
    package var routes: [Route] {
        switch self {
        case .apns: APNSEnvironment.allCases.map(Route.apns)
        case .fcm: [.fcm]
        case .webpush: [.webpush]
        }
    }

    /// `d.environment IN (…)` for these transports (Herald's own constants, spelled into the SQL);
    /// nil when every transport is in: no condition needed.
    package static func routeCondition(_ transports: Set<Transport>, column: String = "d.environment") -> String? {
        guard !transports.isEmpty, transports != Set(Self.allCases) else { return nil }
        let values = transports.sorted().flatMap(\.routes).map { "'\($0.stored)'" }
        return "\(column) IN (\(values.joined(separator: ", ")))"
    }
}

/// Where one device's pushes go: APNs in one of its environments, or FCM. The devices' and
/// deliveries' `environment` column holds ``stored``.
package enum Route: Sendable, Hashable, CustomStringConvertible {
    case apns(APNSEnvironment)
    case fcm
    case webpush

    package init?(stored: String) {
        switch stored {
        case "fcm": self = .fcm
        case "webpush": self = .webpush
        default:
            guard let environment = APNSEnvironment(rawValue: stored) else { return nil }
            self = .apns(environment)
        }
    }

    package var stored: String {
        switch self {
        case .apns(let environment): environment.rawValue
        case .fcm: "fcm"
        case .webpush: "webpush"
        }
    }

    package var transport: Transport {
        switch self {
        case .apns: .apns
        case .fcm: .fcm
        case .webpush: .webpush
        }
    }

    /// The APNs environment, for an APNs route.
    package var apnsEnvironment: APNSEnvironment? {
        if case .apns(let environment) = self { environment } else { nil }
    }

    package var description: String { self.stored }
}

/// A device's address on its push service, as the registry stores it (`devices.token`) and the
/// API names the device: an APNs token in lowercase hex; an FCM registration token as
/// `fcm:<token>`; a Firebase Installation ID as `fid:<FID>`; a Web Push subscription as
/// `wp:<base64url of the SHA-256 of its endpoint>` (the endpoint itself, a capability URL, is
/// kept with the subscription's keys, ``WebSubscription``, and never named in a URL or a list).
/// The prefixes keep one column for every platform without two platforms' identifiers ever
/// meeting.
package struct PushAddress: Sendable, Hashable, CustomStringConvertible {
    package let route: Route
    /// The stored form (see the type's documentation).
    package let stored: String
    /// A Web Push address made from its subscription: the endpoint, what the app holds.
    private let endpoint: String?

    private init(route: Route, stored: String, endpoint: String? = nil) {
        self.route = route
        self.stored = stored
        self.endpoint = endpoint
    }

    /// A Web Push subscription's address: `wp:` and the hash of its endpoint.
    package static func webPush(endpoint: String) -> PushAddress {
        PushAddress(route: .webpush, stored: WebSubscription.addressPrefix + WebSubscription.endpointHash(endpoint), endpoint: endpoint)
    }

    /// An APNs token in `environment`.
    package static func apns(_ token: DeviceToken, environment: APNSEnvironment) -> PushAddress {
        PushAddress(route: .apns(environment), stored: token.hex)
    }

    /// An FCM registration token as the app got it from `onNewToken` (`bad_fcm_token`).
    package static func fcmToken(_ token: String) throws(HeraldError) -> PushAddress {
        guard FCMIdentifier.isRegistrationToken(token) else {
            throw HeraldError.invalid(
                "token is not an FCM registration token (32 to 4096 characters of A-Z, a-z, 0-9, '-', '_' and ':')", code: "bad_fcm_token")
        }
        return PushAddress(route: .fcm, stored: FCMIdentifier.tokenPrefix + token)
    }

    /// A Firebase Installation ID (`bad_fid`).
    package static func fcmInstallation(_ fid: String) throws(HeraldError) -> PushAddress {
        guard FCMIdentifier.isInstallationID(fid) else {
            throw HeraldError.invalid("fid is not a Firebase Installation ID (22 characters of base64url, the first c, d, e or f)", code: "bad_fid")
        }
        return PushAddress(route: .fcm, stored: FCMIdentifier.installationPrefix + fid)
    }

    /// An address read back from the registry (its columns as Herald wrote them).
    package init(stored: String, route: Route) {
        self.init(route: route, stored: stored)
    }

    /// The stored form of an identifier as the API takes it (a path segment, a token in an
    /// audience list): FCM's prefixed forms as they are, hex in any case lowercased; nil for
    /// anything else.
    package static func storedIdentifier(_ text: String) -> String? {
        if text.hasPrefix(FCMIdentifier.tokenPrefix) {
            return FCMIdentifier.isRegistrationToken(String(text.dropFirst(FCMIdentifier.tokenPrefix.count))) ? text : nil
        }
        if text.hasPrefix(FCMIdentifier.installationPrefix) {
            return FCMIdentifier.isInstallationID(String(text.dropFirst(FCMIdentifier.installationPrefix.count))) ? text : nil
        }
        if text.hasPrefix(WebSubscription.addressPrefix) {
            return WebSubscription.isEndpointHash(text.dropFirst(WebSubscription.addressPrefix.count)) ? text : nil
        }
        return (try? DeviceToken(hex: text))?.hex
    }

    /// What the app itself holds: the hex token, the FCM token or the FID, without a prefix; a
    /// browser's subscription endpoint (for an address made from one). A user assertion's `tkh`
    /// is the hash of this.
    package var appIdentifier: String {
        switch self.route {
        case .apns: self.stored
        case .fcm: Self.fcmTarget(stored: self.stored).map { String($0.value) } ?? self.stored
        case .webpush: self.endpoint ?? self.stored
        }
    }

    /// For an FCM address in its stored form: the message's target field (`token` or `fid`) and
    /// its value.
    package static func fcmTarget(stored: String) -> (field: String, value: Substring)? {
        if stored.hasPrefix(FCMIdentifier.installationPrefix) {
            return ("fid", stored.dropFirst(FCMIdentifier.installationPrefix.count))
        }
        if stored.hasPrefix(FCMIdentifier.tokenPrefix) {
            return ("token", stored.dropFirst(FCMIdentifier.tokenPrefix.count))
        }
        return nil
    }

    package var description: String { "\(self.route):\(self.stored.prefix(12))…" }
}

/// The shapes of FCM's identifiers, as far as a sender can tell them apart.
package enum FCMIdentifier {
    package static let tokenPrefix = "fcm:"
    package static let installationPrefix = "fid:"

    /// An FCM registration token: opaque, but made of base64url characters and colons (today
    /// about 160 of them); 32 to 4096 accepted.
    package static func isRegistrationToken(_ text: String) -> Bool {
        let utf8 = text.utf8
        return (32...4096).contains(utf8.count) && utf8.allSatisfy { Self.isBase64URL($0) || $0 == UInt8(ascii: ":") }
    }

    /// A Firebase Installation ID: 22 base64url characters (128 bits, the first four 0111),
    /// so its first character is c, d, e or f.
    package static func isInstallationID(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 22, let first = utf8.first, (UInt8(ascii: "c")...UInt8(ascii: "f")).contains(first) else { return false }
        return utf8.allSatisfy(Self.isBase64URL)
    }

    package static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}

extension Route {
    /// APNs's sandbox.
    package static var development: Route { .apns(.development) }
    /// APNs's production environment.
    package static var production: Route { .apns(.production) }
}

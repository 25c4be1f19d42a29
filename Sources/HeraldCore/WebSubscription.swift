// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto

/// A browser's Web Push subscription as the registry keeps it: its push resource (`endpoint`)
/// and the keys its messages are encrypted to (RFC 8291: `p256dh`, the browser's P-256 public
/// key, and `auth`, its 16-octet secret). The keys are the device's own end-to-end keys, so
/// the subscription is held where other devices hold their public key (`public_key`, with
/// `public_key_type` ``keyType``): written in the registration's own statement, read by the
/// claim for the deliveries that need it, and never shown whole (``maskedEndpoint``).
package struct WebSubscription: Sendable, Hashable {
    package static let keyType = "webpush"
    package static let addressPrefix = "wp:"
    /// RFC 8030 endpoints are short; UnifiedPush caps them at 1,000 octets.
    package static let maximumEndpointLength = 2048

    package var endpoint: String
    /// 65 octets, an uncompressed P-256 point (checked by the API before it gets here).
    package var p256dh: [UInt8]
    /// 16 octets.
    package var auth: [UInt8]

    package init(endpoint: String, p256dh: [UInt8], auth: [UInt8]) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    /// Read from a device's stored key: `p256dh ‖ auth ‖ endpoint` under type ``keyType``.
    package init?(_ key: DevicePublicKey) {
        guard key.type == Self.keyType, key.key.count > 81, let endpoint = String(validating: key.key[81...], as: UTF8.self) else {
            return nil
        }
        self.init(endpoint: endpoint, p256dh: Array(key.key[0..<65]), auth: Array(key.key[65..<81]))
    }

    /// The stored form (``init(_:)``).
    package var publicKey: DevicePublicKey {
        DevicePublicKey(type: Self.keyType, key: self.p256dh + self.auth + Array(self.endpoint.utf8))
    }

    /// The registration of this subscription: its address (``PushAddress/webPush(endpoint:)``)
    /// with its keys as the device's public key.
    package func registration(_ common: DeviceRegistration) -> DeviceRegistration {
        var registration = common
        registration.address = .webPush(endpoint: self.endpoint)
        registration.publicKey = self.publicKey.key
        registration.publicKeyType = Self.keyType
        return registration
    }

    /// The endpoint as lists and pages may show it: its origin and the first characters of its path.
    package var maskedEndpoint: String { Self.masked(self.endpoint) }

    package static func masked(_ endpoint: String) -> String {
        // After `scheme://`, the first `/` starts the path.
        let utf8 = Array(endpoint.utf8)
        var slashes = 0
        var cut: Int?
        for (index, byte) in utf8.enumerated() where byte == UInt8(ascii: "/") {
            slashes += 1
            if slashes == 3 {
                cut = index
                break
            }
        }
        guard let cut else { return String(endpoint.prefix(12)) + "…" }
        let path = utf8[cut...]
        return String(decoding: utf8[..<cut], as: UTF8.self) + String(decoding: path.prefix(8), as: UTF8.self) + (path.count > 8 ? "…" : "")
    }

    /// The hash of an endpoint that names its subscription (43 base64url characters).
    package static func endpointHash(_ endpoint: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(endpoint.utf8))))
    }

    package static func isEndpointHash(_ text: Substring) -> Bool {
        text.utf8.count == 43 && text.utf8.allSatisfy(FCMIdentifier.isBase64URL)
    }
}

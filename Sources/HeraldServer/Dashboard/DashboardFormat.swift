// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldCore

/// How the dashboard writes values as text: times, numbers, JSON, path segments, reasons. Plain
/// text, never markup: the templates escape it.
enum DashboardFormat {
    /// A path segment, percent-encoded (the template escapes it for the attribute).
    static func path(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? segment
    }

    static func time(_ milliseconds: Int64) -> String {
        // A format style, not a formatter made per call: a delivery log renders up to 1000 of these.
        let text = Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
        return String(text.replacingOccurrences(of: "T", with: " ").dropLast())
    }

    static func clock(_ milliseconds: Int64) -> String {
        String(Self.time(milliseconds).suffix(8).prefix(5))
    }

    /// A message as a sentence: a capital first letter and a full stop.
    static func sentence(_ message: String) -> String {
        var text = message.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let first = text.first else { return text }
        text = first.uppercased() + text.dropFirst()
        if let last = text.last, !".!?:".contains(last) { text += "." }
        return text
    }

    static func number(_ value: Double) -> String { String(format: "%.1f", value) }

    static func pretty(_ value: JSONValue, indent: String = "") -> String {
        let inner = indent + "  "
        switch value {
        case .object(let members):
            guard !members.isEmpty else { return "{}" }
            return "{\n"
                + members.map {
                    inner + String(decoding: JSONValue.string($0.0).serialized(), as: UTF8.self) + ": " + Self.pretty($0.1, indent: inner)
                }.joined(separator: ",\n") + "\n" + indent + "}"
        case .array(let items):
            guard !items.isEmpty else { return "[]" }
            return "[\n" + items.map { inner + Self.pretty($0, indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        default:
            return String(decoding: value.serialized(), as: UTF8.self)
        }
    }

    static func environmentName(_ raw: String) -> String {
        raw == APNSEnvironment.development.rawValue ? "sandbox" : raw == APNSEnvironment.production.rawValue ? "production" : raw
    }

    static func environmentName(_ environment: APNSEnvironment) -> String {
        environment == .development ? "sandbox" : "production"
    }

    /// A device's or a delivery's platform as the dashboard shows it: `apns`, `fcm`, or `Web` for
    /// a browser's Web Push subscription (transport `webpush`).
    static func platform(_ transport: Transport) -> String {
        transport == .webpush ? "Web" : transport.rawValue
    }

    /// A device's route as the dashboard shows it: `sandbox`, `production` (APNs), `fcm` or `webpush`.
    static func routeName(_ route: Route) -> String {
        route.apnsEnvironment.map(Self.environmentName) ?? route.stored
    }

    /// A failure reason in plain words, with the usual fix.
    static func explain(_ reason: String) -> String {
        let code = reason.split(separator: " ").first.map(String.init) ?? reason
        switch code {
        case "BadDeviceToken":
            return
                "Wrong environment, or not a token: a sandbox (development) token sent to production or the reverse. Register the device with the environment its build uses."
        case "DeviceTokenNotForTopic":
            return
                "Wrong topic: the token belongs to another app (bundle id) or another kind of token. Check the app's bundle id and the token's kind."
        case "Unregistered":
            return "Uninstalled: the app was removed or its token is no longer active. The device was marked inactive."
        case "ExpiredToken":
            return "The token expired: the app must register again for a new one."
        case "TopicDisallowed", "BadTopic", "MissingTopic":
            return "Wrong topic for these credentials: the key's team or the certificate does not cover this bundle id and push type."
        case "InvalidProviderToken", "ExpiredProviderToken", "MissingProviderToken":
            return
                "The signing key is not accepted: check the key id, team id and .p8 key of this app and environment, and that the key is not revoked."
        case "BadCertificate", "BadCertificateEnvironment":
            return "The certificate is for the other environment or not accepted: upload the certificate for this environment."
        case "PayloadTooLarge":
            return "The payload is over APNs's limit for this push type: shorten it."
        case "TooManyProviderTokenUpdates":
            return "The signing token was renewed too often: Herald renews it every 50 minutes; another sender may share the key."
        case "TooManyRequests":
            return "Too many pushes to this one device in a short time: APNs throttles; Herald retried later."
        case "InternalServerError", "ServiceUnavailable", "Shutdown":
            return "APNs had trouble: Herald retried with back-off."
        case "NoEncryptionKey":
            return "End-to-end encrypted, but the device registered no public key: register it with publicKey."
        case "Forbidden":
            return "APNs refused this credential for this request."
        // FCM's (Android) codes.
        case "UNREGISTERED":
            return "Uninstalled (FCM): the app was removed or its registration token is no longer valid. The device was marked inactive."
        case "INVALID_ARGUMENT":
            return
                "FCM refused the message or the token: an invalid registration token marks the device inactive; anything else is the message's to fix."
        case "SENDER_ID_MISMATCH":
            return "Wrong Firebase project: the token belongs to another project than the app's service account."
        case "THIRD_PARTY_AUTH_ERROR":
            return "FCM could not reach APNs or web push for this token: check the Firebase project's APNs key."
        case "PERMISSION_DENIED", "NOT_FOUND", "credentials_unusable":
            return "The FCM service account is not accepted for this project: check it on the app's page (Check FCM)."
        case "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED":
            return "FCM's sending quota was exceeded: Herald retried later."
        case "UNAVAILABLE", "INTERNAL", "UNAUTHENTICATED":
            return "FCM had trouble (or the access token expired): Herald retried with back-off."
        case "NoFCMPart":
            return "The notification had nothing for FCM: send one FCM can carry (alert or background, no Apple-only fields)."
        default:
            return "Refused (\(reason))."
        }
    }
}

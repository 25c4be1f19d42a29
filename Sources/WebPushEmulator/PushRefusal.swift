// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// Why a push was refused, independent of who answers; ``answer(as:)`` writes it the way each
/// real service does. The table is in `docs/webpush-emulator.md`.
enum PushRefusal: Error, Sendable, Hashable {
    /// No subscription with that token was ever issued.
    case unknownSubscription
    /// The subscription existed and was unsubscribed (`DELETE`, Firefox's `unregister`).
    case unsubscribed
    /// A restricted subscription and no `Authorization` header.
    case missingAuthorization
    /// `Authorization` is not `vapid t=…, k=…` (or `WebPush` + `Crypto-Key: p256ecdsa=`).
    case badAuthorization(String)
    /// `k` is not base64url of an uncompressed P-256 point.
    case badVAPIDKey
    /// The JWT: signature, `aud`, `exp` or `sub` (the detail says which).
    case badJWT(String)
    /// `k` is not the subscription's `applicationServerKey`.
    case vapidKeyMismatch
    case missingTTL
    case badTTL
    case badUrgency
    case badTopic
    /// `Content-Encoding` missing or not `aes128gcm`, or `aes128gcm` with `Encryption: salt=` /
    /// `Crypto-Key: dh=`.
    case badEncoding(String)
    case payloadTooLarge
    /// The body's `aes128gcm` header is malformed (Apple only; the others relay it).
    case badFraming(String)
    case methodNotAllowed
    /// An injected fault.
    case fault(status: Int, retryAfter: Int?)

    /// The key of the refused counter.
    var counterKey: String {
        switch self {
        case .unknownSubscription: "unknownSubscription"
        case .unsubscribed: "unsubscribed"
        case .missingAuthorization: "missingAuthorization"
        case .badAuthorization: "badAuthorization"
        case .badVAPIDKey: "badVAPIDKey"
        case .badJWT: "badJWT"
        case .vapidKeyMismatch: "vapidKeyMismatch"
        case .missingTTL: "missingTTL"
        case .badTTL: "badTTL"
        case .badUrgency: "badUrgency"
        case .badTopic: "badTopic"
        case .badEncoding: "badEncoding"
        case .payloadTooLarge: "payloadTooLarge"
        case .badFraming: "badFraming"
        case .methodNotAllowed: "methodNotAllowed"
        case .fault(let status, _): "fault\(status)"
        }
    }

    /// Apple's `reason`, Mozilla's `errno` and the HTTP status for each personality.
    private var table: (status: (apple: Int, mozilla: Int, fcm: Int), reason: String, errno: Int, message: String) {
        switch self {
        case .unknownSubscription:
            ((404, 404, 404), "BadPath", 102, "Request did not validate invalid token")
        case .unsubscribed:
            ((410, 410, 410), "Unregistered", 106, "push subscription has unsubscribed or expired.")
        case .missingAuthorization:
            ((403, 401, 401), "BadAuthorizationHeader", 109, "Missing Authorization header")
        case .badAuthorization(let detail):
            ((403, 401, 401), "BadAuthorizationHeader", 109, "Invalid Authorization header: \(detail)")
        case .badVAPIDKey:
            ((403, 401, 401), "BadVapidPublicKey", 109, "Invalid VAPID public key")
        case .badJWT(let detail):
            ((403, 401, 403), "BadJwtToken", 109, "Invalid JWT: \(detail)")
        case .vapidKeyMismatch:
            (
                (403, 401, 403), "VapidPkHashMismatch", 109,
                "the VAPID credentials in the authorization header do not correspond to the credentials used to create the subscriptions."
            )
        case .missingTTL:
            ((400, 400, 400), "BadTtl", 111, "Missing TTL header")
        case .badTTL:
            ((400, 400, 400), "BadTtl", 112, "Invalid TTL header value")
        case .badUrgency:
            ((400, 400, 400), "BadUrgency", 114, "Invalid Urgency header value")
        case .badTopic:
            ((400, 400, 400), "BadWebPushTopic", 113, "Topic must be no greater than 32 characters of the URL and Filename safe Base64 alphabet")
        case .badEncoding(let detail):
            ((400, 400, 400), "BadWebPushRequest", 110, detail)
        case .payloadTooLarge:
            ((413, 413, 413), "PayloadTooLarge", 104, "Data payload too large")
        case .badFraming(let detail):
            ((400, 400, 400), "BadWebPushRequest", 110, "Invalid aes128gcm body: \(detail)")
        case .methodNotAllowed:
            ((405, 405, 405), "MethodNotAllowed", 999, "Method not allowed")
        case .fault(let status, _):
            switch status {
            case 429: ((429, 429, 429), "TooManyRequests", 201, "Too many requests")
            case 500: ((500, 500, 500), "InternalServerError", 999, "An internal error occurred")
            case 503: ((503, 503, 503), "ServiceUnavailable", 201, "Service temporarily unavailable")
            default: ((status, status, status), "InternalServerError", 999, "Injected fault")
            }
        }
    }

    func answer(as personality: WebPushPersonality, apnsID: String) -> PushAnswer {
        let table = self.table
        var headers: [(String, String)] = []
        if case .fault(_, let retryAfter?) = self { headers.append(("retry-after", String(retryAfter))) }
        switch personality {
        case .apple:
            headers.append(("apns-id", apnsID))
            return PushAnswer(
                status: table.status.apple, headers: headers, contentType: "application/json",
                body: JSONValue.object([("reason", .string(table.reason))]).serialized()
            )
        case .mozilla:
            let status = table.status.mozilla
            let body = JSONValue.object([
                ("code", .int(Int64(status))), ("errno", .int(Int64(table.errno))), ("error", .string(Self.phrase(status))),
                ("message", .string(table.message)),
                ("more_info", "http://autopush.readthedocs.io/en/latest/http.html#error-codes"),
            ])
            return PushAnswer(status: status, headers: headers, contentType: "application/json", body: body.serialized())
        case .fcm:
            return PushAnswer(
                status: table.status.fcm, headers: headers, contentType: "text/plain; charset=utf-8",
                body: Array((table.message + "\n").utf8)
            )
        }
    }

    static func phrase(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 410: "Gone"
        case 413: "Payload Too Large"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Error"
        }
    }
}

/// An HTTP answer to a push request.
struct PushAnswer: Sendable {
    var status: Int
    /// Lower-case names.
    var headers: [(String, String)]
    var contentType: String?
    var body: [UInt8]
}

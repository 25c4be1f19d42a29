// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// What FCM (or the way to it) answered instead of a message id.
public struct FCMError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status; nil when no answer came.
    public var status: Int?
    /// FCM's `errorCode` (`UNREGISTERED`, `QUOTA_EXCEEDED`, …), else the canonical status
    /// (`UNAUTHENTICATED`, `PERMISSION_DENIED`, …), else one of Herald's (`connection_failed`,
    /// `timeout`, `token_grant_failed`, `credentials_unusable`).
    public var code: String
    public var message: String
    /// The answer's `Retry-After`, in seconds.
    public var retryAfterSeconds: Int64?
    /// The request was written and no answer came: FCM may have delivered it.
    public var outcomeUnknown = false

    public init(status: Int?, code: String, message: String, retryAfterSeconds: Int64? = nil, outcomeUnknown: Bool = false) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.outcomeUnknown = outcomeUnknown
    }

    /// What a sender does about it, as FCM documents each code.
    public enum Action: Sendable, Hashable {
        /// The address is dead: stop sending to it.
        case invalidate
        /// The project's configuration is wrong (key, sender, API disabled): fix, do not retry.
        case configuration
        /// The message is wrong: fix, do not retry.
        case refuse
        /// It may succeed later (after `Retry-After` when given, with back-off and jitter).
        case retry
    }

    public var action: Action {
        switch self.code {
        case "UNREGISTERED": return .invalidate
        case "INVALID_ARGUMENT":
            // An invalid registration token is dead; any other invalid argument is the message's fault.
            return self.message.contains("registration token") ? .invalidate : .refuse
        case "SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR", "PERMISSION_DENIED", "NOT_FOUND", "credentials_unusable":
            return .configuration
        case "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "UNAUTHENTICATED", "connection_failed", "timeout",
            "token_grant_failed":
            return .retry
        default:
            guard let status = self.status else { return .retry }
            return status == 429 || status >= 500 ? .retry : .refuse
        }
    }

    public var description: String {
        "\(self.code)\(self.status.map { " (\($0))" } ?? ""): \(self.message)"
    }

    /// Reads Google's error envelope (`{"error":{"code","message","status","details":[…]}}`).
    static func parse(status: Int, body: [UInt8], retryAfter: String?) -> FCMError {
        let error = (try? JSONValue.parse(body))?["error"]
        var code = error?["status"]?.stringValue ?? "HTTP_\(status)"
        for detail in error?["details"]?.arrayValue ?? [] {
            if let type = detail["@type"]?.stringValue, type.hasSuffix("FcmError"), let errorCode = detail["errorCode"]?.stringValue {
                code = errorCode
            }
        }
        let message = error?["message"]?.stringValue ?? "FCM answered \(status)"
        return FCMError(
            status: status, code: code, message: String(message.prefix(300)),
            retryAfterSeconds: retryAfter.flatMap { Int64($0.trimmingPrefix(" ")) }
        )
    }
}

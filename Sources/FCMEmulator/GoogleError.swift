// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// A refused FCM request, written as Google's error envelope:
/// `{"error":{"code":…,"message":…,"status":…,"details":[…]}}`.
struct GoogleError: Error, Sendable {
    var code: Int
    var message: String
    var status: String
    /// The `google.firebase.fcm.v1.FcmError` detail's `errorCode`, if any.
    var errorCode: String?
    /// A `google.rpc.BadRequest` detail's violations (`field`, `description`).
    var fieldViolations: [(field: String, description: String)] = []
    /// Put the BadRequest detail before the FcmError one (as FCM does for a missing recipient).
    var badRequestFirst = false
    /// Other details, written as they are (ErrorInfo, QuotaFailure).
    var otherDetails: [JSONValue] = []
    var headers: [(String, String)] = []

    /// The key the refused-sends counter uses.
    var counterKey: String { self.errorCode ?? self.status }

    var json: JSONValue {
        var details: [JSONValue] = []
        let fcm: JSONValue? = self.errorCode.map {
            .object([("@type", "type.googleapis.com/google.firebase.fcm.v1.FcmError"), ("errorCode", .string($0))])
        }
        let badRequest: JSONValue? =
            self.fieldViolations.isEmpty
            ? nil
            : .object([
                ("@type", "type.googleapis.com/google.rpc.BadRequest"),
                (
                    "fieldViolations",
                    .array(self.fieldViolations.map { .object([("field", .string($0.field)), ("description", .string($0.description))]) })
                ),
            ])
        if self.badRequestFirst {
            details += [badRequest, fcm].compactMap { $0 }
        } else {
            details += [fcm, badRequest].compactMap { $0 }
        }
        details += self.otherDetails
        var error: [(String, JSONValue)] = [
            ("code", .int(Int64(self.code))), ("message", .string(self.message)), ("status", .string(self.status)),
        ]
        if !details.isEmpty { error.append(("details", .array(details))) }
        return .object([("error", .object(error))])
    }

    // MARK: the usual ones

    /// A JSON shape error, as Google's JSON-to-proto layer reports it: only a BadRequest detail.
    static func transcoding(_ message: String, field: String) -> GoogleError {
        GoogleError(code: 400, message: message, status: "INVALID_ARGUMENT", fieldViolations: [(field, message)])
    }

    /// An FCM argument error: FcmError `INVALID_ARGUMENT`, and a BadRequest when a field is named.
    static func invalidArgument(_ message: String, field: String? = nil, description: String? = nil) -> GoogleError {
        GoogleError(
            code: 400, message: message, status: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT",
            fieldViolations: field.map { [($0, description ?? message)] } ?? []
        )
    }

    static let invalidRegistration = GoogleError(
        code: 400, message: "The registration token is not a valid FCM registration token", status: "INVALID_ARGUMENT",
        errorCode: "INVALID_ARGUMENT"
    )

    static let unregistered = GoogleError(code: 404, message: "Requested entity was not found.", status: "NOT_FOUND", errorCode: "UNREGISTERED")

    static let senderIDMismatch = GoogleError(code: 403, message: "SenderId mismatch", status: "PERMISSION_DENIED", errorCode: "SENDER_ID_MISMATCH")

    /// What FCM was observed to answer for a payload over the limit: a bare envelope.
    static let messageTooBig = GoogleError(code: 400, message: "Request contains an invalid argument.", status: "INVALID_ARGUMENT")

    static func errorInfo(reason: String, domain: String, metadata: [(String, String)]) -> JSONValue {
        .object([
            ("@type", "type.googleapis.com/google.rpc.ErrorInfo"), ("reason", .string(reason)), ("domain", .string(domain)),
            ("metadata", .object(metadata.map { ($0.0, .string($0.1)) })),
        ])
    }

    /// 401 for a missing, unknown or expired bearer token.
    static func unauthenticated(reason: String) -> GoogleError {
        GoogleError(
            code: 401,
            message: "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other "
                + "valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
            status: "UNAUTHENTICATED",
            otherDetails: [
                Self.errorInfo(
                    reason: reason, domain: "googleapis.com",
                    metadata: [("service", "fcm.googleapis.com"), ("method", "google.firebase.fcm.v1.FcmService.SendMessage")]
                )
            ],
            headers: [("www-authenticate", "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\"")]
        )
    }

    /// 403 for a token of another project's service account.
    static func permissionDenied(project: String) -> GoogleError {
        GoogleError(
            code: 403,
            message: "Permission 'cloudmessaging.messages.create' denied on resource "
                + "'//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).",
            status: "PERMISSION_DENIED",
            otherDetails: [
                Self.errorInfo(
                    reason: "IAM_PERMISSION_DENIED", domain: "cloudresourcemanager.googleapis.com",
                    metadata: [("permission", "cloudmessaging.messages.create"), ("resource", "projects/\(project)")]
                )
            ]
        )
    }

    static func notFound(_ path: String) -> GoogleError {
        GoogleError(code: 404, message: "Method not found: \(path)", status: "NOT_FOUND")
    }

    /// The answer an injected `.status(code, retryAfter:)` fault gives.
    static func fault(status code: Int, retryAfter: Int?) -> GoogleError {
        let (status, errorCode, message): (String, String?, String) =
            switch code {
            case 400: ("INVALID_ARGUMENT", "INVALID_ARGUMENT", "Request contains an invalid argument.")
            case 401: ("UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "Auth error from APNS or Web Push Service")
            case 403: ("PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch")
            case 404: ("NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
            case 429:
                (
                    "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED",
                    "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute per project'."
                )
            case 500: ("INTERNAL", "INTERNAL", "Internal error encountered.")
            case 503: ("UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.")
            case 504: ("DEADLINE_EXCEEDED", nil, "The request deadline was exceeded.")
            default: ("UNKNOWN", "UNSPECIFIED_ERROR", "Unknown error.")
            }
        var error = GoogleError(code: code, message: message, status: status, errorCode: errorCode)
        if let retryAfter { error.headers.append(("retry-after", String(retryAfter))) }
        return error
    }
}

/// A refused OAuth token request: `{"error": …, "error_description": …}` with status 400.
struct OAuthError: Error, Sendable {
    var error: String
    var description: String

    var json: JSONValue { .object([("error", .string(self.error)), ("error_description", .string(self.description))]) }

    static let invalidSignature = OAuthError(error: "invalid_grant", description: "Invalid JWT Signature.")
    static let badTime = OAuthError(
        error: "invalid_grant",
        description: "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
            + "Check your iat and exp values in the JWT claim."
    )
}

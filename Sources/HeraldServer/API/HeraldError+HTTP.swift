// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HTTPTypes
import HeraldAPI
package import HeraldCore
package import Hummingbird
import Logging
import NIOCore

/// The one place where an error code becomes an HTTP status: each code has exactly one.
extension HeraldError: HTTPResponseError {
    /// 422: well-formed, but cannot be sent as asked (APNs rules, sizes, unusable credentials).
    static let unprocessableCodes: Set<String> = [
        "bad_priority", "bad_key", "bad_certificate", "payload_too_large", "payload_empty", "payload_not_json", "payload_rule",
        "encrypt_not_allowed", "no_credentials", "no_vapid_key", "no_user_secret", "credentials_unusable", "push_type_not_allowed_for_auth",
        "topic_suffix_mismatch",
        // Channels: Apple's limit (counted here, or Apple's CannotCreateChannelConfig), the Broadcast
        // capability missing (FeatureNotEnabled), and any other refusal of APNs (its reason in the message).
        "channel_limit_reached", "broadcast_not_enabled", "apns_rejected",
        // Live Activities: a start whose audience holds no push-to-start token.
        "no_push_to_start_tokens",
    ]
    /// 400 beyond the `bad_…` and `missing_…` families.
    static let badRequestCodes: Set<String> = [
        "invalid_json", "invalid_request", "unknown_field", "duplicate_field", "empty_notification", "app_required",
        "template_invalid", "template_variable_missing", "template_variable_invalid", "template_unknown", "template_conflict",
        "unknown_channel",
        // FCM: what FCM would refuse of a message, refused at accept; what only APNs carries, sent to FCM.
        "fcm_data_not_string", "fcm_reserved_key", "fcm_too_large", "transport_not_supported",
        // Web Push: a subscription on a push service Herald does not post to; what a browser
        // would not show (no title) or one encrypted record cannot carry.
        "endpoint_not_allowed", "webpush_needs_title", "webpush_too_large",
    ]

    static func status(forCode code: String) -> HTTPResponse.Status {
        switch code {
        case "unauthorized", "key_expired": return .unauthorized
        case "forbidden", "tag_protected", "receipts_disabled", "user_assertion_required", "user_assertion_invalid", "user_assertion_wrong_app",
            "user_assertion_wrong_user", "user_assertion_expired", "user_assertion_too_long", "user_assertion_wrong_device", "user_assertion_unbound",
            "key_confined":
            return .forbidden
        case "not_found", "channel_not_found", "activity_not_found": return .notFound
        case "method_not_allowed": return .methodNotAllowed
        case "body_too_large": return .contentTooLarge
        case "conflict", "app_exists", "last_admin_key", "activity_ended", "activity_busy", "channel_in_use": return .conflict
        case "rate_limited": return .tooManyRequests
        // APNs did not answer, or answered 429 or 5xx: worth trying again later.
        case "database_unavailable", "store_unavailable", "apns_unavailable": return .serviceUnavailable
        // The server's own configuration (read at start): a fault of the server, never of a request.
        case "bad_master_key", "master_key_required", "bad_database_url": return .internalServerError
        case _ where Self.unprocessableCodes.contains(code): return .unprocessableContent
        case _ where Self.badRequestCodes.contains(code) || code.hasPrefix("bad_") || code.hasPrefix("missing_"): return .badRequest
        default: return .internalServerError
        }
    }

    package var status: HTTPResponse.Status { Self.status(forCode: self.code) }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        API.json(self.status, self.jsonBody)
    }

    /// What a request that failed on something other than a Herald error is answered (after the failure is logged).
    static let internalFailure = HeraldError(code: "internal_error", "the server failed to handle the request")

    /// The error's JSON: `{"error": {"code", "message"}}`.
    var jsonBody: [UInt8] {
        (try? APIJSONEncoder().encode(APIErrorBody(code: self.code, message: self.message))) ?? Array("null".utf8)
    }
}

/// Turns anything a route throws into the JSON error shape: Herald's errors with their status,
/// the router's own (404, 405) with a code, and anything unexpected as a logged 500.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HeraldError {
            return try error.response(from: request, context: context)
        } catch let error as HTTPError {
            let code = error.status == .notFound ? "not_found" : error.status == .methodNotAllowed ? "method_not_allowed" : "http_error"
            var answer = try HeraldError(code: code, error.body ?? error.status.reasonPhrase).response(from: request, context: context)
            answer.status = error.status
            return answer
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(error)"])
            return try HeraldError.internalFailure.response(from: request, context: context)
        }
    }
}

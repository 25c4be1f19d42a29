import HTTPTypes
// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Hummingbird

/// Every operation the API serves, with every status it can answer. `openapi.yaml` must list
/// exactly these routes and statuses (a test compares the two and the router's own route list),
/// and a server started with ``ServerConfiguration/refuseUndeclaredStatuses`` turns an answer
/// with a status not listed here into a 500, so that the tests catch a status the document misses.
extension API {
    struct Operation: Hashable, Sendable {
        var method: HTTPRequest.Method
        /// OpenAPI's form: `/v1/apps/{app}`.
        var path: String
        var statuses: Set<Int>
    }

    /// Every operation's statuses: its successes and what its kind of route can refuse.
    static let operations: [Operation] = {
        // Behind the authenticator: no key or a bad one, a key without the scope, an address over
        // its failed authentications (429), a database that does not answer, and the unexpected.
        let secured: Set<Int> = [401, 403, 429, 500, 503]
        // Under /v1/apps/{app}: no such app.
        let app = secured.union([404])
        // With a JSON body: malformed, unknown fields, too large.
        let body: Set<Int> = [400, 413]
        // Rate-limited (registration and sending): 429 with Retry-After.
        let limited: Set<Int> = [429]
        return [
            Operation(method: .get, path: "/health", statuses: [200, 503]),
            Operation(method: .get, path: "/livez", statuses: [204]),
            Operation(method: .get, path: "/sdk/{file}", statuses: [200, 404]),
            Operation(method: .get, path: "/v1/apps/{app}/webpush/key", statuses: app.union([200])),
            Operation(method: .post, path: "/v1/apps/{app}/webpush/key", statuses: app.union([200])),
            Operation(method: .get, path: "/v1/openapi.yaml", statuses: [200, 404]),
            Operation(method: .post, path: "/v1/apps", statuses: secured.union(body).union([201, 409])),
            Operation(method: .get, path: "/v1/apps", statuses: secured.union([200])),
            Operation(method: .get, path: "/v1/apps/{app}", statuses: app.union([200])),
            Operation(method: .patch, path: "/v1/apps/{app}", statuses: app.union(body).union([200])),
            Operation(method: .put, path: "/v1/apps/{app}/credentials/{environment}", statuses: app.union(body).union([204, 422])),
            Operation(method: .post, path: "/v1/apps/{app}/user-secret", statuses: app.union([201])),
            Operation(method: .delete, path: "/v1/apps/{app}", statuses: app.union([202])),
            Operation(method: .get, path: "/v1/apps/{app}/credentials", statuses: app.union([200])),
            Operation(method: .delete, path: "/v1/apps/{app}/credentials/{environment}", statuses: app.union([204, 400])),
            Operation(method: .get, path: "/v1/apps/{app}/users/{userId}", statuses: app.union([200, 400])),
            Operation(method: .delete, path: "/v1/apps/{app}/users/{userId}", statuses: app.union([200, 400])),
            Operation(method: .get, path: "/v1/audit", statuses: secured.union([200, 400])),
            Operation(method: .post, path: "/v1/apps/{app}/user-assertions", statuses: app.union(body).union([201, 422])),
            Operation(method: .post, path: "/v1/keys", statuses: secured.union(body).union([201, 404])),
            Operation(method: .get, path: "/v1/keys", statuses: secured.union([200])),
            Operation(method: .delete, path: "/v1/keys/{id}", statuses: secured.union([204, 404, 409])),
            Operation(method: .post, path: "/v1/keys/{id}/rotate", statuses: secured.union(body).union([201, 404])),
            Operation(method: .get, path: "/v1/apps/{app}/devices", statuses: app.union([200, 400])),
            Operation(method: .put, path: "/v1/apps/{app}/devices/{token}", statuses: app.union(body).union(limited).union([200, 422])),
            Operation(method: .delete, path: "/v1/apps/{app}/devices/{token}", statuses: app.union(limited).union([204, 400])),
            Operation(method: .get, path: "/v1/apps/{app}/devices/{token}", statuses: app.union([200, 400])),
            Operation(method: .get, path: "/v1/apps/{app}/devices/{token}/deliveries", statuses: app.union([200, 400])),
            Operation(method: .post, path: "/v1/apps/{app}/registrations", statuses: app.union(body).union(limited).union([200, 422])),
            Operation(method: .post, path: "/v1/apps/{app}/notifications", statuses: app.union(body).union(limited).union([200, 202, 422])),
            Operation(method: .get, path: "/v1/apps/{app}/notifications", statuses: app.union([200, 400])),
            Operation(method: .get, path: "/v1/apps/{app}/notifications/{id}", statuses: app.union([200])),
            Operation(method: .delete, path: "/v1/apps/{app}/notifications/{id}", statuses: app.union([200])),
            Operation(method: .get, path: "/v1/apps/{app}/events", statuses: app.union([200, 400])),
            Operation(method: .post, path: "/v1/apps/{app}/receipts", statuses: app.union(body).union(limited).union([200])),
            Operation(method: .post, path: "/v1/apps/{app}/templates", statuses: app.union(body).union([201])),
            Operation(method: .get, path: "/v1/apps/{app}/templates", statuses: app.union([200])),
            Operation(method: .get, path: "/v1/apps/{app}/templates/{id}", statuses: app.union([200])),
            Operation(method: .put, path: "/v1/apps/{app}/templates/{id}", statuses: app.union(body).union([200])),
            Operation(method: .delete, path: "/v1/apps/{app}/templates/{id}", statuses: app.union([204])),
            Operation(method: .post, path: "/v1/apps/{app}/templates/{id}/preview", statuses: app.union(body).union([200])),
            // Channels go to APNs too: 422 for what it refuses, 503 when it does not answer (in `secured`).
            Operation(method: .post, path: "/v1/apps/{app}/channels", statuses: app.union(body).union([201, 422])),
            Operation(method: .get, path: "/v1/apps/{app}/channels", statuses: app.union([200, 400])),
            Operation(method: .get, path: "/v1/apps/{app}/channels/{id}", statuses: app.union([200, 400])),
            Operation(method: .delete, path: "/v1/apps/{app}/channels/{id}", statuses: app.union([204, 400, 409, 422])),
            // Live Activities: a start needs push-to-start tokens (422), an ended one takes nothing more
            // (409), a channel's broadcast goes to APNs at once (422 for what it refuses).
            Operation(method: .post, path: "/v1/apps/{app}/live-activities", statuses: app.union(body).union(limited).union([201, 409, 422])),
            Operation(method: .get, path: "/v1/apps/{app}/live-activities", statuses: app.union([200, 400])),
            Operation(method: .get, path: "/v1/apps/{app}/live-activities/{id}", statuses: app.union([200])),
            Operation(method: .patch, path: "/v1/apps/{app}/live-activities/{id}", statuses: app.union(body).union(limited).union([200, 409, 422])),
            Operation(method: .delete, path: "/v1/apps/{app}/live-activities/{id}", statuses: app.union(limited).union([200, 400, 409, 422])),
            Operation(method: .post, path: "/v1/apps/{app}/webhooks", statuses: app.union(body).union([201])),
            Operation(method: .get, path: "/v1/apps/{app}/webhooks", statuses: app.union([200])),
            Operation(method: .delete, path: "/v1/apps/{app}/webhooks/{id}", statuses: app.union([204])),
            Operation(method: .get, path: "/v1/apps/{app}/webhooks/{id}/messages", statuses: app.union([200, 400])),
        ]
    }()

    static let operationsByRoute: [String: Operation] = Dictionary(
        uniqueKeysWithValues: Self.operations.map { ("\($0.method.rawValue) \($0.path)", $0) }
    )

    /// For a server started with ``ServerConfiguration/refuseUndeclaredStatuses``: the 500
    /// `undeclared_status` that replaces `status` when `operation` does not declare it, else nil.
    static func undeclared(_ status: HTTPResponse.Status, of operation: Operation) -> HeraldError? {
        guard !operation.statuses.contains(Int(status.code)) else { return nil }
        return HeraldError(
            code: "undeclared_status", "\(operation.method.rawValue) \(operation.path) answered \(status.code), which its operation does not declare")
    }
}

/// For tests: an answer whose status its operation does not declare becomes a 500
/// `undeclared_status`, naming what was answered.
struct DeclaredStatusMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        guard let path = context.endpointPath, let operation = API.operationsByRoute["\(request.method.rawValue) \(path)"] else {
            return response
        }
        return try API.undeclared(response.status, of: operation)?.response(from: request, context: context) ?? response
    }
}

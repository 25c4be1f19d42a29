// SPDX-License-Identifier: Apache-2.0

/// An error the API returns as `{"error": {"code", "message"}}` with `status`.
public struct HeraldError: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    public var code: String
    public var message: String

    public init(status: Int, code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var description: String { "\(self.status) \(self.code): \(self.message)" }

    public static func invalid(_ message: String, code: String = "invalid_request") -> HeraldError {
        HeraldError(status: 400, code: code, message)
    }
    public static func unprocessable(_ message: String, code: String) -> HeraldError {
        HeraldError(status: 422, code: code, message)
    }
    public static func notFound(_ what: String) -> HeraldError { HeraldError(status: 404, code: "not_found", "\(what) not found") }
    public static func conflict(_ message: String, code: String = "conflict") -> HeraldError {
        HeraldError(status: 409, code: code, message)
    }
    public static let unauthorized = HeraldError(status: 401, code: "unauthorized", "a valid API key is required (Authorization: Bearer …)")
    public static func forbidden(_ message: String) -> HeraldError { HeraldError(status: 403, code: "forbidden", message) }
    public static let tooLarge = HeraldError(status: 413, code: "body_too_large", "the request body is too large")
}

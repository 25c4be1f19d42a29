// SPDX-License-Identifier: Apache-2.0

/// A domain error with a stable `code` (what clients branch on) and a `message` for people.
///
/// It carries no HTTP status: the API maps each code to exactly one status
/// (`HeraldError+HTTP.swift` in HeraldServer), so a code never means two different things.
public struct HeraldError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var message: String

    public init(code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(self.code): \(self.message)" }

    /// A request that is malformed or names a value that cannot be (`bad_…`, `missing_…`).
    public static func invalid(_ message: String, code: String = "invalid_request") -> HeraldError {
        HeraldError(code: code, message)
    }
    /// A well-formed request that cannot be carried out as asked (an APNs rule, a payload too large).
    public static func unprocessable(_ message: String, code: String) -> HeraldError {
        HeraldError(code: code, message)
    }
    public static func notFound(_ what: String) -> HeraldError { HeraldError(code: "not_found", "\(what) not found") }
    public static func conflict(_ message: String, code: String = "conflict") -> HeraldError {
        HeraldError(code: code, message)
    }
    public static let unauthorized = HeraldError(code: "unauthorized", "a valid API key is required (Authorization: Bearer …)")
    public static func forbidden(_ message: String) -> HeraldError { HeraldError(code: "forbidden", message) }
    public static let tooLarge = HeraldError(code: "body_too_large", "the request body is too large")
    /// The database did not answer or refused: worth trying again.
    public static func databaseUnavailable(_ message: String) -> HeraldError { HeraldError(code: "database_unavailable", message) }
}

// SPDX-License-Identifier: Apache-2.0

/// A domain error with a stable `code` (what clients branch on) and a `message` for people.
///
/// It carries no HTTP status: the API maps each code to exactly one status
/// (`HeraldError+HTTP.swift` in HeraldServer), so a code never means two different things.
package struct HeraldError: Error, Sendable, Hashable, CustomStringConvertible {
    package var code: String
    package var message: String

    package init(code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "\(self.code): \(self.message)" }

    /// A request that is malformed or names a value that cannot be (`bad_…`, `missing_…`).
    package static func invalid(_ message: String, code: String = "invalid_request") -> HeraldError {
        HeraldError(code: code, message)
    }
    /// A well-formed request that cannot be carried out as asked (an APNs rule, a payload too large).
    package static func unprocessable(_ message: String, code: String) -> HeraldError {
        HeraldError(code: code, message)
    }
    package static func notFound(_ what: String) -> HeraldError { HeraldError(code: "not_found", "\(what) not found") }
    package static func conflict(_ message: String, code: String = "conflict") -> HeraldError {
        HeraldError(code: code, message)
    }
    package static let unauthorized = HeraldError(code: "unauthorized", "a valid API key is required (Authorization: Bearer …)")
    package static func forbidden(_ message: String) -> HeraldError { HeraldError(code: "forbidden", message) }
    package static let tooLarge = HeraldError(code: "body_too_large", "the request body is too large")
    /// The database did not answer or refused: worth trying again.
    package static func databaseUnavailable(_ message: String) -> HeraldError { HeraldError(code: "database_unavailable", message) }
}

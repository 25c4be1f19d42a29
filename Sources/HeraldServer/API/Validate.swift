// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Hummingbird

/// Checks of single values the controllers share, each with its stable error code.
enum Validate {
    enum Pattern {
        case identifier, bundleID
    }

    /// A required string of 1 to 128 bytes of `pattern`'s characters (`missing_<key>`, `bad_<key>`).
    static func string(_ value: String?, _ key: String, pattern: Pattern) throws -> String {
        guard let value, !value.isEmpty, value.utf8.count <= 128 else {
            throw HeraldError.invalid("\(key) is required (a string of 1 to 128 characters)", code: "missing_\(key)")
        }
        let allowed: (UInt8) -> Bool
        switch pattern {
        case .identifier: allowed = { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F }
        case .bundleID: allowed = { ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x2E }
        }
        guard value.utf8.allSatisfy(allowed) else {
            throw HeraldError.invalid(
                pattern == .identifier ? "\(key) may hold a-z, 0-9, - and _" : "\(key) is not a bundle identifier", code: "bad_\(key)"
            )
        }
        return value
    }

    /// A device token in hex, any case (`bad_device_token`).
    static func token(_ text: String) throws -> DeviceToken {
        do {
            return try DeviceToken(hex: text.lowercased())
        } catch {
            throw HeraldError.invalid(error.description, code: "bad_device_token")
        }
    }

    /// The path's `:token`.
    static func token(_ context: APIRequestContext) throws -> DeviceToken {
        try Self.token(context.parameters.get("token") ?? "")
    }

    /// A device's identifier in the path, any platform's (`bad_device_token`): an APNs token in
    /// hex, `fcm:<token>` or `fid:<FID>`; its stored form.
    static func identifier(_ context: APIRequestContext) throws -> String {
        let text = context.parameters.get("token") ?? ""
        guard let stored = PushAddress.storedIdentifier(text) else {
            throw HeraldError.invalid("the device is named by its APNs token (hex), fcm:<token> or fid:<FID>", code: "bad_device_token")
        }
        return stored
    }

    /// `limit` from the query string: `fallback` when absent, 1…`maximum` otherwise (`bad_limit`).
    static func limit(_ request: Request, fallback: Int, maximum: Int) throws -> Int {
        guard let text = request.uri.queryParameters["limit"] else { return fallback }
        guard let limit = Int(String(text)), (1...maximum).contains(limit) else {
            throw HeraldError.invalid("limit must be 1 to \(maximum)", code: "bad_limit")
        }
        return limit
    }

    /// An optional string of at most `limit` bytes (`bad_<key>`).
    static func text(_ value: String?, _ key: String, limit: Int = 256) throws -> String? {
        guard let value else { return nil }
        guard value.utf8.count <= limit else { throw HeraldError.invalid("\(key) must be a string of at most \(limit) bytes", code: "bad_\(key)") }
        return value
    }
}

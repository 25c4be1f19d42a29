// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldCore
import Hummingbird
import NIOCore

/// The fields of a dashboard form.
enum DashboardForm {
    /// `application/x-www-form-urlencoded` fields (up to 256 KiB).
    static func read(_ request: Request) async throws -> [String: String] {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: 256 * 1024)
        } catch {
            throw HeraldError.tooLarge
        }
        return Self.decode(String(buffer: buffer))
    }

    static func decode(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String { String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            guard let name = parts.first else { continue }
            fields[decode(name)] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }
}

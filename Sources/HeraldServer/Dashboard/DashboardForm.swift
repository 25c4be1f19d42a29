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
        let type = request.headers[.contentType] ?? ""
        if type.lowercased().hasPrefix("multipart/form-data"), let boundary = Self.boundary(type) {
            return Self.decodeMultipart(Array(buffer.readableBytesView), boundary: boundary)
        }
        return Self.decode(String(buffer: buffer))
    }

    /// The `boundary` parameter of a `multipart/form-data` content type.
    static func boundary(_ contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2, pair[0].lowercased() == "boundary" {
                let value = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                return value.isEmpty ? nil : value
            }
        }
        return nil
    }

    /// A field's value without the blanks and line breaks around it; nil when missing or blank.
    static func field(_ form: [String: String], _ name: String) -> String? {
        guard let value = form[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
        return value
    }

    /// File fields whose content is binary (a `.p12`): their value is the content in base64.
    static let binaryFields: Set<String> = ["pkcs12File"]

    /// `multipart/form-data` fields (a file field's value is the file's text, or base64 for
    /// ``binaryFields``): how a browser uploads a `.p8` key, a PEM file or a `.p12`. Parts without a
    /// name are skipped.
    static func decodeMultipart(_ body: [UInt8], boundary: String) -> [String: String] {
        let delimiter = Array(("--" + boundary).utf8)
        var fields: [String: String] = [:]
        var starts: [Int] = []
        var index = 0
        while index + delimiter.count <= body.count {
            if body[index] == delimiter[0], Array(body[index..<index + delimiter.count]) == delimiter {
                starts.append(index)
                index += delimiter.count
            } else {
                index += 1
            }
        }
        for (start, end) in zip(starts, starts.dropFirst()) {
            var part = Array(body[start + delimiter.count..<end])
            // The part is "\r\n" headers "\r\n\r\n" content "\r\n".
            if part.starts(with: [13, 10]) { part.removeFirst(2) }
            if part.count >= 2, part[part.count - 2] == 13, part[part.count - 1] == 10 { part.removeLast(2) }
            guard let split = Self.headerEnd(part) else { continue }
            let headers = String(decoding: part[..<split], as: UTF8.self)
            let content = Array(part[(split + 4)...])
            guard let name = Self.dispositionName(headers) else { continue }
            fields[name] = Self.binaryFields.contains(name) ? Data(content).base64EncodedString() : String(decoding: content, as: UTF8.self)
        }
        return fields
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    private static func dispositionName(_ headers: String) -> String? {
        for line in headers.split(whereSeparator: { $0 == "\r" || $0 == "\n" }) where line.lowercased().hasPrefix("content-disposition:") {
            for parameter in line.split(separator: ";").dropFirst() {
                let pair = parameter.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
                if pair.count == 2, pair[0].lowercased() == "name" { return pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            }
        }
        return nil
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

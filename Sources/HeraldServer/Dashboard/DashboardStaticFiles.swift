// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird
import NIOCore

/// The dashboard's stylesheet and script, read once at start, served with a strong `ETag` (the
/// SHA-256 of the bytes) and `Cache-Control: no-cache`: a browser asks again each time and gets a
/// bodiless 304 while the file is unchanged.
struct DashboardStaticFiles: Sendable {
    struct File: Sendable {
        var contentType: String
        var bytes: ByteBuffer
        var etag: String
    }

    static let contentTypes = ["dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"]
    static let cacheControl = "no-cache"

    let files: [String: File]

    /// The files of `Static/`, compiled in (`EmbeddedResources`).
    init() throws {
        var files: [String: File] = [:]
        for (name, type) in Self.contentTypes {
            guard let bytes = EmbeddedResources.bytes("Static/" + name) else {
                throw DashboardResourceError(missing: "Static/" + name)
            }
            files[name] = File(contentType: type, bytes: ByteBuffer(bytes: bytes), etag: Self.etag(bytes))
        }
        self.files = files
    }

    /// A strong entity tag: the hex SHA-256 of the bytes, quoted.
    static func etag(_ bytes: some DataProtocol) -> String {
        "\"" + SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() + "\""
    }

    /// `If-None-Match` lists `etag` (or is `*`): the weak comparison RFC 9110 asks for.
    static func matches(_ ifNoneMatch: String, etag: String) -> Bool {
        ifNoneMatch.split(separator: ",").contains { candidate in
            var tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == etag
        }
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("static/:file") { request, context in
            try self.response(file: context.parameters.get("file") ?? "", ifNoneMatch: request.headers[.ifNoneMatch])
        }
    }

    func response(file name: String, ifNoneMatch: String?) throws -> Response {
        guard let file = self.files[name] else { throw HeraldError.notFound("file") }
        var headers = HTTPFields()
        headers[.eTag] = file.etag
        headers[.cacheControl] = Self.cacheControl
        if let ifNoneMatch, Self.matches(ifNoneMatch, etag: file.etag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = file.contentType
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: file.bytes))
    }
}

/// A resource of the dashboard (a template, the stylesheet, the script) is missing from `EmbeddedResources`
/// (or, for a template, is not UTF-8).
struct DashboardResourceError: Error, CustomStringConvertible {
    var missing: String
    var description: String { "the dashboard's resource \(self.missing) is missing" }
}

// SPDX-License-Identifier: Apache-2.0
import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import NIOCore

/// A page to show: a template of `Templates/` and the values it shows.
///
/// Every value reaches the HTML through an escaping `{{…}}` tag of the template: the models are
/// plain values (strings, numbers, flags, lists), never markup.
struct DashboardView: Sendable {
    var template: DashboardTemplate
    /// What the page is, first in the document's `<title>` ("… · Herald"); nil for "Herald".
    var title: String?
    var model: any Sendable
    /// The part of the top navigation the page belongs to (marked `aria-current`).
    var section: DashboardSection?

    init(template: DashboardTemplate, title: String?, model: any Sendable, section: DashboardSection? = nil) {
        self.template = template
        self.title = title
        self.model = model
        self.section = section
    }

    /// The model of a page that shows no values.
    struct Empty: Sendable {}
}

/// The top navigation's parts.
enum DashboardSection: String, CaseIterable, Sendable {
    case overview, apps, keys, emulator

    var label: String {
        switch self {
        case .overview: "Overview"
        case .apps: "Apps"
        case .keys: "Keys"
        case .emulator: "Emulator"
        }
    }

    var href: String { self == .overview ? "/dashboard" : "/dashboard/\(self.rawValue)" }
}

/// An `<option>` of a `<select>` (the `option` partial).
struct DashboardOption: Sendable {
    var value: String
    var label: String
    var selected: Bool
}

/// The page templates (`Templates/<name>.mustache`); the partials they use are listed in `partials`.
enum DashboardTemplate: String, CaseIterable, Sendable {
    case login, overview, apps, app, keys, devices, device, notification, send, emulator, phone, notFound = "not-found", emulatorOff = "emulator-off"
    case error, notifications, templates, channels, liveActivities = "live-activities", liveActivity = "live-activity"

    static let partials = ["layout", "csrf", "chart", "credential", "fcm-credential", "option", "explained"]
}

/// The dashboard's templates, loaded once at start into a `MustacheLibrary`, and the pages they make.
///
/// Each page template extends `layout` (`{{<layout}}{{$main}}…{{/main}}{{/layout}}`), so no
/// rendered HTML is ever passed through an unescaped tag.
struct DashboardViews: Sendable {
    let library: MustacheLibrary

    /// Reads each template from `EmbeddedResources` (`Templates/<name>.mustache`); one that is
    /// missing, not UTF-8 or not valid Mustache fails the start.
    init() throws {
        var library = MustacheLibrary()
        for name in DashboardTemplate.allCases.map(\.rawValue) + DashboardTemplate.partials {
            let path = "Templates/\(name).mustache"
            guard let bytes = EmbeddedResources.bytes(path), var text = String(bytes: bytes, encoding: .utf8) else {
                throw DashboardResourceError(missing: path)
            }
            // A file's final newline is not part of it: a partial used inside a line adds none.
            if text.hasSuffix("\n") { text.removeLast() }
            try library.register(text, named: name)
        }
        self.library = library
    }

    /// What a page template renders: the layout's values and, under `page`, the page's own.
    struct Frame {
        var documentTitle: String
        var signedIn: SignedIn?
        var nav: [NavLink]
        var page: any Sendable
    }

    /// A link of the top navigation; `current` for the page's own part.
    struct NavLink {
        var href: String
        var label: String
        var current: Bool
    }

    /// The top bar's sign-out form.
    struct SignedIn {
        var name: String
        var csrf: String
    }

    func render(_ view: DashboardView, session: DashboardSession?) -> String {
        let frame = Frame(
            documentTitle: view.title.map { "\($0) · Herald" } ?? "Herald", signedIn: session.map { SignedIn(name: $0.name, csrf: $0.csrf) },
            nav: DashboardSection.allCases.map { NavLink(href: $0.href, label: $0.label, current: $0 == view.section) }, page: view.model
        )
        return self.library.render(frame, withTemplate: view.template.rawValue) ?? ""
    }

    /// A whole HTML page, with the headers every dashboard page has.
    func response(_ view: DashboardView, session: DashboardSession?, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Content-Security-Policy")!] =
            "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: self.render(view, session: session))))
    }

    static func redirect(_ location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        return Response(status: .seeOther, headers: headers)
    }
}

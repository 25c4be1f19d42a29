// SPDX-License-Identifier: Apache-2.0

extension VAPID {
    /// The origin of a push resource URL, the JWT's `aud` (RFC 8292 §2): `scheme://host[:port]`
    /// with scheme and host in lower case and the default port (443 for https, 80 for http)
    /// left out. User info, path, query and fragment are dropped; an IPv6 literal keeps its
    /// brackets. `nil` unless `endpoint` is an absolute `http` or `https` URL with a host and,
    /// if it has one, a port from 0 through 65535.
    package static func origin(of endpoint: String) -> String? {
        let utf8 = Array(endpoint.utf8)
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")),
            utf8.count >= colon + 3, utf8[colon + 1] == UInt8(ascii: "/"), utf8[colon + 2] == UInt8(ascii: "/")
        else { return nil }
        let scheme = String(decoding: utf8[..<colon].map(Self.lowercased), as: UTF8.self)
        let defaultPort: Int
        switch scheme {
        case "https": defaultPort = 443
        case "http": defaultPort = 80
        default: return nil
        }
        let authorityStart = colon + 3
        var authorityEnd = authorityStart
        while authorityEnd < utf8.count, !Self.endsAuthority(utf8[authorityEnd]) { authorityEnd += 1 }
        var authority = utf8[authorityStart..<authorityEnd]
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        guard !authority.isEmpty else { return nil }

        let host: ArraySlice<UInt8>
        let portText: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")), close > authority.startIndex + 1 else { return nil }
            let inside = authority[(authority.startIndex + 1)..<close]
            guard inside.allSatisfy({ Self.isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                return nil
            }
            host = authority[authority.startIndex...close]
            let rest = authority[(close + 1)...]
            if rest.isEmpty {
                portText = nil
            } else {
                guard rest.first == UInt8(ascii: ":") else { return nil }
                portText = rest.dropFirst()
            }
        } else if let portColon = authority.firstIndex(of: UInt8(ascii: ":")) {
            host = authority[..<portColon]
            portText = authority[(portColon + 1)...]
        } else {
            host = authority
            portText = nil
        }
        guard !host.isEmpty, host.first == UInt8(ascii: "[") || host.allSatisfy(Self.isHostByte) else { return nil }

        var port: Int? = nil
        if let portText, !portText.isEmpty {  // "host:" with no digits means the default port (RFC 3986 §3.2.3)
            guard portText.count <= 5, portText.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                return nil
            }
            let value = portText.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            guard value <= 65535 else { return nil }
            if value != defaultPort { port = value }
        }
        var origin = scheme + "://" + String(decoding: host.map(Self.lowercased), as: UTF8.self)
        if let port { origin += ":" + String(port) }
        return origin
    }

    private static func endsAuthority(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"):
            return true
        default: return false
        }
    }

    /// A reg-name (RFC 3986 §3.2.2: unreserved, sub-delims, percent escapes) or an IPv4 address;
    /// bytes above 0x7F let an IDN's Unicode form through unchanged.
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"),
            UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            return true
        case 0x80...0xFF: return true
        default: return false
        }
    }
}

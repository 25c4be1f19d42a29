// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IP address range in CIDR form (`10.0.0.0/8`, `2001:db8::/32`, or one address), as 16 bytes
/// and a prefix length: IPv4 is held IPv4-mapped (`::ffff:a.b.c.d`), so `::ffff:10.0.0.2` and
/// `10.0.0.2` are the same address.
package struct IPRange: Sendable, Hashable, CustomStringConvertible {
    package let network: [UInt8]
    /// Leading bits that must match, 0 to 128 (an IPv4 range's /n is 96 + n here).
    package let prefixLength: Int
    package let description: String

    /// `text` as an address or `address/bits`; nil for anything else.
    package init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = Self.address(String(parts[0])) else { return nil }
        let isIPv4 = !parts[0].contains(":")
        // An IPv4-mapped address (`::ffff:10.0.0.0`) is written with IPv6 bits: under 96 it would
        // reach beyond the mapped addresses (`/8` would be `::/8`), which nobody means.
        let isMapped = !isIPv4 && parts[0].contains(".")
        let maximum = isIPv4 ? 32 : 128
        var bits = maximum
        if parts.count == 2 {
            guard let given = Int(parts[1]), (0...maximum).contains(given), parts[1].allSatisfy(\.isNumber), !isMapped || given >= 96 else {
                return nil
            }
            bits = given
        }
        self.prefixLength = bits + (isIPv4 ? 96 : 0)
        self.network = Self.masked(address, bits: self.prefixLength)
        self.description = text
    }

    /// Whether `address` (16 bytes, from ``address(_:)``) lies in this range.
    package func contains(_ address: [UInt8]) -> Bool {
        Self.masked(address, bits: self.prefixLength) == self.network
    }

    /// An IPv4 or IPv6 address as 16 bytes (IPv4 mapped); nil when it is not one.
    package static func address(_ text: String) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 16)
        if !text.contains(":") {
            var v4 = in_addr()
            guard inet_pton(AF_INET, text, &v4) == 1 else { return nil }
            bytes[10] = 0xff
            bytes[11] = 0xff
            withUnsafeBytes(of: &v4) { raw in
                for index in 0..<4 { bytes[12 + index] = raw[index] }
            }
            return bytes
        }
        // A zone (`fe80::1%eth0`) names an interface, not a different address.
        let bare = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &v6) == 1 else { return nil }
        withUnsafeBytes(of: &v6) { raw in
            for index in 0..<16 { bytes[index] = raw[index] }
        }
        return bytes
    }

    private static func masked(_ address: [UInt8], bits: Int) -> [UInt8] {
        var out = address
        for index in 0..<16 {
            let keep = max(0, min(8, bits - index * 8))
            out[index] &= keep == 8 ? 0xff : UInt8(truncatingIfNeeded: 0xff << (8 - keep))
        }
        return out
    }
}

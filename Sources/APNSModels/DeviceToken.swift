// SPDX-License-Identifier: Apache-2.0

/// A device token (or PushKit, Live Activity, widget… token): the bytes the system handed the app,
/// written as lowercase hex. Apple warns not to assume a length; Live Activity tokens are longer
/// than the classic 32 bytes, so any non-empty even-length hex string up to 512 bytes is accepted.
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    /// Lowercase hex.
    public let hex: String

    public static let maximumByteCount = 512

    public init(hex: String) throws(APNSValidationError) {
        let utf8 = hex.utf8
        guard !utf8.isEmpty else { throw APNSValidationError(.badDeviceToken, "the device token is empty") }
        guard utf8.count % 2 == 0 else {
            throw APNSValidationError(.badDeviceToken, "the device token has an odd number of hex digits")
        }
        guard utf8.count <= Self.maximumByteCount * 2 else {
            throw APNSValidationError(.badDeviceToken, "the device token is longer than \(Self.maximumByteCount) bytes")
        }
        // Tokens come lowercase (Herald stores them so): such a string is kept as it is, with
        // no copy made.
        func lowercaseHex(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
        }
        if utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(lowercaseHex) }) ?? utf8.allSatisfy(lowercaseHex) {
            self.hex = hex
            return
        }
        var lower: [UInt8] = []
        lower.reserveCapacity(utf8.count)
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): lower.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): lower.append(byte | 0x20)
            default: throw APNSValidationError(.badDeviceToken, "the device token is not hex")
            }
        }
        self.hex = String(decoding: lower, as: UTF8.self)
    }

    public init(bytes: some Collection<UInt8>) throws(APNSValidationError) {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        try self.init(hex: String(decoding: out, as: UTF8.self))
    }

    /// The token's bytes.
    public var bytes: [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(self.hex.utf8.count / 2)
        var high: UInt8 = 0
        for (index, byte) in self.hex.utf8.enumerated() {
            let nibble = byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : byte - UInt8(ascii: "a") + 10
            if index % 2 == 0 { high = nibble } else { result.append(high << 4 | nibble) }
        }
        return result
    }

    /// A form safe for logs: the first 8 hex digits and the length, never the whole token.
    public var redacted: String {
        "\(self.hex.prefix(8))…(\(self.hex.utf8.count / 2) bytes)"
    }

    public var description: String { self.redacted }
}

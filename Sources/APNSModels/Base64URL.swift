// SPDX-License-Identifier: Apache-2.0

/// base64url without padding (RFC 4648 §5), as JWTs use it.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let standardAlphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8
    )

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Self.encode(bytes, alphabet: Self.alphabet, pad: false)
    }

    /// Standard base64 with padding, for PEM bodies and channel ids.
    public static func encodeStandard(_ bytes: some Collection<UInt8>) -> String {
        Self.encode(bytes, alphabet: Self.standardAlphabet, pad: true)
    }

    private static func encode(_ bytes: some Collection<UInt8>, alphabet: [UInt8], pad: Bool) -> String {
        if let text = bytes.withContiguousStorageIfAvailable({ Self.encode($0, alphabet: alphabet, pad: pad) }) { return text }
        return Array(bytes).withUnsafeBufferPointer { Self.encode($0, alphabet: alphabet, pad: pad) }
    }

    /// Written straight into the string's storage (a receipt id is made per delivery).
    private static func encode(_ input: UnsafeBufferPointer<UInt8>, alphabet: [UInt8], pad: Bool) -> String {
        let length = pad ? (input.count + 2) / 3 * 4 : (input.count * 4 + 2) / 3
        guard length > 0 else { return "" }
        return alphabet.withUnsafeBufferPointer { alphabet in
            String(unsafeUninitializedCapacity: length) { output in
                var written = 0
                func put(_ sextet: UInt32) {
                    output[written] = alphabet[Int(sextet & 63)]
                    written += 1
                }
                var i = 0
                while i + 3 <= input.count {
                    let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    put(n >> 18)
                    put(n >> 12)
                    put(n >> 6)
                    put(n)
                    i += 3
                }
                switch input.count - i {
                case 1:
                    let n = UInt32(input[i]) << 16
                    put(n >> 18)
                    put(n >> 12)
                case 2:
                    let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
                    put(n >> 18)
                    put(n >> 12)
                    put(n >> 6)
                default:
                    break
                }
                while written < length {
                    output[written] = UInt8(ascii: "=")
                    written += 1
                }
                return written
            }
        }
    }

    /// Decodes base64url or standard base64, with or without padding; `nil` for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        var padding = 0
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"), UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "_"), UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            default: return nil
            }
            guard padding == 0 else { return nil }  // data after padding
            values.append(value)
        }
        guard padding <= 2, values.count % 4 != 1 else { return nil }
        if padding > 0, (values.count + padding) % 4 != 0 { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i + 4 <= values.count {
            let n = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6 | UInt32(values[i + 3])
            output.append(UInt8(n >> 16 & 0xFF))
            output.append(UInt8(n >> 8 & 0xFF))
            output.append(UInt8(n & 0xFF))
            i += 4
        }
        let rest = values.count - i
        if rest == 2 {
            let n = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12
            guard n & 0xFFFF == 0 else { return nil }
            output.append(UInt8(n >> 16 & 0xFF))
        } else if rest == 3 {
            let n = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6
            guard n & 0xFF == 0 else { return nil }
            output.append(UInt8(n >> 16 & 0xFF))
            output.append(UInt8(n >> 8 & 0xFF))
        }
        return output
    }
}

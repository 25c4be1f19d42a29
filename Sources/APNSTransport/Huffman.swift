// SPDX-License-Identifier: Apache-2.0

/// HPACK's static Huffman code (RFC 7541 Appendix B), decoded by table.
///
/// The code is canonical: each symbol's code follows from the code lengths alone, so only the
/// lengths are written here and the codes are derived from them (`APNSTransportTests` checks the
/// result against SwiftNIO's encoder for every byte value).
enum Huffman {
    /// Code lengths in bits for symbols 0–255 and EOS (256), from RFC 7541 Appendix B.
    static let lengths: [UInt8] = [
        13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
        6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
        13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
        15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
        20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
        22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
        26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
        20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
        30,
    ]

    static let endOfString = 256
    static let longest = 30
    /// Codes this long or shorter are decoded by one lookup of the next `fastBits` bits.
    static let fastBits = 9

    struct Tables: Sendable {
        /// Indexed by the next 9 bits: `symbol | length << 8` for a code of at most 9 bits, else 0.
        var fast: [UInt16]
        /// Per length: the first canonical code of that length, how many codes have it, and where
        /// their symbols start in `symbols`.
        var first: [UInt32]
        var count: [UInt32]
        var offset: [Int]
        /// Symbols ordered by code length, then value (the canonical order).
        var symbols: [UInt16]
        /// Each symbol's code, right-aligned (for the tests, which encode with it).
        var codes: [UInt32]
    }

    static let tables: Tables = {
        var count = [UInt32](repeating: 0, count: longest + 1)
        for length in lengths { count[Int(length)] += 1 }
        var first = [UInt32](repeating: 0, count: longest + 1)
        var offset = [Int](repeating: 0, count: longest + 1)
        var code: UInt32 = 0
        var index = 0
        for length in 1...longest {
            code = (code + count[length - 1]) << 1
            first[length] = code
            offset[length] = index
            index += Int(count[length])
        }
        let symbols = (0..<lengths.count).sorted { (lengths[$0], $0) < (lengths[$1], $1) }.map { UInt16($0) }
        var codes = [UInt32](repeating: 0, count: lengths.count)
        var fast = [UInt16](repeating: 0, count: 1 << fastBits)
        for length in 1...longest {
            for rank in 0..<Int(count[length]) {
                let symbol = Int(symbols[offset[length] + rank])
                let symbolCode = first[length] + UInt32(rank)
                codes[symbol] = symbolCode
                guard length <= fastBits else { continue }
                let base = Int(symbolCode) << (fastBits - length)
                for suffix in 0..<(1 << (fastBits - length)) {
                    fast[base + suffix] = UInt16(symbol) | UInt16(length) << 8
                }
            }
        }
        return Tables(fast: fast, first: first, count: count, offset: offset, symbols: symbols, codes: codes)
    }()

    /// Decodes a Huffman-coded string literal. Fails on the EOS symbol, on padding longer than 7
    /// bits, and on padding that is not the EOS code's leading ones (RFC 7541 §5.2).
    static func decode(_ input: UnsafeRawBufferPointer) throws(HeaderBlockDecoder.DecodingError) -> String {
        if input.isEmpty { return "" }
        let tables = Self.tables
        // Every code is at least 5 bits long.
        let capacity = input.count * 8 / 5 + 1
        var failure: HeaderBlockDecoder.DecodingError?
        let text = tables.fast.withUnsafeBufferPointer { fast in
            String(unsafeUninitializedCapacity: capacity) { output in
                var accumulator: UInt64 = 0
                var bits = 0
                var next = 0
                var written = 0
                while true {
                    while bits <= 56, next < input.count {
                        accumulator = accumulator << 8 | UInt64(input[next])
                        next += 1
                        bits += 8
                    }
                    if bits >= Self.fastBits {
                        let entry = fast[Int(truncatingIfNeeded: accumulator >> UInt64(bits - Self.fastBits)) & 0x1FF]
                        if entry != 0 {
                            output[written] = UInt8(truncatingIfNeeded: entry)
                            written += 1
                            bits -= Int(entry >> 8)
                            continue
                        }
                    }
                    if bits == 0 { break }
                    // A code longer than the fast table, or the string's last bits.
                    var symbol = -1
                    var length = 5
                    while length <= min(Self.longest, bits) {
                        let code = UInt32(truncatingIfNeeded: accumulator >> UInt64(bits - length)) & ((UInt32(1) << length) - 1)
                        let rank = code &- tables.first[length]
                        if rank < tables.count[length] {
                            symbol = Int(tables.symbols[tables.offset[length] + Int(rank)])
                            break
                        }
                        length += 1
                    }
                    if symbol < 0 {
                        // Only padding may be left: fewer than 8 bits, all ones, at the end.
                        if next != input.count || bits > 7 || accumulator & ((UInt64(1) << bits) - 1) != (UInt64(1) << bits) - 1 {
                            failure = .invalidHuffmanCode
                        }
                        break
                    }
                    if symbol == Self.endOfString {
                        failure = .invalidHuffmanCode
                        break
                    }
                    output[written] = UInt8(truncatingIfNeeded: symbol)
                    written += 1
                    bits -= length
                }
                return written
            }
        }
        if let failure { throw failure }
        return text
    }
}

// SPDX-License-Identifier: Apache-2.0
import NIOCore
import NIOHPACK
import Testing

@testable import APNSTransport

/// The header decoder checked against an independent encoder and decoder (SwiftNIO's HPACK) and
/// against RFC 7541's own examples.
@Suite struct HeaderBlockDecoderTests {
    typealias Field = (name: String, value: String, neverIndexed: Bool)

    func decode(_ decoder: inout HeaderBlockDecoder, _ bytes: [UInt8]) throws -> [Field] {
        try self.decode(&decoder, ByteBuffer(bytes: bytes))
    }

    func decode(_ decoder: inout HeaderBlockDecoder, _ block: ByteBuffer) throws -> [Field] {
        var fields: [Field] = []
        try decoder.decode(block) { fields.append(($0, $1, $2)) }
        return fields
    }

    func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace }.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    func huffman(_ hex: String) throws -> String {
        try self.bytes(hex).withUnsafeBytes { try Huffman.decode($0) }
    }

    /// Our own encoding with the derived codes, to reach bytes no UTF-8 string contains.
    func encodeHuffman(_ input: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        var accumulator: UInt64 = 0
        var bits = 0
        for byte in input {
            let length = Int(Huffman.lengths[Int(byte)])
            accumulator = accumulator << UInt64(length) | UInt64(Huffman.tables.codes[Int(byte)])
            bits += length
            while bits >= 8 {
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt64(bits - 8)))
                bits -= 8
            }
        }
        if bits > 0 { output.append(UInt8(truncatingIfNeeded: accumulator << UInt64(8 - bits)) | UInt8(0xFF >> bits)) }
        return output
    }

    @Test("RFC 7541 C.4 and C.6: Huffman-coded strings")
    func rfcExamples() throws {
        #expect(try self.huffman("f1e3 c2e5 f23a 6ba0 ab90 f4ff") == "www.example.com")
        #expect(try self.huffman("a8eb 1064 9cbf") == "no-cache")
        #expect(try self.huffman("25a8 49e9 5ba9 7d7f") == "custom-key")
        #expect(try self.huffman("25a8 49e9 5bb8 e8b4 bf") == "custom-value")
        #expect(try self.huffman("6402") == "302")
        #expect(try self.huffman("aec3 771a 4b") == "private")
        #expect(try self.huffman("") == "")
    }

    @Test("RFC 7541 C.4: three requests on one connection share the dynamic table")
    func rfcRequests() throws {
        var decoder = HeaderBlockDecoder(maxHeaderListSize: 16_384)
        let first = try self.decode(&decoder, self.bytes("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
        #expect(first.map { "\($0.name)=\($0.value)" } == [":method=GET", ":scheme=http", ":path=/", ":authority=www.example.com"])
        let second = try self.decode(&decoder, self.bytes("8286 84be 5886 a8eb 1064 9cbf"))
        #expect(
            second.map { "\($0.name)=\($0.value)" } == [
                ":method=GET", ":scheme=http", ":path=/", ":authority=www.example.com", "cache-control=no-cache",
            ])
        let third = try self.decode(&decoder, self.bytes("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"))
        #expect(
            third.map { "\($0.name)=\($0.value)" } == [
                ":method=GET", ":scheme=https", ":path=/index.html", ":authority=www.example.com", "custom-key=custom-value",
            ])
        #expect(decoder.dynamicTableCount == 3)
    }

    @Test("every byte value, each alone and all together, decodes to itself")
    func everyByte() throws {
        for byte in 0...255 {
            let encoded = self.encodeHuffman([UInt8(byte)])
            let decoded = try encoded.withUnsafeBytes { try Huffman.decode($0) }
            // Bytes that are not UTF-8 on their own come back repaired, as any received header would.
            #expect(decoded == String(decoding: [UInt8(byte)], as: UTF8.self), "byte \(byte)")
        }
        let all = (0...255).map { UInt8($0) }.filter { $0 < 0x80 }
        let decoded = try self.encodeHuffman(all).withUnsafeBytes { try Huffman.decode($0) }
        #expect(Array(decoded.utf8) == all)
    }

    @Test("strings Huffman-coded by SwiftNIO decode to the same text, any Unicode")
    func differentialStrings() throws {
        var random = SystemRandomNumberGenerator()
        let jwtAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
        for round in 0..<2000 {
            let length = Int.random(in: 0...300, using: &random)
            let text: String
            switch round % 3 {
            case 0: text = String((0..<length).map { _ in jwtAlphabet.randomElement(using: &random)! })
            case 1: text = String(String.UnicodeScalarView((0..<length).map { _ in Unicode.Scalar(UInt8.random(in: 0...127, using: &random)) }))
            default:
                text = String(
                    String.UnicodeScalarView(
                        (0..<length / 3).compactMap { _ in Unicode.Scalar(UInt32.random(in: 0...0x10FFFF, using: &random)) }))
            }
            var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
            var block = ByteBuffer()
            try encoder.encode(headers: HPACKHeaders([("x-text", text)]), to: &block)
            var decoder = HeaderBlockDecoder(maxHeaderListSize: 1 << 20)
            let fields = try self.decode(&decoder, block)
            #expect(fields.count == 1 && fields[0].value == text, "round \(round)")
        }
    }

    @Test("header blocks encoded by SwiftNIO decode as SwiftNIO decodes them, table changes included")
    func differentialBlocks() throws {
        var random = SystemRandomNumberGenerator()
        let names = [
            ":path", ":authority", "authorization", "apns-topic", "apns-id", "apns-push-type", "content-type", "x-custom",
            "cookie", "accept-encoding", ":status",
        ]
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4096)
        var reference = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4096, maxHeaderListSize: 1 << 20)
        var decoder = HeaderBlockDecoder(maxTableSize: 4096, maxHeaderListSize: 1 << 20)
        for round in 0..<3000 {
            if round % 97 == 0 { try encoder.setDynamicTableSize([0, 64, 256, 4096][Int.random(in: 0..<4, using: &random)]) }
            var headers = HPACKHeaders()
            for _ in 0..<Int.random(in: 0...12, using: &random) {
                let name = names.randomElement(using: &random)!
                let value: String
                switch Int.random(in: 0..<4, using: &random) {
                case 0: value = "gzip, deflate"
                case 1: value = "v\(Int.random(in: 0..<8, using: &random))"
                case 2: value = String(repeating: "x", count: Int.random(in: 0..<400, using: &random))
                default: value = "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IjEyMyJ9.\(Int.random(in: 0..<3, using: &random))"
                }
                let indexing = [HPACKIndexing.indexable, .nonIndexable, .neverIndexed][Int.random(in: 0..<3, using: &random)]
                headers.add(name: name, value: value, indexing: indexing)
            }
            var block = ByteBuffer()
            try encoder.encode(headers: headers, to: &block)
            var copy = block
            let expected = try reference.decodeHeaders(from: &copy)
            let fields = try self.decode(&decoder, block)
            #expect(fields.map(\.name) == expected.map(\.name), "round \(round)")
            #expect(fields.map(\.value) == expected.map(\.value), "round \(round)")
            #expect(fields.map(\.neverIndexed) == expected.map { $0.indexable == .neverIndexed }, "round \(round)")
        }
    }

    @Test("a remembered literal is used only for the same bytes: a changed token is decoded afresh")
    func rememberedLiteral() throws {
        var decoder = HeaderBlockDecoder(maxHeaderListSize: 16_384)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let tokens = ["bearer " + String(repeating: "a", count: 200), "bearer " + String(repeating: "a", count: 199) + "b"]
        for token in tokens + tokens + [tokens[1]] {
            var block = ByteBuffer()
            var headers = HPACKHeaders()
            headers.add(name: "authorization", value: token, indexing: .neverIndexed)
            headers.add(name: ":path", value: "/3/device/" + token.suffix(64), indexing: .nonIndexable)
            try encoder.encode(headers: headers, to: &block)
            let fields = try self.decode(&decoder, block)
            #expect(fields.map(\.value) == [token, "/3/device/" + token.suffix(64)])
        }
        // A value longer than what is remembered is decoded each time, and right.
        let long = "bearer " + String(repeating: "z", count: 1500)
        for _ in 0..<2 {
            var block = ByteBuffer()
            var headers = HPACKHeaders()
            headers.add(name: "authorization", value: long, indexing: .neverIndexed)
            try encoder.encode(headers: headers, to: &block)
            #expect(try self.decode(&decoder, block).map(\.value) == [long])
        }
        // The same bytes sent raw (no Huffman) under the same name are not taken for the coded ones.
        let raw = tokens[0]
        var block = ByteBuffer(bytes: [0x10 | 0x0F, 23 - 15, 0x7F, UInt8(raw.utf8.count - 127)])
        block.writeString(raw)
        #expect(try self.decode(&decoder, block).map(\.value) == [raw])
    }

    @Test("malformed blocks fail with a stable error, not a crash")
    func malformed() throws {
        func failure(_ hex: String, maxHeaderListSize: Int = 16_384) -> HeaderBlockDecoder.DecodingError? {
            var decoder = HeaderBlockDecoder(maxHeaderListSize: maxHeaderListSize)
            do {
                _ = try self.decode(&decoder, self.bytes(hex))
                return nil
            } catch {
                return error as? HeaderBlockDecoder.DecodingError
            }
        }
        #expect(failure("80") == .zeroIndex)
        #expect(failure("be") == .indexOutOfRange)  // 62: the dynamic table is empty
        #expect(failure("ff") == .truncated)  // an integer that goes on past the block
        #expect(failure("ff ff ff ff ff 7f") == .integerOverflow)
        #expect(failure("04 05 61 62") == .truncated)  // :path, 5 raw bytes promised, 2 sent
        #expect(failure("04 81 00") == .invalidHuffmanCode)  // padding of zeros
        #expect(failure("04 82 ff ff") == .invalidHuffmanCode)  // EOS's prefix, more than 7 bits
        #expect(failure("04 84 ff ff ff ff") == .invalidHuffmanCode)  // the EOS symbol itself
        #expect(failure("82 3f e1 1f") == .invalidTableSizeUpdate)  // an update after a field
        #expect(failure("3f e2 1f") == .invalidTableSizeUpdate)  // 4097: past the advertised 4096
        #expect(failure("20 20 20") == .invalidTableSizeUpdate)  // three updates in a row
        #expect(failure("82 82 82", maxHeaderListSize: 80) == .headerListTooLarge)
        #expect(failure("20 3f e1 1f 82") == nil)  // two updates, then a field: allowed
    }

    @Test("an entry larger than the table empties it; a smaller table evicts the oldest")
    func eviction() throws {
        var decoder = HeaderBlockDecoder(maxTableSize: 100, maxHeaderListSize: 1 << 20)
        func literal(_ name: String, _ value: String) -> [UInt8] {
            [0x40, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        _ = try self.decode(&decoder, literal("a", "1") + literal("b", "2"))  // 34 bytes each
        #expect(decoder.dynamicTableCount == 2)
        #expect(try self.decode(&decoder, [0xBE, 0xBF]).map(\.name) == ["b", "a"])
        _ = try self.decode(&decoder, literal("c", "3"))  // 102 > 100: "a" goes
        #expect(try self.decode(&decoder, [0xBE, 0xBF]).map(\.name) == ["c", "b"])
        _ = try self.decode(&decoder, literal("d", String(repeating: "x", count: 70)))  // 103 > 100
        #expect(decoder.dynamicTableCount == 0)
        _ = try self.decode(&decoder, literal("e", "5"))
        _ = try self.decode(&decoder, [0x20])  // size 0 empties the table
        #expect(decoder.dynamicTableCount == 0)
    }
}

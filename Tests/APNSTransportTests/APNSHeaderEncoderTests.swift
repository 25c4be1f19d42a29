// SPDX-License-Identifier: Apache-2.0
import APNSTransport
import NIOCore
import NIOHPACK
import Testing

/// The header encoder checked by an independent decoder (SwiftNIO's HPACK).
@Suite struct APNSHeaderEncoderTests {
    func push(_ encoder: inout APNSHeaderEncoder, token: String, id: String, expiration: Int64? = 0) -> ByteBuffer {
        var buffer = ByteBuffer()
        encoder.encodeDevicePush(
            authority: "api.push.apple.com", deviceToken: token, authorization: "bearer " + String(repeating: "j", count: 180),
            topic: "com.example.app", pushType: "alert", priority: 10, expiration: expiration, apnsID: id, collapseID: "c1",
            into: &buffer
        )
        return buffer
    }

    @Test("requests decode to the headers APNs expects, in order")
    func roundTrip() throws {
        var encoder = APNSHeaderEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var block = self.push(&encoder, token: "aa", id: "123e4567-e89b-12d3-a456-426614174000")
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(
            headers.map(\.name) == [
                ":method", ":scheme", ":path", ":authority", "authorization", "apns-topic", "apns-push-type", "apns-priority",
                "apns-expiration", "apns-id", "apns-collapse-id",
            ])
        #expect(headers.first(name: ":path") == "/3/device/aa")
        #expect(headers.first(name: "apns-priority") == "10")
        #expect(headers.first(name: "apns-expiration") == "0")
    }

    @Test("stable values are indexed once; per-request ones are never indexed")
    func indexing() throws {
        var encoder = APNSHeaderEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var first = self.push(&encoder, token: "aa", id: "00000000-0000-4000-8000-000000000001")
        let firstSize = first.readableBytes
        _ = try decoder.decodeHeaders(from: &first)
        #expect(encoder.dynamicTableCount == 5)  // authority, authorization, topic, push type, priority
        var second = self.push(&encoder, token: "bb", id: "00000000-0000-4000-8000-000000000002")
        #expect(second.readableBytes < firstSize - 200)
        let headers = try decoder.decodeHeaders(from: &second)
        #expect(headers.first(name: ":path") == "/3/device/bb")
        #expect(headers.first(name: "apns-id") == "00000000-0000-4000-8000-000000000002")
        for name in ["apns-id", "apns-expiration", "apns-collapse-id"] {
            let indexable = headers.first { $0.name == name }.map { $0.indexable }
            #expect(indexable == .neverIndexed, "\(name)")
        }
        #expect(encoder.dynamicTableCount == 5)
        // 1000 more requests keep the table as it is and stay in step with the decoder.
        for n in 0..<1000 {
            let digits = String(n, radix: 16)
            let token = String(repeating: "0", count: 64 - digits.count) + digits
            let id = "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - digits.count) + digits
            var block = self.push(&encoder, token: token, id: id)
            let decoded = try decoder.decodeHeaders(from: &block)
            #expect(decoded.first(name: "authorization")?.hasPrefix("bearer ") == true)
        }
        #expect(encoder.dynamicTableCount == 5)
    }

    @Test("a smaller table from the peer is announced and respected")
    func tableSize() throws {
        var encoder = APNSHeaderEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var warm = self.push(&encoder, token: "aa", id: "00000000-0000-4000-8000-000000000001")
        _ = try decoder.decodeHeaders(from: &warm)
        encoder.setMaxTableSize(100)
        decoder.maxDynamicTableLength = 100
        var block = self.push(&encoder, token: "bb", id: "00000000-0000-4000-8000-000000000002")
        #expect(block.getInteger(at: block.readerIndex, as: UInt8.self)! & 0xE0 == 0x20)  // size update first
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(headers.first(name: "authorization")?.count == 187)  // too big for 100 bytes: sent literally
        #expect(encoder.dynamicTableCount <= 2)
    }

    @Test("a table shrunk to 0 and grown back is announced as both sizes (RFC 7541 §4.2)")
    func shrinkThenGrow() throws {
        var encoder = APNSHeaderEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var warm = self.push(&encoder, token: "aa", id: "00000000-0000-4000-8000-000000000001")
        _ = try decoder.decodeHeaders(from: &warm)
        encoder.setMaxTableSize(0)
        encoder.setMaxTableSize(4096)
        var block = self.push(&encoder, token: "bb", id: "00000000-0000-4000-8000-000000000002")
        #expect(block.getInteger(at: block.readerIndex, as: UInt8.self) == 0x20)  // size 0
        #expect(block.getInteger(at: block.readerIndex + 1, as: UInt8.self)! & 0xE0 == 0x20)  // then 4096
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(headers.first(name: ":path") == "/3/device/bb")
        #expect(encoder.dynamicTableCount == 5, "the table was emptied, then refilled")
        var next = self.push(&encoder, token: "cc", id: "00000000-0000-4000-8000-000000000003")
        #expect(try decoder.decodeHeaders(from: &next).first(name: "apns-topic") != nil)
    }
}

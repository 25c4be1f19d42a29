// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldAPI
import Testing

@testable import HeraldServer

@Suite("The API's JSON encoder")
struct APIJSONEncoderTests {
    struct Inner: Encodable {
        var name: String
        var flags: [Bool]
    }

    struct Shape: Encodable {
        var text: String
        var count: Int
        var big: UInt64
        var ratio: Double
        var missing: String?
        var inner: Inner
        var inners: [Inner]
        var nested: [[Int]]
        var map: [String: Int]
        var empty: [String]
        var json: JSON
    }

    struct Hidden: Encodable, OmitsNilFields {
        static let fieldsOmittedWhenNil: Set<String> = ["gone"]
        var gone: String?
        var kept: String?
    }

    func text(_ value: some Encodable) throws -> String {
        String(decoding: try APIJSONEncoder().encode(value), as: UTF8.self)
    }

    @Test("members in declaration order, nil as null, nested objects and arrays closed where they end")
    func shape() throws {
        let value = Shape(
            text: "a\"b", count: -3, big: 1 << 40, ratio: 2.5, missing: nil, inner: Inner(name: "x", flags: [true, false]),
            inners: [Inner(name: "y", flags: []), Inner(name: "z", flags: [true])], nested: [[1, 2], [], [3]], map: ["k": 1], empty: [],
            json: .object([.init("o", .array([.null, .int(1), .string("s")]))])
        )
        #expect(
            try self.text(value)
                == #"{"text":"a\"b","count":-3,"big":1099511627776,"ratio":2.5,"missing":null,"inner":{"name":"x","flags":[true,false]},"#
                + #""inners":[{"name":"y","flags":[]},{"name":"z","flags":[true]}],"nested":[[1,2],[],[3]],"map":{"k":1},"empty":[],"#
                + #""json":{"o":[null,1,"s"]}}"#
        )
        // The same as Foundation's encoder, member for member.
        let foundation = try JSONValue.parse(Array(try JSONEncoder().encode(value)))
        let ours = try JSONValue.parse(try APIJSONEncoder().encode(value))
        guard case .object(let expected) = foundation, case .object(let written) = ours else {
            Issue.record("not objects")
            return
        }
        #expect(
            Dictionary(uniqueKeysWithValues: written.filter { $0.1 != .null }.map { ($0.0, $0.1) })
                == Dictionary(uniqueKeysWithValues: expected.map { ($0.0, $0.1) }))
    }

    struct Widths: Encodable {
        var bool = true
        var int = -1
        var int8: Int8 = -8
        var int16: Int16 = -16
        var int32: Int32 = -32
        var int64: Int64 = .min
        var uint: UInt = 1
        var uint8: UInt8 = 8
        var uint16: UInt16 = 16
        var uint32: UInt32 = 32
        var uint64: UInt64 = 64
        var float: Float = 0.5
        var double = -0.25
        var string = "s\n"
        var lists = Lists()
    }

    struct Lists: Encodable {
        var bools = [false]
        var ints = [Int.max]
        var int8s: [Int8] = [.min]
        var int16s: [Int16] = [.min]
        var int32s: [Int32] = [.min]
        var int64s: [Int64] = [.max]
        var uints: [UInt] = [2]
        var uint8s: [UInt8] = [.max]
        var uint16s: [UInt16] = [.max]
        var uint32s: [UInt32] = [.max]
        var uint64s: [UInt64] = [UInt64(Int64.max)]
        var floats: [Float] = [1.5]
        var doubles = [2.0]
        var strings = ["\u{1}"]
    }

    @Test("every primitive width, as a member and in an array, as Foundation writes it; an unsigned one past 64 bits signed fails")
    func widths() throws {
        let value = Widths()
        #expect(try JSONValue.parse(try APIJSONEncoder().encode(value)) == JSONValue.parse(Array(try JSONEncoder().encode(value))))
        #expect(
            try self.text(value).hasPrefix(
                #"{"bool":true,"int":-1,"int8":-8,"int16":-16,"int32":-32,"int64":-9223372036854775808,"uint":1,"uint8":8,"#))
        var past = Widths()
        past.uint64 = .max
        #expect(throws: EncodingError.self) { try APIJSONEncoder().encode(past) }
        past = Widths()
        past.lists.uints = [.max]
        #expect(throws: EncodingError.self) { try APIJSONEncoder().encode(past) }
    }

    /// A device with every optional set or not, and strings that need escapes, from `seed`.
    static func device(_ seed: UInt64) -> DeviceResponse {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        let pieces = ["a", "Zé", "\"", "\\", "\n", "\u{1}", "\u{7f}", "😀", "/", " ", "\u{2028}", "x_y-1.2"]
        func text() -> String { (0..<Int(next() % 4)).map { _ in pieces[Int(next() % UInt64(pieces.count))] }.joined() }
        func maybe() -> String? { next() % 3 == 0 ? nil : text() }
        func number() -> Int64 { Int64(bitPattern: next()) >> Int64(next() % 64) }
        return DeviceResponse(
            token: text(), kind: text(), environment: text(), userId: maybe(), tags: (0..<Int(next() % 3)).map { _ in text() },
            locale: maybe(), timeZone: maybe(), appVersion: maybe(), platform: maybe(), activityId: maybe(), attributesType: maybe(),
            active: next() % 2 == 0, createdAt: number(), lastRegisteredAt: number(), invalidatedAt: next() % 2 == 0 ? nil : number(),
            invalidationReason: maybe(), publicKeyType: maybe(), publicKey: maybe(),
            invalidations: next() % 3 == 0
                ? nil
                : (0..<Int(next() % 3)).map { _ in
                    .init(reason: text(), apnsTimestamp: next() % 2 == 0 ? nil : number(), at: number(), applied: next() % 2 == 0)
                },
            transport: maybe()
        )
    }

    @Test("a device, alone and in a list, writes itself as the encoder writes it through its Encodable conformance, byte for byte")
    func writtenDirectly() throws {
        let codable = APIJSONEncoder(writesDirectly: false)
        for seed in 0..<500 as Range<UInt64> {
            let device = Self.device(seed)
            #expect(try APIJSONEncoder().encode(device) == codable.encode(device), "seed \(seed)")
        }
        for next in [nil, "c"] {
            let list = DeviceList(devices: (0..<20).map { Self.device($0 + 1000) }, next: next)
            #expect(try APIJSONEncoder().encode(list) == codable.encode(list))
        }
    }

    @Test("a type's omitted fields are left out when nil, only on that type")
    func omitted() throws {
        #expect(try self.text(Hidden(gone: nil, kept: nil)) == #"{"kept":null}"#)
        #expect(try self.text(Hidden(gone: "g", kept: "k")) == #"{"gone":"g","kept":"k"}"#)
        struct Outer: Encodable {
            var hidden: Hidden
            var gone: String?
        }
        #expect(try self.text(Outer(hidden: Hidden(gone: nil, kept: nil), gone: nil)) == #"{"hidden":{"kept":null},"gone":null}"#)
    }

    @Test("primitives, empty values and the API's own response types at the top level")
    func topLevel() throws {
        #expect(try self.text("s") == #""s""#)
        #expect(try self.text(7) == "7")
        #expect(try self.text([Int]()) == "[]")
        struct Nothing: Encodable {}
        #expect(try self.text(Nothing()) == "{}")
        #expect(try self.text(APIErrorBody(code: "c", message: "m")) == #"{"error":{"code":"c","message":"m"}}"#)
        #expect(try self.text(AudienceSelector.everyone) == #""all""#)
    }

    @Test("a container used after a later sibling fails the encoding instead of writing out of place")
    func outOfOrder() throws {
        struct Late: Encodable {
            enum Keys: String, CodingKey { case a, b, c }
            func encode(to encoder: any Encoder) throws {
                var outer = encoder.container(keyedBy: Keys.self)
                var first = outer.nestedContainer(keyedBy: Keys.self, forKey: .a)
                try first.encode(1, forKey: .b)
                try outer.encode(2, forKey: .b)
                try first.encode(3, forKey: .c)
            }
        }
        #expect(throws: EncodingError.self) { try APIJSONEncoder().encode(Late()) }
        struct Twice: Encodable {
            func encode(to encoder: any Encoder) throws {
                var single = encoder.singleValueContainer()
                try single.encode(1)
                try single.encode(2)
            }
        }
        #expect(throws: EncodingError.self) { try APIJSONEncoder().encode(Twice()) }
        struct InOrder: Encodable {
            enum Keys: String, CodingKey { case a, b, c }
            func encode(to encoder: any Encoder) throws {
                var outer = encoder.container(keyedBy: Keys.self)
                var first = outer.nestedContainer(keyedBy: Keys.self, forKey: .a)
                try first.encode(1, forKey: .b)
                var list = outer.nestedUnkeyedContainer(forKey: .b)
                try list.encode("x")
                // An unkeyed container's count is what it has written (checked through the output below).
                guard list.count == 1 else { return }
                var deeper = list.nestedContainer(keyedBy: Keys.self)
                try deeper.encodeNil(forKey: .c)
                _ = outer.superEncoder(forKey: .c)
                // The same container asked for again continues the same object.
                var again = encoder.container(keyedBy: Keys.self)
                try again.encode(true, forKey: .a)
            }
        }
        #expect(try self.text(InOrder()) == #"{"a":{"b":1},"b":["x",{"c":null}],"c":{},"a":true}"#)
    }
}

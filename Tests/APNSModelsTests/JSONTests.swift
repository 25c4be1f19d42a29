// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Testing

@Suite struct JSONTests {
    @Test(
        "valid documents parse and serialize back compactly",
        arguments: [
            (#"{"a":1,"b":[true,false,null],"c":"x"}"#, #"{"a":1,"b":[true,false,null],"c":"x"}"#),
            (#" { "a" : -0.5e2 , "b" : 1.25 } "#, #"{"a":-50,"b":1.25}"#),
            (#""quote \" backslash \\ slash \/ tab \t nl \n u \u00e9 \ud83d\ude00""#, "\"quote \\\" backslash \\\\ slash / tab \\t nl \\n u é 😀\""),
            ("[]", "[]"),
            ("{}", "{}"),
            ("9007199254740993", "9007199254740993"),
        ])
    func roundTrip(input: String, output: String) throws {
        let value = try JSONValue.parse(input)
        #expect(value.jsonString == output)
        #expect(try JSONValue.parse(value.jsonString) == value)
        try JSONValue.validate(Array(input.utf8))
    }

    @Test(
        "invalid documents are refused with an offset",
        arguments: [
            "", "{", "[1,]", "{\"a\":}", "{'a':1}", "01", "1.", "-", "tru", "\"\\x\"", "\"\u{01}\"", "[1] 2", "{\"a\" 1}",
            "\"\\ud800\"", "\"\\udc00x\"", "nan", "1e", "\"unterminated",
        ])
    func invalid(input: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(input) }
        #expect(throws: JSONParseError.self) { try JSONValue.validate(Array(input.utf8)) }
    }

    @Test("malformed UTF-8 and deep nesting are refused without crashing")
    func hostileInput() {
        for bytes: [UInt8] in [[0x22, 0xC3, 0x22], [0x22, 0xE0, 0x80, 0x80, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xFF, 0x22]] {
            #expect(throws: JSONParseError.self) { try JSONValue.parse(bytes) }
        }
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try JSONValue.parse(ok) }
    }

    @Test("control characters are escaped when serializing")
    func escaping() {
        #expect(JSONValue.string("a\u{01}b\"c").jsonString == #""a\u0001b\"c""#)
        #expect(JSONValue.string("\\\n\r\t\u{1F}é🙂").jsonString == #""\\\n\r\t\u001fé🙂""#)
        #expect(JSONValue.string("").jsonString == #""""#)
        // Every scalar below 0x80 and a few beyond, at every position in a run: what is written parses back the same.
        let scalars = (0..<0x80).map { Character(Unicode.Scalar(UInt8($0))) } + ["é", "🙂", "\u{2028}"]
        for scalar in scalars {
            for text in [String(scalar), "ab\(scalar)", "\(scalar)cd", "a\(scalar)\(scalar)b"] {
                #expect((try? JSONValue.parse(JSONValue.string(text).serialized())) == .string(text), "\(text.unicodeScalars.map(\.value))")
            }
        }
    }

    @Test("base64url encodes without padding and decodes both alphabets")
    func base64() {
        #expect(Base64URL.encode(Array("hello?>".utf8)) == "aGVsbG8_Pg")
        #expect(Base64URL.decode("aGVsbG8_Pg") == Array("hello?>".utf8))
        #expect(Base64URL.decode("aGVsbG8/Pg==") == Array("hello?>".utf8))
        #expect(Base64URL.encodeStandard([0xfb, 0xff]) == "+/8=")
        // Every length from 0 to 40, both alphabets, through a decode and the padding rules.
        for count in 0...40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 251) }
            let url = Base64URL.encode(bytes)
            let standard = Base64URL.encodeStandard(bytes)
            #expect(url.utf8.count == (count * 4 + 2) / 3 && !url.contains("="))
            #expect(standard.utf8.count == (count + 2) / 3 * 4)
            #expect(Base64URL.decode(url) == bytes && Base64URL.decode(standard) == bytes)
            #expect(standard.filter { $0 != "=" }.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 } == Array(url))
        }
        #expect(Base64URL.encode(ArraySlice([0xfb, 0xff, 0x00]).dropFirst()) == "_wA")  // not from offset 0
        #expect(Base64URL.decode("a") == nil)
        #expect(Base64URL.decode("ab$c") == nil)
        #expect(Base64URL.decode("ab=c") == nil)
    }
}

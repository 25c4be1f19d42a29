// SPDX-License-Identifier: Apache-2.0

/// Why a document is not JSON, with the byte offset where parsing stopped.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var offset: Int

    public var description: String { "invalid JSON at byte \(self.offset): \(self.message)" }
}

extension JSONValue {
    /// The deepest nesting accepted; deeper documents are refused rather than risking the stack.
    public static let maximumDepth = 64

    /// Parses one JSON document (RFC 8259): strict grammar, UTF-8 checked, nothing but white space after it.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue in
            var parser = JSONParser(buffer: buffer)
            return try parser.document(build: true)
        }
    }

    public static func parse(_ string: String) throws(JSONParseError) -> JSONValue {
        try Self.parse(Array(string.utf8))
    }

    /// Checks that the bytes are one JSON document without building it (no allocation for the values).
    public static func validate(_ buffer: UnsafeRawBufferPointer) throws(JSONParseError) {
        let bytes = UnsafeBufferPointer(start: buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), count: buffer.count)
        var parser = JSONParser(buffer: bytes)
        _ = try parser.document(build: false)
    }

    /// Checks that the bytes are one JSON document without building it.
    public static func validate(_ bytes: [UInt8]) throws(JSONParseError) {
        let failure: JSONParseError? = bytes.withUnsafeBytes { raw in
            do throws(JSONParseError) {
                try Self.validate(raw)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }
}

struct JSONParser {
    let buffer: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0

    init(buffer: UnsafeBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    mutating func document(build: Bool) throws(JSONParseError) -> JSONValue {
        self.skipWhitespace()
        let value = try self.value(build: build)
        self.skipWhitespace()
        guard self.index == self.buffer.count else { throw self.error("unexpected data after the document") }
        return value
    }

    private func error(_ message: String) -> JSONParseError {
        JSONParseError(message: message, offset: self.index)
    }

    private mutating func skipWhitespace() {
        while self.index < self.buffer.count {
            switch self.buffer[self.index] {
            case 0x20, 0x0A, 0x0D, 0x09: self.index += 1
            default: return
            }
        }
    }

    private mutating func value(build: Bool) throws(JSONParseError) -> JSONValue {
        guard self.index < self.buffer.count else { throw self.error("unexpected end of input") }
        switch self.buffer[self.index] {
        case UInt8(ascii: "{"): return try self.object(build: build)
        case UInt8(ascii: "["): return try self.array(build: build)
        case UInt8(ascii: "\""):
            let string = try self.string(build: build)
            return build ? .string(string) : .null
        case UInt8(ascii: "t"):
            try self.literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try self.literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try self.literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try self.number(build: build)
        default: throw self.error("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard self.index + count <= self.buffer.count else { throw self.error("unexpected end of input") }
        let start = word.utf8Start
        for offset in 0..<count where self.buffer[self.index + offset] != start[offset] {
            throw self.error("invalid literal")
        }
        self.index += count
    }

    private mutating func enter() throws(JSONParseError) {
        self.depth += 1
        guard self.depth <= JSONValue.maximumDepth else { throw self.error("nesting deeper than \(JSONValue.maximumDepth)") }
    }

    private mutating func object(build: Bool) throws(JSONParseError) -> JSONValue {
        try self.enter()
        self.index += 1
        var members: [(String, JSONValue)] = []
        self.skipWhitespace()
        if self.index < self.buffer.count, self.buffer[self.index] == UInt8(ascii: "}") {
            self.index += 1
            self.depth -= 1
            return build ? .object(members) : .null
        }
        while true {
            self.skipWhitespace()
            guard self.index < self.buffer.count, self.buffer[self.index] == UInt8(ascii: "\"") else {
                throw self.error("expected a string key")
            }
            let key = try self.string(build: build)
            self.skipWhitespace()
            guard self.index < self.buffer.count, self.buffer[self.index] == UInt8(ascii: ":") else {
                throw self.error("expected ':'")
            }
            self.index += 1
            self.skipWhitespace()
            let value = try self.value(build: build)
            if build { members.append((key, value)) }
            self.skipWhitespace()
            guard self.index < self.buffer.count else { throw self.error("unexpected end of input") }
            switch self.buffer[self.index] {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "}"):
                self.index += 1
                self.depth -= 1
                return build ? .object(members) : .null
            default: throw self.error("expected ',' or '}'")
            }
        }
    }

    private mutating func array(build: Bool) throws(JSONParseError) -> JSONValue {
        try self.enter()
        self.index += 1
        var elements: [JSONValue] = []
        self.skipWhitespace()
        if self.index < self.buffer.count, self.buffer[self.index] == UInt8(ascii: "]") {
            self.index += 1
            self.depth -= 1
            return build ? .array(elements) : .null
        }
        while true {
            self.skipWhitespace()
            let value = try self.value(build: build)
            if build { elements.append(value) }
            self.skipWhitespace()
            guard self.index < self.buffer.count else { throw self.error("unexpected end of input") }
            switch self.buffer[self.index] {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "]"):
                self.index += 1
                self.depth -= 1
                return build ? .array(elements) : .null
            default: throw self.error("expected ',' or ']'")
            }
        }
    }

    private mutating func number(build: Bool) throws(JSONParseError) -> JSONValue {
        let start = self.index
        var isInteger = true
        if self.buffer[self.index] == UInt8(ascii: "-") { self.index += 1 }
        guard self.index < self.buffer.count else { throw self.error("unexpected end of number") }
        if self.buffer[self.index] == UInt8(ascii: "0") {
            self.index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(self.buffer[self.index]) {
            self.skipDigits()
        } else {
            throw self.error("invalid number")
        }
        if self.index < self.buffer.count, self.buffer[self.index] == UInt8(ascii: ".") {
            isInteger = false
            self.index += 1
            guard self.skipDigits() > 0 else { throw self.error("expected digits after '.'") }
        }
        if self.index < self.buffer.count, self.buffer[self.index] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            self.index += 1
            if self.index < self.buffer.count,
                self.buffer[self.index] == UInt8(ascii: "+") || self.buffer[self.index] == UInt8(ascii: "-")
            {
                self.index += 1
            }
            guard self.skipDigits() > 0 else { throw self.error("expected exponent digits") }
        }
        guard build else { return .null }
        let text = String(decoding: UnsafeBufferPointer(rebasing: self.buffer[start..<self.index]), as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .int(integer) }
        guard let double = Double(text), double.isFinite else { throw self.error("number out of range") }
        return .double(double)
    }

    @discardableResult
    private mutating func skipDigits() -> Int {
        let start = self.index
        while self.index < self.buffer.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.buffer[self.index]) {
            self.index += 1
        }
        return self.index - start
    }

    private mutating func string(build: Bool) throws(JSONParseError) -> String {
        self.index += 1  // opening quote
        let start = self.index
        var hasEscapes = false
        // Fast scan: plain ASCII and well-formed UTF-8 without escapes.
        while self.index < self.buffer.count {
            let byte = self.buffer[self.index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: self.buffer[start..<self.index])
                self.index += 1
                if hasEscapes {
                    return build ? try self.unescape(slice, base: start) : ""
                }
                return build ? String(decoding: slice, as: UTF8.self) : ""
            } else if byte == UInt8(ascii: "\\") {
                hasEscapes = true
                self.index += 1
                guard self.index < self.buffer.count else { break }
                switch self.buffer[self.index] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    self.index += 1
                case UInt8(ascii: "u"):
                    let code = try self.hex4(at: self.index + 1)
                    self.index += 5
                    if (0xDC00...0xDFFF).contains(code) { throw self.error("unpaired surrogate") }
                    if (0xD800...0xDBFF).contains(code) {
                        guard self.index + 1 < self.buffer.count, self.buffer[self.index] == UInt8(ascii: "\\"),
                            self.buffer[self.index + 1] == UInt8(ascii: "u"),
                            (0xDC00...0xDFFF).contains(try self.hex4(at: self.index + 2))
                        else { throw self.error("unpaired surrogate") }
                        self.index += 6
                    }
                default: throw self.error("invalid escape")
                }
            } else if byte < 0x20 {
                throw self.error("control character in string")
            } else if byte < 0x80 {
                self.index += 1
            } else {
                try self.skipUTF8Scalar()
            }
        }
        throw self.error("unterminated string")
    }

    /// Checks one multi-byte UTF-8 sequence (no overlongs, no surrogates, ≤ U+10FFFF).
    private mutating func skipUTF8Scalar() throws(JSONParseError) {
        let lead = self.buffer[self.index]
        let length: Int
        var minimum: UInt32
        var scalar: UInt32
        switch lead {
        case 0xC2...0xDF:
            length = 2
            minimum = 0x80
            scalar = UInt32(lead & 0x1F)
        case 0xE0...0xEF:
            length = 3
            minimum = 0x800
            scalar = UInt32(lead & 0x0F)
        case 0xF0...0xF4:
            length = 4
            minimum = 0x10000
            scalar = UInt32(lead & 0x07)
        default: throw self.error("invalid UTF-8")
        }
        guard self.index + length <= self.buffer.count else { throw self.error("truncated UTF-8") }
        for offset in 1..<length {
            let byte = self.buffer[self.index + offset]
            guard byte & 0xC0 == 0x80 else { throw self.error("invalid UTF-8") }
            scalar = scalar << 6 | UInt32(byte & 0x3F)
        }
        guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else {
            throw self.error("invalid UTF-8")
        }
        self.index += length
    }

    /// The four hex digits at `position` as a number.
    private func hex4(at position: Int) throws(JSONParseError) -> UInt32 {
        guard position + 4 <= self.buffer.count else { throw self.error("truncated \\u escape") }
        var value: UInt32 = 0
        for offset in 0..<4 {
            guard let digit = Self.hexValue(self.buffer[position + offset]) else { throw self.error("invalid \\u escape") }
            value = value << 4 | digit
        }
        return value
    }

    private static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(byte - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    /// Decodes a string body already checked by `string(build:)`.
    private func unescape(_ slice: UnsafeBufferPointer<UInt8>, base: Int) throws(JSONParseError) -> String {
        var scalars = String.UnicodeScalarView()
        var bytes: [UInt8] = []
        var i = 0
        func flush() {
            if !bytes.isEmpty {
                scalars.append(contentsOf: String(decoding: bytes, as: UTF8.self).unicodeScalars)
                bytes.removeAll(keepingCapacity: true)
            }
        }
        func hex4(_ at: Int) -> UInt32 {
            var value: UInt32 = 0
            for offset in 0..<4 { value = value << 4 | (Self.hexValue(slice[at + offset]) ?? 0) }
            return value
        }
        while i < slice.count {
            let byte = slice[i]
            guard byte == UInt8(ascii: "\\") else {
                bytes.append(byte)
                i += 1
                continue
            }
            flush()
            let escape = slice[i + 1]
            i += 2
            switch escape {
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = hex4(i)
                i += 4
                if (0xD800...0xDBFF).contains(code) {
                    guard i + 6 <= slice.count, slice[i] == UInt8(ascii: "\\"), slice[i + 1] == UInt8(ascii: "u") else {
                        throw JSONParseError(message: "unpaired surrogate", offset: base + i)
                    }
                    let low = hex4(i + 2)
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw JSONParseError(message: "unpaired surrogate", offset: base + i)
                    }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                } else if (0xDC00...0xDFFF).contains(code) {
                    throw JSONParseError(message: "unpaired surrogate", offset: base + i)
                }
                guard let scalar = Unicode.Scalar(code) else {
                    throw JSONParseError(message: "invalid code point", offset: base + i)
                }
                scalars.append(scalar)
            default: scalars.append(Unicode.Scalar(escape))  // \" \\ \/
            }
        }
        flush()
        return String(scalars)
    }
}

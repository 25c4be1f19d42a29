// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// Decodes a `Decodable` from a parsed `JSONValue`, strictly: an object member that the type's
/// coding keys do not name is an error (`unknownField`), and so is a key that repeats. Numbers are
/// not converted between kinds except an integer where a `Double` is asked for.
struct JSONValueDecoder {
    /// Why a value does not fit its type, and where (`audience.tokens[2]`).
    struct Failure: Error, Sendable, CustomStringConvertible {
        enum Kind: Sendable, Equatable {
            case unknownField
            case duplicateField
            case mismatch
        }

        var kind: Kind
        var path: [String]
        var message: String

        /// The request's own field this is about (the first part of the path).
        var field: String { self.path.first ?? "" }
        var description: String { self.message }

        static func render(_ path: [String]) -> String {
            var text = ""
            for part in path {
                if part.hasPrefix("[") { text += part } else { text += text.isEmpty ? part : "." + part }
            }
            return text
        }
    }

    func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws(Failure) -> T {
        do {
            return try T(from: ValueDecoder(value: value, path: []))
        } catch let failure as Failure {
            throw failure
        } catch let error as DecodingError {
            // Thrown by a type's own init(from:) (AudienceSelector's "all", say).
            let context: DecodingError.Context
            switch error {
            case .dataCorrupted(let c), .keyNotFound(_, let c), .typeMismatch(_, let c), .valueNotFound(_, let c): context = c
            @unknown default: throw Failure(kind: .mismatch, path: [], message: "\(error)")
            }
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            throw Failure(kind: .mismatch, path: path, message: "\(Failure.render(path)): \(context.debugDescription)")
        } catch {
            throw Failure(kind: .mismatch, path: [], message: "\(error)")
        }
    }
}

private struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { "[\(self.intValue ?? 0)]" }
    init(_ index: Int) { self.intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

private struct NameKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { self.stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

private struct ValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: JSONValue
    let path: [String]

    var codingPath: [any CodingKey] {
        self.path.map { $0.hasPrefix("[") ? IndexKey(Int($0.dropFirst().dropLast()) ?? 0) as any CodingKey : NameKey($0) }
    }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func mismatch(_ expected: String) -> JSONValueDecoder.Failure {
        let found: String
        switch self.value {
        case .null: found = "null"
        case .bool: found = "a boolean"
        case .int, .double: found = "a number"
        case .string: found = "a string"
        case .array: found = "an array"
        case .object: found = "an object"
        }
        let where_ = self.path.isEmpty ? "the body" : JSONValueDecoder.Failure.render(self.path)
        return JSONValueDecoder.Failure(kind: .mismatch, path: self.path, message: "\(where_) must be \(expected), not \(found)")
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = self.value else { throw self.mismatch("an object") }
        var seen = Set<String>(minimumCapacity: members.count)
        for (name, _) in members {
            guard seen.insert(name).inserted else {
                throw JSONValueDecoder.Failure(
                    kind: .duplicateField, path: self.path + [name], message: "\(JSONValueDecoder.Failure.render(self.path + [name])) is given twice"
                )
            }
            guard Key(stringValue: name) != nil else {
                let path = self.path + [name]
                throw JSONValueDecoder.Failure(kind: .unknownField, path: path, message: "unknown field '\(JSONValueDecoder.Failure.render(path))'")
            }
        }
        return KeyedDecodingContainer(KeyedContainer<Key>(members: members, path: self.path))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = self.value else { throw self.mismatch("an array") }
        return UnkeyedContainer(items: items, path: self.path)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool {
        if case .null = self.value { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let bool) = self.value else { throw self.mismatch("true or false") }
        return bool
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let string) = self.value else { throw self.mismatch("a string") }
        return string
    }

    func decode(_ type: Double.Type) throws -> Double {
        switch self.value {
        case .double(let double): return double
        case .int(let int): return Double(int)
        default: throw self.mismatch("a number")
        }
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try self.decode(Double.self)) }

    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .int(let int) = self.value else { throw self.mismatch("a whole number") }
        guard let exact = T(exactly: int) else { throw self.mismatch("a whole number from \(T.min) to \(T.max)") }
        return exact
    }

    func decode(_ type: Int.Type) throws -> Int { try self.integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try self.integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try self.integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try self.integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try self.integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try self.integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try self.integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try self.integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try self.integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try self.integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: self) }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [(String, JSONValue)]
    let path: [String]

    var codingPath: [any CodingKey] { ValueDecoder(value: .null, path: self.path).codingPath }
    var allKeys: [Key] { self.members.compactMap { Key(stringValue: $0.0) } }

    func value(_ key: Key) -> JSONValue? {
        for (name, value) in self.members where name == key.stringValue { return value }
        return nil
    }

    func contains(_ key: Key) -> Bool { self.value(key) != nil }

    func child(_ key: Key) throws -> ValueDecoder {
        guard let value = self.value(key) else {
            let path = self.path + [key.stringValue]
            throw JSONValueDecoder.Failure(kind: .mismatch, path: path, message: "\(JSONValueDecoder.Failure.render(path)) is required")
        }
        return ValueDecoder(value: value, path: self.path + [key.stringValue])
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        guard let value = self.value(key) else { return true }
        if case .null = value { return true }
        return false
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try T(from: try self.child(key)) }

    // Optional primitives, the fields of most request types: read in place, no child decoder.
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        switch self.value(key) {
        case nil, .null?: return nil
        case .string(let string)?: return string
        default: return try self.child(key).decode(type)
        }
    }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        switch self.value(key) {
        case nil, .null?: return nil
        case .bool(let bool)?: return bool
        default: return try self.child(key).decode(type)
        }
    }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        switch self.value(key) {
        case nil, .null?: return nil
        case .int(let int)?: return int
        default: return try self.child(key).decode(type)
        }
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = self.value(key) else { return nil }
        if case .null = value { return nil }
        return try T(from: ValueDecoder(value: value, path: self.path + [key.stringValue]))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try self.child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try self.child(key).unkeyedContainer() }
    func superDecoder() throws -> any Decoder { ValueDecoder(value: .object(self.members), path: self.path) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try self.child(key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let items: [JSONValue]
    let path: [String]
    var currentIndex = 0

    init(items: [JSONValue], path: [String]) {
        self.items = items
        self.path = path
    }

    var codingPath: [any CodingKey] { ValueDecoder(value: .null, path: self.path).codingPath }
    var count: Int? { self.items.count }
    var isAtEnd: Bool { self.currentIndex >= self.items.count }

    mutating func next() throws -> ValueDecoder {
        guard !self.isAtEnd else {
            throw JSONValueDecoder.Failure(kind: .mismatch, path: self.path, message: "\(JSONValueDecoder.Failure.render(self.path)) is too short")
        }
        defer { self.currentIndex += 1 }
        return ValueDecoder(value: self.items[self.currentIndex], path: self.path + ["[\(self.currentIndex)]"])
    }

    mutating func decodeNil() throws -> Bool {
        guard !self.isAtEnd, case .null = self.items[self.currentIndex] else { return false }
        self.currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: try self.next()) }

    // The primitives read their element in place: no decoder, path or existential per element
    // (a send lists up to 10,000 tokens). The path is built only for an error.
    mutating func decode(_ type: String.Type) throws -> String {
        if !self.isAtEnd, case .string(let string) = self.items[self.currentIndex] {
            self.currentIndex += 1
            return string
        }
        return try self.next().decode(type)
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool {
        if !self.isAtEnd, case .bool(let bool) = self.items[self.currentIndex] {
            self.currentIndex += 1
            return bool
        }
        return try self.next().decode(type)
    }
    mutating func decode(_ type: Int64.Type) throws -> Int64 {
        if !self.isAtEnd, case .int(let int) = self.items[self.currentIndex] {
            self.currentIndex += 1
            return int
        }
        return try self.next().decode(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try self.next().container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try self.next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try self.next() }
}

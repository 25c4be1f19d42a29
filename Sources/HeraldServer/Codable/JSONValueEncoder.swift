// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// A response type whose listed optional fields are left out when nil; every other nil is written
/// as `null`, so a client sees each field of the shape whether it has a value or not.
protocol OmitsNilFields {
    static var fieldsOmittedWhenNil: Set<String> { get }
}

/// Encodes an `Encodable` to a `JSONValue`, members in the order the type encodes them (its
/// declaration order, for synthesised conformances), which Herald's serializer then writes.
struct JSONValueEncoder {
    func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let root = Node()
        try value.encode(to: NodeEncoder(node: root, omitted: (T.self as? any OmitsNilFields.Type)?.fieldsOmittedWhenNil ?? []))
        return root.value
    }
}

/// A value under construction: objects and arrays are filled by their containers.
private final class Node {
    enum Content {
        case empty
        case value(JSONValue)
        case object([(String, Node)])
        case array([Node])
    }

    var content = Content.empty

    init() {}
    init(_ value: JSONValue) { self.content = .value(value) }

    var value: JSONValue {
        switch self.content {
        case .empty: return .object([])
        case .value(let value): return value
        case .object(let members): return .object(members.map { ($0.0, $0.1.value) })
        case .array(let items): return .array(items.map(\.value))
        }
    }

    func append(_ key: String, _ node: Node) {
        if case .object(var members) = self.content {
            self.content = .empty
            members.append((key, node))
            self.content = .object(members)
        } else {
            self.content = .object([(key, node)])
        }
    }

    func append(_ node: Node) {
        if case .array(var items) = self.content {
            self.content = .empty
            items.append(node)
            self.content = .array(items)
        } else {
            self.content = .array([node])
        }
    }
}

/// The primitive values' JSON, or nil for anything that encodes itself.
private func primitive<T: Encodable>(_ value: T) -> JSONValue? {
    switch value {
    case let string as String: return .string(string)
    case let bool as Bool: return .bool(bool)
    case let int as Int: return .int(Int64(int))
    case let int as Int64: return .int(int)
    case let int as Int32: return .int(Int64(int))
    case let double as Double: return .double(double)
    default: return nil
    }
}

private func encoded<T: Encodable>(_ value: T, path: [any CodingKey]) throws -> Node {
    if let json = primitive(value) { return Node(json) }
    let node = Node()
    try value.encode(to: NodeEncoder(node: node, path: path, omitted: (T.self as? any OmitsNilFields.Type)?.fieldsOmittedWhenNil ?? []))
    return node
}

private struct NodeEncoder: Encoder, SingleValueEncodingContainer {
    let node: Node
    var path: [any CodingKey] = []
    var omitted: Set<String> = []

    var codingPath: [any CodingKey] { self.path }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = self.node.content {} else { self.node.content = .object([]) }
        return KeyedEncodingContainer(KeyedContainer<Key>(node: self.node, path: self.path, omitted: self.omitted))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = self.node.content {} else { self.node.content = .array([]) }
        return UnkeyedContainer(node: self.node, path: self.path)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() { self.node.content = .value(.null) }
    func encode(_ value: Bool) { self.node.content = .value(.bool(value)) }
    func encode(_ value: String) { self.node.content = .value(.string(value)) }
    func encode(_ value: Double) { self.node.content = .value(.double(value)) }
    func encode(_ value: Float) { self.node.content = .value(.double(Double(value))) }
    func encode(_ value: Int) { self.node.content = .value(.int(Int64(value))) }
    func encode(_ value: Int8) { self.node.content = .value(.int(Int64(value))) }
    func encode(_ value: Int16) { self.node.content = .value(.int(Int64(value))) }
    func encode(_ value: Int32) { self.node.content = .value(.int(Int64(value))) }
    func encode(_ value: Int64) { self.node.content = .value(.int(value)) }
    func encode(_ value: UInt) throws { self.node.content = .value(.int(try Self.exact(value))) }
    func encode(_ value: UInt8) { self.node.content = .value(.int(Int64(value))) }
    func encode(_ value: UInt16) { self.node.content = .value(.int(Int64(value))) }
    func encode(_ value: UInt32) { self.node.content = .value(.int(Int64(value))) }
    func encode(_ value: UInt64) throws { self.node.content = .value(.int(try Self.exact(value))) }

    func encode<T: Encodable>(_ value: T) throws {
        if let json = primitive(value) {
            self.node.content = .value(json)
        } else {
            try value.encode(to: self)
        }
    }

    static func exact<T: BinaryInteger>(_ value: T) throws -> Int64 {
        guard let exact = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(value) does not fit in 64 bits"))
        }
        return exact
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: Node
    let path: [any CodingKey]
    let omitted: Set<String>

    var codingPath: [any CodingKey] { self.path }

    mutating func encodeNil(forKey key: Key) { self.node.append(key.stringValue, Node(.null)) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        self.node.append(key.stringValue, try encoded(value, path: self.path + [key]))
    }

    // Synthesised conformances call these for optionals: nil is written as null unless omitted.
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value {
            try self.encode(value, forKey: key)
        } else if !self.omitted.contains(key.stringValue) {
            self.encodeNil(forKey: key)
        }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) { self.optional(value.map(JSONValue.string), key) }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) { self.optional(value.map(JSONValue.bool), key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) { self.optional(value.map(JSONValue.double), key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) { self.optional(value.map { .double(Double($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) { self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) { self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) { self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) { self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) { self.optional(value.map(JSONValue.int), key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) { self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) { self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) { self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { self.optional(try value.map { .int(try NodeEncoder.exact($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { self.optional(try value.map { .int(try NodeEncoder.exact($0)) }, key) }

    private mutating func optional(_ json: JSONValue?, _ key: Key) {
        if let json {
            self.node.append(key.stringValue, Node(json))
        } else if !self.omitted.contains(key.stringValue) {
            self.encodeNil(forKey: key)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = Node()
        self.node.append(key.stringValue, child)
        return NodeEncoder(node: child, path: self.path + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = Node()
        self.node.append(key.stringValue, child)
        return NodeEncoder(node: child, path: self.path + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { NodeEncoder(node: self.node, path: self.path) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let child = Node()
        self.node.append(key.stringValue, child)
        return NodeEncoder(node: child, path: self.path + [key])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let node: Node
    let path: [any CodingKey]

    var codingPath: [any CodingKey] { self.path }
    var count: Int {
        if case .array(let items) = self.node.content { return items.count }
        return 0
    }

    mutating func encodeNil() { self.node.append(Node(.null)) }
    mutating func encode<T: Encodable>(_ value: T) throws { self.node.append(try encoded(value, path: self.path)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = Node()
        self.node.append(child)
        return NodeEncoder(node: child, path: self.path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = Node()
        self.node.append(child)
        return NodeEncoder(node: child, path: self.path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = Node()
        self.node.append(child)
        return NodeEncoder(node: child, path: self.path)
    }
}

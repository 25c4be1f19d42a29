// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// A response type whose listed optional fields are left out when nil; every other nil is written
/// as `null`, so a client sees each field of the shape whether it has a value or not.
protocol OmitsNilFields {
    static var fieldsOmittedWhenNil: Set<String> { get }
}

/// Writes an `Encodable`'s compact JSON straight into bytes as the value encodes itself: members
/// in the order the type encodes them (its declaration order, for synthesised conformances),
/// no tree built in between.
///
/// A container is written while it is the innermost one open; a container used again after a
/// sibling that came later in the output (which only a hand-written `encode(to:)` can do) fails
/// the encoding with `EncodingError.invalidValue` rather than writing its members out of place.
struct APIJSONEncoder {
    /// Whether a ``JSONWritable`` value writes itself (the same bytes); off only in the tests
    /// that hold the two ways together.
    var writesDirectly = true

    func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let writer = JSONStreamWriter(writesDirectly: self.writesDirectly)
        // The top-level value as any nested one: a primitive, a value that writes itself, or
        // one that encodes itself into a slot.
        try writer.write(value)
        if let failure = writer.failure { throw failure }
        return writer.bytes
    }
}

/// The output and the stack of containers open in it, innermost last.
private final class JSONStreamWriter {
    enum Kind {
        /// A place for one value that nothing has been written into yet (closes as `{}`).
        case slot
        /// A value was written into the slot: it closes with nothing.
        case filled
        case object
        case array
    }

    struct Frame {
        let id: Int
        var kind: Kind
        var count = 0
        var omitted: Set<String>?
    }

    /// A reference to one frame: its place in the stack and its id (stale once it is closed).
    struct Handle {
        let depth: Int
        let id: Int
    }

    // One encoding uses its writer on one thread, one access at a time: no dynamic exclusivity checks.
    @exclusivity(unchecked) var bytes: [UInt8] = []
    @exclusivity(unchecked) private var frames: [Frame] = []
    @exclusivity(unchecked) private var nextID = 0
    /// The first misuse seen where the protocol gives no way to throw (a nested container asked
    /// of a closed one): the encoding fails with it at the end.
    @exclusivity(unchecked) var failure: EncodingError?
    /// ``APIJSONEncoder/writesDirectly``.
    let writesDirectly: Bool

    init(writesDirectly: Bool) {
        self.writesDirectly = writesDirectly
        self.bytes.reserveCapacity(512)
        self.frames.reserveCapacity(8)
    }

    func openSlot() -> Handle {
        self.nextID += 1
        self.frames.append(Frame(id: self.nextID, kind: .slot))
        return Handle(depth: self.frames.count - 1, id: self.nextID)
    }

    /// Closes every frame deeper than `depth` (`depth` itself stays open).
    func close(to depth: Int) {
        while self.frames.count > depth {
            switch self.frames.removeLast().kind {
            case .slot: self.bytes.append(contentsOf: "{}".utf8)
            case .filled: break
            case .object: self.bytes.append(UInt8(ascii: "}"))
            case .array: self.bytes.append(UInt8(ascii: "]"))
            }
        }
    }

    /// Makes `handle`'s frame the innermost open one (closing the finished ones inside it), or
    /// fails when it was closed already.
    func enter(_ handle: Handle) throws {
        if let failure = self.failure { throw failure }
        guard handle.depth < self.frames.count, self.frames[handle.depth].id == handle.id else {
            throw self.misuse(handle, "a container was used after a value written later than it")
        }
        self.close(to: handle.depth + 1)
    }

    /// Notes the first misuse (the encoding fails with it at the end) and returns it to throw.
    @discardableResult
    private func misuse(_ handle: Handle, _ description: String) -> EncodingError {
        let failure = EncodingError.invalidValue(handle.id, .init(codingPath: [], debugDescription: description))
        self.failure = self.failure ?? failure
        return failure
    }

    /// Turns `handle`'s slot into an object or an array (again the same one, when it is one).
    func container(_ handle: Handle, kind: Kind, omitted: Set<String>?) -> Handle {
        do {
            try self.enter(handle)
        } catch {
            return handle
        }
        switch self.frames[handle.depth].kind {
        case .slot:
            self.frames[handle.depth].kind = kind
            self.frames[handle.depth].omitted = omitted
            self.bytes.append(kind == .object ? UInt8(ascii: "{") : UInt8(ascii: "["))
        case let current where current == kind:
            break
        default:
            self.misuse(handle, "a value asked for two kinds of container")
        }
        return handle
    }

    /// Before a member of `handle`'s object: the separator and the key.
    func key(_ key: String, in handle: Handle) throws {
        try self.enter(handle)
        if self.frames[handle.depth].count > 0 { self.bytes.append(UInt8(ascii: ",")) }
        self.frames[handle.depth].count += 1
        JSONValue.string(key).serialize(into: &self.bytes)
        self.bytes.append(UInt8(ascii: ":"))
    }

    /// Before an element of `handle`'s array: the separator.
    func element(in handle: Handle) throws {
        try self.enter(handle)
        if self.frames[handle.depth].count > 0 { self.bytes.append(UInt8(ascii: ",")) }
        self.frames[handle.depth].count += 1
    }

    /// The members or elements written so far into `handle`'s container.
    func count(in handle: Handle) -> Int {
        handle.depth < self.frames.count && self.frames[handle.depth].id == handle.id ? self.frames[handle.depth].count : 0
    }

    func omits(_ key: String, in handle: Handle) -> Bool {
        handle.depth < self.frames.count && self.frames[handle.depth].omitted?.contains(key) == true
    }

    /// A single value into `handle`'s slot.
    func single(_ json: JSONValue, in handle: Handle) throws {
        try self.enter(handle)
        guard case .slot = self.frames[handle.depth].kind else {
            throw self.misuse(handle, "a value was encoded twice, or into a container")
        }
        self.frames[handle.depth].kind = .filled
        json.serialize(into: &self.bytes)
    }

    /// `value` at the current place: a primitive straight, anything else in a slot of its own,
    /// closed when it has encoded itself.
    func write<T: Encodable>(_ value: T) throws {
        if let json = primitive(value) {
            json.serialize(into: &self.bytes)
            return
        }
        if self.writesDirectly, let writable = value as? any JSONWritable {
            writable.json(into: &self.bytes)
            return
        }
        let slot = self.openSlot()
        try value.encode(to: SlotEncoder(writer: self, handle: slot, omitted: omittedFields(of: T.self)))
        self.close(to: slot.depth)
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

/// The fields `type` leaves out when nil (``OmitsNilFields``), if it names any.
private func omittedFields<T>(of type: T.Type) -> Set<String>? {
    (type as? any OmitsNilFields.Type)?.fieldsOmittedWhenNil
}

private func exact<T: BinaryInteger>(_ value: T) throws -> Int64 {
    guard let exact = Int64(exactly: value) else {
        throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(value) does not fit in 64 bits"))
    }
    return exact
}

/// The encoder a value gets for its slot (and its single-value container).
private struct SlotEncoder: Encoder, SingleValueEncodingContainer {
    let writer: JSONStreamWriter
    let handle: JSONStreamWriter.Handle
    let omitted: Set<String>?

    // Paths are not tracked: nothing Herald encodes reads them, and keeping them costs an array per field.
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(
            KeyedContainer<Key>(writer: self.writer, handle: self.writer.container(self.handle, kind: .object, omitted: self.omitted)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedContainer(writer: self.writer, handle: self.writer.container(self.handle, kind: .array, omitted: nil))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { try self.writer.single(.null, in: self.handle) }
    func encode(_ value: Bool) throws { try self.writer.single(.bool(value), in: self.handle) }
    func encode(_ value: String) throws { try self.writer.single(.string(value), in: self.handle) }
    func encode(_ value: Double) throws { try self.writer.single(.double(value), in: self.handle) }
    func encode(_ value: Float) throws { try self.writer.single(.double(Double(value)), in: self.handle) }
    func encode(_ value: Int) throws { try self.writer.single(.int(Int64(value)), in: self.handle) }
    func encode(_ value: Int8) throws { try self.writer.single(.int(Int64(value)), in: self.handle) }
    func encode(_ value: Int16) throws { try self.writer.single(.int(Int64(value)), in: self.handle) }
    func encode(_ value: Int32) throws { try self.writer.single(.int(Int64(value)), in: self.handle) }
    func encode(_ value: Int64) throws { try self.writer.single(.int(value), in: self.handle) }
    func encode(_ value: UInt) throws { try self.writer.single(.int(try exact(value)), in: self.handle) }
    func encode(_ value: UInt8) throws { try self.writer.single(.int(Int64(value)), in: self.handle) }
    func encode(_ value: UInt16) throws { try self.writer.single(.int(Int64(value)), in: self.handle) }
    func encode(_ value: UInt32) throws { try self.writer.single(.int(Int64(value)), in: self.handle) }
    func encode(_ value: UInt64) throws { try self.writer.single(.int(try exact(value)), in: self.handle) }

    func encode<T: Encodable>(_ value: T) throws {
        if let json = primitive(value) {
            try self.writer.single(json, in: self.handle)
        } else {
            try value.encode(to: SlotEncoder(writer: self.writer, handle: self.handle, omitted: omittedFields(of: T.self)))
        }
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: JSONStreamWriter
    let handle: JSONStreamWriter.Handle

    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws {
        try self.writer.key(key.stringValue, in: self.handle)
        self.writer.bytes.append(contentsOf: "null".utf8)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try self.writer.key(key.stringValue, in: self.handle)
        try self.writer.write(value)
    }

    // Synthesised conformances call these for optionals: nil is written as null unless omitted.
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value {
            try self.encode(value, forKey: key)
        } else if !self.writer.omits(key.stringValue, in: self.handle) {
            try self.encodeNil(forKey: key)
        }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try self.optional(value.map(JSONValue.string), key) }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try self.optional(value.map(JSONValue.bool), key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try self.optional(value.map(JSONValue.double), key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try self.optional(value.map { .double(Double($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try self.optional(value.map(JSONValue.int), key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try self.optional(value.map { .int(Int64($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try self.optional(try value.map { .int(try exact($0)) }, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try self.optional(try value.map { .int(try exact($0)) }, key) }

    private mutating func optional(_ json: JSONValue?, _ key: Key) throws {
        if let json {
            try self.writer.key(key.stringValue, in: self.handle)
            json.serialize(into: &self.writer.bytes)
        } else if !self.writer.omits(key.stringValue, in: self.handle) {
            try self.encodeNil(forKey: key)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        SlotEncoder(writer: self.writer, handle: self.slot(forKey: key), omitted: nil).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        SlotEncoder(writer: self.writer, handle: self.slot(forKey: key), omitted: nil).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { SlotEncoder(writer: self.writer, handle: self.handle, omitted: nil) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        SlotEncoder(writer: self.writer, handle: self.slot(forKey: key), omitted: nil)
    }

    /// The key written and a slot opened for its value (a misuse is kept for the end: these cannot throw).
    private func slot(forKey key: Key) -> JSONStreamWriter.Handle {
        do {
            try self.writer.key(key.stringValue, in: self.handle)
        } catch {
            return self.handle
        }
        return self.writer.openSlot()
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let writer: JSONStreamWriter
    let handle: JSONStreamWriter.Handle

    var codingPath: [any CodingKey] { [] }
    var count: Int { self.writer.count(in: self.handle) }

    mutating func encodeNil() throws {
        try self.writer.element(in: self.handle)
        self.writer.bytes.append(contentsOf: "null".utf8)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try self.writer.element(in: self.handle)
        try self.writer.write(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        SlotEncoder(writer: self.writer, handle: self.slot(), omitted: nil).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        SlotEncoder(writer: self.writer, handle: self.slot(), omitted: nil).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { SlotEncoder(writer: self.writer, handle: self.slot(), omitted: nil) }

    private func slot() -> JSONStreamWriter.Handle {
        do {
            try self.writer.element(in: self.handle)
        } catch {
            return self.handle
        }
        return self.writer.openSlot()
    }
}

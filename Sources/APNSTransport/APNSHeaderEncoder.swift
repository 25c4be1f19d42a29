// SPDX-License-Identifier: Apache-2.0
public import NIOCore

/// HPACK (RFC 7541) encoding of APNs request headers the way Apple asks for them: values that stay
/// the same across requests (`authorization`, `apns-topic`, `apns-push-type`, `apns-priority`)
/// enter the dynamic table once and cost one or two bytes afterwards; per-request values
/// (`:path` with the device token, `apns-id`, `apns-expiration`, `apns-collapse-id`) are never
/// indexed, so they neither churn APNs's small table nor leak into it.
///
/// One encoder per connection. Strings are written without Huffman coding: the indexed values are
/// sent once per connection and the per-request ones are mostly hex, where Huffman saves little.
public struct APNSHeaderEncoder: Sendable {
    public enum Indexing: Sendable {
        /// Added to the dynamic table; later requests refer to it by index.
        case indexed
        /// Sent literally every time, marked never-indexed (RFC 7541 §6.2.3).
        case neverIndexed
    }

    private struct Entry: Sendable {
        var name: String
        var value: String
        var size: Int { self.name.utf8.count + self.value.utf8.count + 32 }
    }

    /// Newest first, as HPACK numbers them (62, 63, …).
    private var table: [Entry] = []
    private var tableSize = 0
    private var maxTableSize: Int
    /// The smallest table size the peer set since the last header block, announced (with the
    /// final size when larger) at the start of the next one.
    private var pendingSizeUpdate: Int?

    /// - Parameter maxTableSize: the peer's SETTINGS_HEADER_TABLE_SIZE (4096 until it says otherwise).
    public init(maxTableSize: Int = 4096) {
        self.maxTableSize = max(0, maxTableSize)
    }

    /// Applies the peer's SETTINGS_HEADER_TABLE_SIZE; the change is signalled in the next block.
    public mutating func setMaxTableSize(_ size: Int) {
        let size = max(0, size)
        guard size != self.maxTableSize else { return }
        self.maxTableSize = size
        self.pendingSizeUpdate = min(self.pendingSizeUpdate ?? size, size)
        self.evict(toFit: 0)
    }

    /// How many entries the dynamic table holds (for tests and metrics).
    public var dynamicTableCount: Int { self.table.count }

    /// Encodes one device push's header block.
    public mutating func encodeDevicePush(
        authority: String,
        deviceToken: String,
        authorization: String?,
        topic: String?,
        pushType: String?,
        priority: Int?,
        expiration: Int64?,
        apnsID: String?,
        collapseID: String?,
        into buffer: inout ByteBuffer
    ) {
        self.beginBlock(into: &buffer)
        buffer.writeInteger(UInt8(0x83))  // :method POST (static 3)
        buffer.writeInteger(UInt8(0x87))  // :scheme https (static 7)
        self.writeLiteral(nameIndex: 4, value: "/3/device/" + deviceToken, into: &buffer)  // :path
        self.write(":authority", authority, .indexed, staticNameIndex: 1, into: &buffer)
        if let authorization { self.write("authorization", authorization, .indexed, staticNameIndex: 23, into: &buffer) }
        if let topic { self.write("apns-topic", topic, .indexed, into: &buffer) }
        if let pushType { self.write("apns-push-type", pushType, .indexed, into: &buffer) }
        if let priority { self.write("apns-priority", String(priority), .indexed, into: &buffer) }
        if let expiration { self.write("apns-expiration", String(expiration), .neverIndexed, into: &buffer) }
        if let apnsID { self.write("apns-id", apnsID, .neverIndexed, into: &buffer) }
        if let collapseID { self.write("apns-collapse-id", collapseID, .neverIndexed, into: &buffer) }
    }

    /// Encodes arbitrary headers (the pseudo-headers first, as HTTP/2 requires).
    public mutating func encode(_ headers: [(name: String, value: String, indexing: Indexing)], into buffer: inout ByteBuffer) {
        self.beginBlock(into: &buffer)
        for header in headers { self.write(header.name, header.value, header.indexing, into: &buffer) }
    }

    private mutating func beginBlock(into buffer: inout ByteBuffer) {
        // RFC 7541 §4.2: the smallest size since the last block, then the final one if larger.
        if let smallest = self.pendingSizeUpdate {
            Self.writeInteger(smallest, prefixBits: 5, flags: 0x20, into: &buffer)
            if smallest < self.maxTableSize { Self.writeInteger(self.maxTableSize, prefixBits: 5, flags: 0x20, into: &buffer) }
            self.pendingSizeUpdate = nil
        }
    }

    private mutating func write(_ name: String, _ value: String, _ indexing: Indexing, staticNameIndex: Int? = nil, into buffer: inout ByteBuffer) {
        if indexing == .indexed, let index = self.table.firstIndex(where: { $0.name == name && $0.value == value }) {
            Self.writeInteger(62 + index, prefixBits: 7, flags: 0x80, into: &buffer)
            return
        }
        let nameIndex = staticNameIndex ?? self.table.firstIndex(where: { $0.name == name }).map { 62 + $0 }
        switch indexing {
        case .indexed:
            let entry = Entry(name: name, value: value)
            guard entry.size <= self.maxTableSize else {
                // Too large to keep: send it literally without indexing.
                if let nameIndex {
                    self.writeLiteral(nameIndex: nameIndex, value: value, into: &buffer)
                } else {
                    self.writeLiteral(name: name, value: value, flags: 0x00, into: &buffer)
                }
                return
            }
            if let nameIndex {
                Self.writeInteger(nameIndex, prefixBits: 6, flags: 0x40, into: &buffer)
                Self.writeString(value, into: &buffer)
            } else {
                self.writeLiteral(name: name, value: value, flags: 0x40, into: &buffer)
            }
            self.evict(toFit: entry.size)
            self.table.insert(entry, at: 0)
            self.tableSize += entry.size
        case .neverIndexed:
            if let nameIndex {
                Self.writeInteger(nameIndex, prefixBits: 4, flags: 0x10, into: &buffer)
                Self.writeString(value, into: &buffer)
            } else {
                self.writeLiteral(name: name, value: value, flags: 0x10, into: &buffer)
            }
        }
    }

    /// Literal without indexing, name by index.
    private func writeLiteral(nameIndex: Int, value: String, into buffer: inout ByteBuffer) {
        Self.writeInteger(nameIndex, prefixBits: 4, flags: 0x00, into: &buffer)
        Self.writeString(value, into: &buffer)
    }

    private func writeLiteral(name: String, value: String, flags: UInt8, into buffer: inout ByteBuffer) {
        buffer.writeInteger(flags)
        Self.writeString(name, into: &buffer)
        Self.writeString(value, into: &buffer)
    }

    private mutating func evict(toFit size: Int) {
        while !self.table.isEmpty, self.tableSize + size > self.maxTableSize {
            self.tableSize -= self.table.removeLast().size
        }
    }

    static func writeInteger(_ value: Int, prefixBits: Int, flags: UInt8, into buffer: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else {
            buffer.writeInteger(flags | UInt8(value))
            return
        }
        buffer.writeInteger(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest & 0x7F | 0x80))
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
    }

    static func writeString(_ text: String, into buffer: inout ByteBuffer) {
        Self.writeInteger(text.utf8.count, prefixBits: 7, flags: 0x00, into: &buffer)
        buffer.writeString(text)
    }
}

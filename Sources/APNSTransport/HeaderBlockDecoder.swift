// SPDX-License-Identifier: Apache-2.0
package import NIOCore

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// HPACK (RFC 7541) decoding of header blocks, one decoder per connection, reading the block's
/// bytes in place.
///
/// Literal values sent without indexing under a static-table name (`authorization`, `:path`)
/// are remembered, raw and decoded, one per name: a client that never indexes its provider token
/// sends the same few hundred Huffman-coded bytes on every request, and they are then compared
/// rather than decoded again.
package struct HeaderBlockDecoder: Sendable {
    package enum DecodingError: Error, Equatable, Sendable {
        case truncated
        case zeroIndex
        case indexOutOfRange
        case integerOverflow
        case invalidHuffmanCode
        /// A size update past the advertised limit, after a header field, or more than two in a row.
        case invalidTableSizeUpdate
        /// The decoded list is larger than `maxHeaderListSize` (name + value + 32 per field).
        case headerListTooLarge
    }

    private struct Entry: Sendable {
        var name: String
        var value: String
        var size: Int
    }

    private struct Remembered: Sendable {
        /// The literal as sent: its Huffman flag and length prefix, then its bytes.
        var raw: [UInt8] = []
        var value = ""
    }

    /// Literals shorter than this are decoded every time: they decode about as fast as they compare.
    static let rememberedLength = 16
    /// Nor are longer ones kept: a peer could otherwise make each connection hold 61 large values.
    /// A provider token is a few hundred bytes.
    static let rememberedLengthLimit = 1024

    /// Oldest first: HPACK index 62 is the last element.
    private var table: [Entry] = []
    private var tableSize = 0
    private var maxTableSize: Int
    /// The limit this side advertised (SETTINGS_HEADER_TABLE_SIZE): size updates may not pass it.
    private let allowedTableSize: Int
    private let maxHeaderListSize: Int
    private var remembered: [Remembered]

    package init(maxTableSize: Int = 4096, maxHeaderListSize: Int) {
        self.maxTableSize = max(0, maxTableSize)
        self.allowedTableSize = max(0, maxTableSize)
        self.maxHeaderListSize = maxHeaderListSize
        self.remembered = Array(repeating: Remembered(), count: Self.staticTable.count + 1)
    }

    /// How many entries the dynamic table holds.
    package var dynamicTableCount: Int { self.table.count }

    /// Decodes one complete header block, calling `field` with each field in order (`neverIndexed`:
    /// the sender marked it sensitive). On failure the connection's HPACK state is no longer in
    /// step with the peer's: the caller ends the connection (COMPRESSION_ERROR).
    package mutating func decode(
        _ block: ByteBuffer,
        _ field: (_ name: String, _ value: String, _ neverIndexed: Bool) -> Void
    ) throws(DecodingError) {
        var failure: DecodingError?
        block.withUnsafeReadableBytes { raw in
            do throws(DecodingError) {
                try self.decode(raw, field)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    private mutating func decode(
        _ raw: UnsafeRawBufferPointer,
        _ field: (_ name: String, _ value: String, _ neverIndexed: Bool) -> Void
    ) throws(DecodingError) {
        var position = 0
        var sizeUpdates = 0
        var listSize = 0
        func emit(_ name: String, _ value: String, neverIndexed: Bool) throws(DecodingError) {
            listSize += name.utf8.count + value.utf8.count + 32
            guard listSize <= self.maxHeaderListSize else { throw .headerListTooLarge }
            field(name, value, neverIndexed)
        }
        while position < raw.count {
            let first = raw[position]
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = try Self.integer(raw, &position, prefixBits: 7)
                let entry = try self.entry(index)
                try emit(entry.name, entry.value, neverIndexed: false)
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing (§6.2.1).
                let index = try Self.integer(raw, &position, prefixBits: 6)
                let name = index == 0 ? try Self.string(raw, &position) : try self.entry(index).name
                let value = try Self.string(raw, &position)
                try emit(name, value, neverIndexed: false)
                self.insert(name: name, value: value)
            } else if first & 0x20 != 0 {
                // Dynamic table size update (§6.3): only before the block's first field, at most two.
                guard listSize == 0, sizeUpdates < 2 else { throw .invalidTableSizeUpdate }  // no field yet: each adds 32 or more
                sizeUpdates += 1
                let size = try Self.integer(raw, &position, prefixBits: 5)
                guard size <= self.allowedTableSize else { throw .invalidTableSizeUpdate }
                self.maxTableSize = size
                self.evict(toFit: 0)
            } else {
                // Literal without indexing (§6.2.2) or never indexed (§6.2.3).
                let neverIndexed = first & 0x10 != 0
                let index = try Self.integer(raw, &position, prefixBits: 4)
                let name: String
                let value: String
                if index == 0 {
                    name = try Self.string(raw, &position)
                    value = try Self.string(raw, &position)
                } else if index <= Self.staticTable.count {
                    name = Self.staticTable[index - 1].name
                    value = try self.rememberedString(raw, &position, slot: index)
                } else {
                    name = try self.entry(index).name
                    value = try Self.string(raw, &position)
                }
                try emit(name, value, neverIndexed: neverIndexed)
            }
        }
    }

    private func entry(_ index: Int) throws(DecodingError) -> (name: String, value: String) {
        guard index != 0 else { throw .zeroIndex }
        if index <= Self.staticTable.count { return Self.staticTable[index - 1] }
        let age = index - Self.staticTable.count - 1
        guard age < self.table.count else { throw .indexOutOfRange }
        let entry = self.table[self.table.count - 1 - age]
        return (entry.name, entry.value)
    }

    private mutating func insert(name: String, value: String) {
        let size = name.utf8.count + value.utf8.count + 32
        self.evict(toFit: size)
        // An entry larger than the whole table empties it and is not added (§4.4).
        guard size <= self.maxTableSize else { return }
        self.table.append(Entry(name: name, value: value, size: size))
        self.tableSize += size
    }

    private mutating func evict(toFit size: Int) {
        var oldest = 0
        while oldest < self.table.count, self.tableSize + size > self.maxTableSize {
            self.tableSize -= self.table[oldest].size
            oldest += 1
        }
        if oldest > 0 { self.table.removeFirst(oldest) }
    }

    /// A string literal under static name `slot`, taken from the last one sent under it when its
    /// bytes are the same.
    private mutating func rememberedString(_ raw: UnsafeRawBufferPointer, _ position: inout Int, slot: Int) throws(DecodingError) -> String {
        let start = position
        let (bytes, huffman) = try Self.literal(raw, &position)
        guard (Self.rememberedLength...Self.rememberedLengthLimit).contains(bytes.count) else {
            return try Self.text(bytes, huffman: huffman)
        }
        let sent = UnsafeRawBufferPointer(rebasing: raw[start..<position])
        let same = self.remembered[slot].raw.withUnsafeBytes { sameBytes($0, sent) }
        if same { return self.remembered[slot].value }
        let value = try Self.text(bytes, huffman: huffman)
        self.remembered[slot].raw.removeAll(keepingCapacity: true)
        self.remembered[slot].raw.append(contentsOf: sent)
        self.remembered[slot].value = value
        return value
    }

    /// An integer with an N-bit prefix (§5.1). Values that need more than four continuation
    /// bytes are refused: nothing a header block carries is that large.
    static func integer(_ raw: UnsafeRawBufferPointer, _ position: inout Int, prefixBits: Int) throws(DecodingError) -> Int {
        guard position < raw.count else { throw .truncated }
        let limit = (1 << prefixBits) - 1
        var value = Int(raw[position]) & limit
        position += 1
        guard value == limit else { return value }
        var shift = 0
        while true {
            guard position < raw.count else { throw .truncated }
            guard shift <= 21 else { throw .integerOverflow }
            let byte = raw[position]
            position += 1
            value += Int(byte & 0x7F) << shift
            shift += 7
            if byte & 0x80 == 0 { return value }
        }
    }

    /// A string literal (§5.2): raw or Huffman-coded.
    static func string(_ raw: UnsafeRawBufferPointer, _ position: inout Int) throws(DecodingError) -> String {
        let (bytes, huffman) = try Self.literal(raw, &position)
        return try Self.text(bytes, huffman: huffman)
    }

    private static func text(_ bytes: UnsafeRawBufferPointer, huffman: Bool) throws(DecodingError) -> String {
        huffman ? try Huffman.decode(bytes) : String(decoding: bytes, as: UTF8.self)
    }

    /// A string literal's bytes, undecoded, and whether they are Huffman-coded.
    private static func literal(_ raw: UnsafeRawBufferPointer, _ position: inout Int) throws(DecodingError) -> (UnsafeRawBufferPointer, Bool) {
        guard position < raw.count else { throw .truncated }
        let huffman = raw[position] & 0x80 != 0
        let length = try Self.integer(raw, &position, prefixBits: 7)
        guard length <= raw.count - position else { throw .truncated }
        defer { position += length }
        return (UnsafeRawBufferPointer(rebasing: raw[position..<position + length]), huffman)
    }

    /// RFC 7541 Appendix A: index 1 is the first element.
    static let staticTable: [(name: String, value: String)] = [
        (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
        (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
        (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
        ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""), ("cache-control", ""),
        ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
        ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""), ("date", ""), ("etag", ""),
        ("expect", ""), ("expires", ""), ("from", ""), ("host", ""), ("if-match", ""), ("if-modified-since", ""),
        ("if-none-match", ""), ("if-range", ""), ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""),
        ("location", ""), ("max-forwards", ""), ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""),
        ("referer", ""), ("refresh", ""), ("retry-after", ""), ("server", ""), ("set-cookie", ""),
        ("strict-transport-security", ""), ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""),
        ("www-authenticate", ""),
    ]
}

/// Whether two byte ranges hold the same bytes (`memcmp`).
package func sameBytes(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) -> Bool {
    guard first.count == second.count else { return false }
    guard let a = first.baseAddress, let b = second.baseAddress else { return true }
    return memcmp(a, b, first.count) == 0
}

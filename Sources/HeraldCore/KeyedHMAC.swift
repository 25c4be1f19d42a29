// SPDX-License-Identifier: Apache-2.0
package import Crypto

/// HMAC-SHA256 (RFC 2104) under one key, computed many times: the key's inner and outer pads are
/// hashed once, here, and each code hashes only its own message and the inner digest.
///
/// Built on `SHA256` rather than `HMAC<SHA256>`: outside swift-crypto that generic type runs
/// unspecialized, and in a profile of sends through the API the lookups of its generic metadata
/// cost about fifteen times the hashing itself (a receipt id is one code per delivery).
package struct KeyedHMACSHA256: Sendable {
    private let inner: SHA256
    private let outer: SHA256

    package init(key: [UInt8]) {
        // A key longer than a block is hashed first; the block is the key padded with zeros.
        var block = key.count > SHA256.blockByteCount ? SHA256.hash(data: key).withUnsafeBytes { Array($0) } : key
        block += repeatElement(0, count: SHA256.blockByteCount - block.count)
        var inner = SHA256()
        inner.update(data: block.map { $0 ^ 0x36 })
        var outer = SHA256()
        outer.update(data: block.map { $0 ^ 0x5C })
        self.inner = inner
        self.outer = outer
    }

    /// The code of the message `feed` gives to the hash, piece by piece.
    package func code(_ feed: (inout SHA256) -> Void) -> SHA256Digest {
        var inner = self.inner  // a copy: the keyed state stays as it was for the next code
        feed(&inner)
        let innerDigest = inner.finalize()
        var outer = self.outer
        innerDigest.withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize()
    }

    /// The code of `message`.
    package func code(_ message: [UInt8]) -> SHA256Digest {
        self.code { hash in message.withUnsafeBytes { hash.update(bufferPointer: $0) } }
    }
}

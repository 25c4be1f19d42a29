// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation
import Synchronization

/// What an API key may do.
package enum APIScope: String, Sendable, Hashable, CaseIterable, Codable {
    /// Register and unregister devices of one app, nothing else: safe to ship inside the app.
    case register
    /// Send notifications (and everything `register` can) for one app, or every app.
    case send
    /// Everything, including apps, credentials and keys.
    case admin

    /// Whether a key of this scope may do what `needed` allows.
    package func allows(_ needed: APIScope) -> Bool {
        switch (self, needed) {
        case (.admin, _): return true
        case (.send, .send), (.send, .register): return true
        case (.register, .register): return true
        default: return false
        }
    }
}

/// A new API key's secret (shown once) and what is stored of it (a SHA-256 hash).
package struct APIKeySecret: Sendable {
    /// `hk_<id>_<secret>`: the id finds the row, the secret is checked against its hash.
    package let token: String
    package let id: String
    package let hash: [UInt8]

    /// A fresh key: 8 random bytes of id, 32 of secret.
    package static func generate() -> APIKeySecret {
        let id = Self.hex(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0.prefix(8)) })
        let secret = Self.hex(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
        let token = "hk_\(id)_\(secret)"
        return APIKeySecret(token: token, id: id, hash: Self.hash(token))
    }

    /// Splits a presented token into its id, or nil when it is not shaped like one of ours.
    /// Read byte by byte: every authenticated request asks (splitting into Substrings and
    /// counting Characters cost ~2% of a registration's CPU).
    package static func id(of token: String) -> String? {
        var token = token
        return token.withUTF8 { bytes -> String? in
            // "hk_" + 16 + "_" + 64, ASCII, with no other "_".
            guard bytes.count == 84, bytes[0] == UInt8(ascii: "h"), bytes[1] == UInt8(ascii: "k"), bytes[2] == UInt8(ascii: "_"),
                bytes[19] == UInt8(ascii: "_")
            else { return nil }
            for index in 3..<84 where index != 19 {
                guard bytes[index] < 0x80, bytes[index] != UInt8(ascii: "_") else { return nil }
            }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[3..<19]), as: UTF8.self)
        }
    }

    /// The token of an `Authorization` header's value: after the scheme `Bearer` (in any case)
    /// and a space, without the spaces and tabs around it. Nil for another scheme or none.
    package static func bearerToken(_ header: String) -> String? {
        var header = header
        return header.withUTF8 { bytes -> String? in
            let scheme: StaticString = "bearer "
            guard bytes.count > scheme.utf8CodeUnitCount else { return nil }
            for index in 0..<scheme.utf8CodeUnitCount {
                let expected = scheme.utf8Start[index]
                let byte = bytes[index]
                // ASCII letters in either case; the space exactly.
                guard byte == expected || (expected != UInt8(ascii: " ") && byte | 0x20 == expected) else { return nil }
            }
            var start = scheme.utf8CodeUnitCount
            var end = bytes.count
            func blank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
            while start < end, blank(bytes[start]) { start += 1 }
            while end > start, blank(bytes[end - 1]) { end -= 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
    }

    package static func hash(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(token.utf8)))
    }

    /// Compares a presented token with a stored hash in constant time.
    package static func matches(_ token: String, hash: [UInt8]) -> Bool {
        Self.matches(hash: Self.hash(token), hash)
    }

    /// Compares a presented token's hash with a stored hash in constant time.
    package static func matches(hash presented: [UInt8], _ hash: [UInt8]) -> Bool {
        guard presented.count == hash.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(presented, hash) { difference |= a ^ b }
        return difference == 0
    }

    /// The bytes of an even number of hex digits; nil for anything else.
    package static func bytes(hex text: String) -> [UInt8]? {
        guard text.utf8.count.isMultiple(of: 2), text.allSatisfy(\.isHexDigit) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }

    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Encrypts key material at rest (AES-256-GCM) under the server's master key.
///
/// It seals with the current master key and opens with the current one or, during a change of
/// master key, a previous one; ``replaceKeys(current:previous:)`` changes them in a running
/// process, and every holder of this box sees the change.
package final class SecretBox: Sendable {
    private struct Keys {
        var current: SymmetricKey
        var previous: [SymmetricKey]
    }

    private let keys: Mutex<Keys>

    /// - Parameters:
    ///   - masterKey: 32 bytes, e.g. from `HERALD_MASTER_KEY` (64 hex digits or base64).
    ///   - previous: keys that may still have sealed what is stored (a change of master key under way).
    package init(masterKey: [UInt8], previous: [[UInt8]] = []) throws(HeraldError) {
        self.keys = Mutex(try Self.keys(current: masterKey, previous: previous))
    }

    private static func keys(current: [UInt8], previous: [[UInt8]]) throws(HeraldError) -> Keys {
        guard current.count == 32, previous.allSatisfy({ $0.count == 32 }) else {
            throw HeraldError(code: "bad_master_key", "the master key must be 32 bytes")
        }
        return Keys(current: SymmetricKey(data: current), previous: previous.filter { $0 != current }.map { SymmetricKey(data: $0) })
    }

    /// Seals with `current` from now on; opens with it or any of `previous`.
    package func replaceKeys(current: [UInt8], previous: [[UInt8]]) throws(HeraldError) {
        let keys = try Self.keys(current: current, previous: previous)
        self.keys.withLock { $0 = keys }
    }

    /// The key this box seals with, as bytes: kept for opening when it is replaced.
    package func currentKeyForOpening() -> [[UInt8]] {
        [self.keys.withLock { $0.current.withUnsafeBytes { Array($0) } }]
    }

    /// Whether `masterKey` is the key this box seals with.
    package func seals(with masterKey: [UInt8]) -> Bool {
        self.keys.withLock { $0.current == SymmetricKey(data: masterKey) }
    }

    /// Parses 64 hex digits or base64 of 32 bytes.
    package static func parseMasterKey(_ text: String) -> [UInt8]? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.count == 64, let bytes = APIKeySecret.bytes(hex: trimmed) { return bytes }
        if let data = Data(base64Encoded: trimmed), data.count == 32 { return Array(data) }
        return nil
    }

    package static func generateMasterKey() -> [UInt8] {
        SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    package func seal(_ plaintext: [UInt8]) throws -> [UInt8] {
        let key = self.keys.withLock { $0.current }
        return Array(try AES.GCM.seal(plaintext, using: key).combined!)
    }

    /// Opens with the current key, else the previous ones (AES-GCM tells a wrong key by its tag).
    package func open(_ sealed: [UInt8]) throws -> [UInt8] {
        let keys = self.keys.withLock { [$0.current] + $0.previous }
        let box = try AES.GCM.SealedBox(combined: sealed)
        var failure: (any Error)?
        for key in keys {
            do {
                return Array(try AES.GCM.open(box, using: key))
            } catch {
                failure = error
            }
        }
        throw failure ?? HeraldError(code: "bad_master_key", "no master key")
    }

    /// `sealed` sealed again under the current key.
    package func reseal(_ sealed: [UInt8]) throws -> [UInt8] {
        try self.seal(try self.open(sealed))
    }

    /// Keys derived (HKDF) for `purpose` from the current master key, then from the previous
    /// ones (a change of master key under way): the first signs, any verifies.
    package func derivedKeys(purpose: String) -> [[UInt8]] {
        let keys = self.keys.withLock { [$0.current] + $0.previous }
        return keys.map { HKDF<SHA256>.deriveKey(inputKeyMaterial: $0, info: Array(purpose.utf8), outputByteCount: 32).withUnsafeBytes { Array($0) } }
    }

    /// HMAC-SHA256 of `message` under a key derived (HKDF) from the master key for `purpose`:
    /// every process with the same master key computes the same, no other key material needed.
    package func authenticationCode(_ message: [UInt8], purpose: String) -> [UInt8] {
        let key = self.keys.withLock { $0.current }
        let derived = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Array(purpose.utf8), outputByteCount: 32)
        return Array(HMAC<SHA256>.authenticationCode(for: message, using: derived))
    }
}

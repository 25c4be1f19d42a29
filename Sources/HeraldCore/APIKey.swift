// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation

/// What an API key may do.
public enum APIScope: String, Sendable, Hashable, CaseIterable, Codable {
    /// Register and unregister devices of one app, nothing else: safe to ship inside the app.
    case register
    /// Send notifications (and everything `register` can) for one app, or every app.
    case send
    /// Everything, including apps, credentials and keys.
    case admin

    /// Whether a key of this scope may do what `needed` allows.
    public func allows(_ needed: APIScope) -> Bool {
        switch (self, needed) {
        case (.admin, _): return true
        case (.send, .send), (.send, .register): return true
        case (.register, .register): return true
        default: return false
        }
    }
}

/// A new API key's secret (shown once) and what is stored of it (a SHA-256 hash).
public struct APIKeySecret: Sendable {
    /// `hk_<id>_<secret>`: the id finds the row, the secret is checked against its hash.
    public let token: String
    public let id: String
    public let hash: [UInt8]

    /// A fresh key: 8 random bytes of id, 32 of secret.
    public static func generate() -> APIKeySecret {
        let id = Self.hex(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0.prefix(8)) })
        let secret = Self.hex(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
        let token = "hk_\(id)_\(secret)"
        return APIKeySecret(token: token, id: id, hash: Self.hash(token))
    }

    /// Splits a presented token into its id, or nil when it is not shaped like one of ours.
    public static func id(of token: String) -> String? {
        let parts = token.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "hk", parts[1].count == 16, parts[2].count == 64 else { return nil }
        return String(parts[1])
    }

    public static func hash(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(token.utf8)))
    }

    /// Compares a presented token with a stored hash in constant time.
    public static func matches(_ token: String, hash: [UInt8]) -> Bool {
        let presented = Self.hash(token)
        guard presented.count == hash.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(presented, hash) { difference |= a ^ b }
        return difference == 0
    }

    public static func hex(_ bytes: [UInt8]) -> String {
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
public struct SecretBox: Sendable {
    private let key: SymmetricKey

    /// - Parameter masterKey: 32 bytes, e.g. from `HERALD_MASTER_KEY` (64 hex digits or base64).
    public init(masterKey: [UInt8]) throws(HeraldError) {
        guard masterKey.count == 32 else {
            throw HeraldError(code: "bad_master_key", "the master key must be 32 bytes")
        }
        self.key = SymmetricKey(data: masterKey)
    }

    /// Parses 64 hex digits or base64 of 32 bytes.
    public static func parseMasterKey(_ text: String) -> [UInt8]? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.count == 64, trimmed.allSatisfy(\.isHexDigit) {
            var bytes: [UInt8] = []
            var index = trimmed.startIndex
            while index < trimmed.endIndex {
                let next = trimmed.index(index, offsetBy: 2)
                bytes.append(UInt8(trimmed[index..<next], radix: 16)!)
                index = next
            }
            return bytes
        }
        if let data = Data(base64Encoded: trimmed), data.count == 32 { return Array(data) }
        return nil
    }

    public static func generateMasterKey() -> [UInt8] {
        SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    public func seal(_ plaintext: [UInt8]) throws -> [UInt8] {
        Array(try AES.GCM.seal(plaintext, using: self.key).combined!)
    }

    public func open(_ sealed: [UInt8]) throws -> [UInt8] {
        Array(try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: self.key))
    }

    /// HMAC-SHA256 of `message` under a key derived (HKDF) from the master key for `purpose`:
    /// every process with the same master key computes the same, no other key material needed.
    public func authenticationCode(_ message: [UInt8], purpose: String) -> [UInt8] {
        let derived = HKDF<SHA256>.deriveKey(inputKeyMaterial: self.key, info: Array(purpose.utf8), outputByteCount: 32)
        return Array(HMAC<SHA256>.authenticationCode(for: message, using: derived))
    }
}

// SPDX-License-Identifier: Apache-2.0
import Crypto

#if canImport(Glibc)
import Glibc
#endif

extension WebPushEncryption {
    /// The content-encryption key and nonce of RFC 8291 §3.3–3.4 and RFC 8188 §2.2–2.3.
    struct ContentSecrets {
        var key: SymmetricKey
        var nonce: AES.GCM.Nonce
        var keyBytes: [UInt8]
        var nonceBytes: [UInt8]
    }

    static func deriveSecrets(
        sharedSecret: SharedSecret,
        auth: [UInt8],
        receiverPublic: [UInt8],
        senderPublic: [UInt8],
        salt: [UInt8]
    ) -> ContentSecrets {
        let ikm = sharedSecret.withUnsafeBytes { ecdh in
            Self.inputKeyingMaterial(ecdhSecret: ecdh, auth: auth, receiverPublic: receiverPublic, senderPublic: senderPublic)
        }
        return Self.contentSecrets(ikm: ikm, salt: salt)
    }

    /// `IKM = HKDF(salt = auth_secret, ikm = ecdh_secret, info = "WebPush: info\0" ‖ ua_public ‖ as_public, 32)`:
    /// `PRK_key = HMAC(auth_secret, ecdh_secret)`, `IKM = HMAC(PRK_key, key_info ‖ 0x01)`.
    static func inputKeyingMaterial(
        ecdhSecret: UnsafeRawBufferPointer,
        auth: [UInt8],
        receiverPublic: [UInt8],
        senderPublic: [UInt8]
    ) -> [UInt8] {
        let prkKey = HMACSHA256(key: auth).code { $0.update(bufferPointer: ecdhSecret) }
        let ikm = prkKey.withUnsafeBytes { HMACSHA256(key: $0) }.code { hasher in
            hasher.update(data: Self.keyInfoPrefix)
            hasher.update(data: receiverPublic)
            hasher.update(data: senderPublic)
            hasher.update(data: Self.one)
        }
        return Array(ikm)
    }

    /// `PRK = HMAC(salt, IKM)`, `CEK = HMAC(PRK, cek_info ‖ 0x01)[0..<16]`, `NONCE = HMAC(PRK, nonce_info ‖ 0x01)[0..<12]`.
    static func contentSecrets(ikm: [UInt8], salt: [UInt8]) -> ContentSecrets {
        let prk = HMACSHA256(key: salt).code { $0.update(data: ikm) }
        let expand = prk.withUnsafeBytes { HMACSHA256(key: $0) }
        let keyBytes = Array(expand.code { $0.update(data: Self.cekInfo) }.prefix(16))
        let nonceBytes = Array(expand.code { $0.update(data: Self.nonceInfo) }.prefix(12))
        do {
            return ContentSecrets(
                key: SymmetricKey(data: keyBytes),
                nonce: try AES.GCM.Nonce(data: nonceBytes),
                keyBytes: keyBytes,
                nonceBytes: nonceBytes
            )
        } catch {
            preconditionFailure("a 12-octet AES-GCM nonce was refused: \(error)")
        }
    }

    /// A fresh sender key: a uniformly random scalar in [1, n − 1] (BoringSSL refuses 0 and
    /// values ≥ n, and another is drawn) and its public point, one fixed-base multiplication.
    /// Not `P256.KeyAgreement.PrivateKey()`, which runs FIPS key generation: a pairwise
    /// consistency test (an ECDSA signature and its verification) and another try whenever the
    /// public key is not compact-representable, several times the cost of the ECDH itself.
    static func ephemeralKey(using generator: inout some RandomNumberGenerator) -> P256.KeyAgreement.PrivateKey {
        while true {
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: Self.randomBytes(32, using: &generator)) {
                return key
            }
        }
    }

    static func randomBytes(_ count: Int, using generator: inout some RandomNumberGenerator) -> [UInt8] {
        precondition(count % 8 == 0)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for word in 0..<(count / 8) {
                let value = generator.next() as UInt64
                for i in 0..<8 { buffer[word * 8 + i] = UInt8(truncatingIfNeeded: value >> (i * 8)) }
            }
            initialized = count
        }
    }
}

/// HMAC-SHA-256 (RFC 2104) over concrete SHA-256 hashers, keyed once: HKDF-Expand takes two
/// codes under one key, and the generic `HMAC<SHA256>` costs a key copy and a generic-metadata
/// lookup per use, a tenth of a message's encryption all told.
struct HMACSHA256 {
    private var inner = SHA256()
    private var outer = SHA256()

    init(key: [UInt8]) {
        self = key.withUnsafeBytes { HMACSHA256(key: $0) }
    }

    /// `key` of at most 64 octets (one SHA-256 block), as every key here is.
    init(key: UnsafeRawBufferPointer) {
        precondition(key.count <= 64, "HMAC keys here fit one SHA-256 block")
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { pad in
            for i in 0..<64 { pad[i] = (i < key.count ? key[i] : 0) ^ 0x36 }
            self.inner.update(bufferPointer: UnsafeRawBufferPointer(pad))
            for i in 0..<64 { pad[i] ^= 0x36 ^ 0x5C }
            self.outer.update(bufferPointer: UnsafeRawBufferPointer(pad))
        }
    }

    /// The code of the message `feed` writes into the inner hasher.
    func code(_ feed: (inout SHA256) -> Void) -> SHA256.Digest {
        var inner = self.inner
        feed(&inner)
        var outer = self.outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize()
    }
}

/// Random words from one read of the kernel's CSPRNG per message's worth (a 16-octet salt and
/// a 32-octet scalar), where `SystemRandomNumberGenerator` makes a system call for every 8
/// octets. Glibc's module does not export `getrandom`, so this reads `/dev/urandom` (the same
/// source), opened once; without it, or elsewhere than Glibc, it is `SystemRandomNumberGenerator`.
struct BatchedRandomNumberGenerator: RandomNumberGenerator {
    #if canImport(Glibc)
    private static let urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
    #endif
    private var words = [UInt64](repeating: 0, count: 6)
    private var index = 6

    mutating func next() -> UInt64 {
        if self.index == self.words.count { self.refill() }
        defer { self.index += 1 }
        return self.words[self.index]
    }

    private mutating func refill() {
        self.index = 0
        #if canImport(Glibc)
        let descriptor = Self.urandom
        if descriptor >= 0 {
            let filled = self.words.withUnsafeMutableBytes { bytes in
                var done = 0
                while done < bytes.count {
                    let count = read(descriptor, bytes.baseAddress! + done, bytes.count - done)
                    if count > 0 {
                        done += count
                    } else if count < 0, errno == EINTR {
                        continue
                    } else {
                        return false
                    }
                }
                return true
            }
            if filled { return }
        }
        #endif
        var system = SystemRandomNumberGenerator()
        for i in self.words.indices { self.words[i] = system.next() }
    }
}

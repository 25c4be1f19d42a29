// SPDX-License-Identifier: Apache-2.0
package import Crypto

/// Web Push message encryption (RFC 8291) in the `aes128gcm` content coding (RFC 8188), one record.
///
/// The body is `salt(16) ‖ rs(4, big-endian) ‖ idlen(1) = 65 ‖ keyid = as_public(65) ‖ record`,
/// the record being AES-128-GCM over `plaintext ‖ 0x02 ‖ 0x00 * padding` with its 16-octet tag.
package enum WebPushEncryption {
    /// The most plaintext that fits a 4096-octet body: 4096 − 86 (header) − 1 (delimiter) − 16 (tag).
    package static let maximumPlaintext = 3993
    /// The `rs` written into every body (RFC 8291 §4 examples; what browsers and libraries send).
    package static let recordSize: UInt32 = 4096
    /// `salt ‖ rs ‖ idlen ‖ keyid` with a 65-octet key id.
    package static let headerLength = 86
    static let tagLength = 16
    static let saltLength = 16
    static let keyInfoPrefix: [UInt8] = Array("WebPush: info".utf8) + [0]
    static let cekInfo: [UInt8] = Array("Content-Encoding: aes128gcm".utf8) + [0, 1]
    static let nonceInfo: [UInt8] = Array("Content-Encoding: nonce".utf8) + [0, 1]
    static let one: [UInt8] = [1]

    /// Encrypts for a subscription with a fresh P-256 key pair and a fresh random salt.
    package static func encrypt(
        _ plaintext: some Collection<UInt8>,
        for keys: WebPushSubscriptionKeys
    ) throws(WebPushEncryptionError) -> [UInt8] {
        var generator = BatchedRandomNumberGenerator()
        let salt = Self.randomBytes(Self.saltLength, using: &generator)
        return try Self.encrypt(plaintext, for: keys, senderKey: Self.ephemeralKey(using: &generator), salt: salt)
    }

    /// Encrypts with the given sender key and salt (16 octets): deterministic, for test vectors.
    /// Never reuse a sender key and salt for two messages outside tests.
    package static func encrypt(
        _ plaintext: some Collection<UInt8>,
        for keys: WebPushSubscriptionKeys,
        senderKey: P256.KeyAgreement.PrivateKey,
        salt: [UInt8],
        padding: Int = 0
    ) throws(WebPushEncryptionError) -> [UInt8] {
        precondition(salt.count == Self.saltLength, "an aes128gcm salt is 16 octets")
        precondition(padding >= 0, "padding is a count of zero octets")
        let length = plaintext.count
        guard length + padding <= Self.maximumPlaintext else { throw .tooLarge(length) }
        let senderPublic = Array(senderKey.publicKey.x963Representation)
        let secrets: ContentSecrets
        do {
            let shared = try senderKey.sharedSecretFromKeyAgreement(with: keys.publicKey)
            secrets = Self.deriveSecrets(
                sharedSecret: shared,
                auth: keys.auth,
                receiverPublic: keys.p256dh,
                senderPublic: senderPublic,
                salt: salt
            )
        } catch {
            // Only a point off the curve makes ECDH fail, and `keys` has been validated.
            preconditionFailure("ECDH with a validated P-256 key failed: \(error)")
        }
        var padded = [UInt8]()
        padded.reserveCapacity(length + 1 + padding)
        padded.append(contentsOf: plaintext)
        padded.append(0x02)
        if padding > 0 { padded.append(contentsOf: repeatElement(0, count: padding)) }
        let box: AES.GCM.SealedBox
        do {
            box = try AES.GCM.seal(padded, using: secrets.key, nonce: secrets.nonce)
        } catch {
            preconditionFailure("AES-128-GCM with a 16-octet key and a 12-octet nonce failed: \(error)")
        }
        var body = [UInt8]()
        body.reserveCapacity(Self.headerLength + padded.count + Self.tagLength)
        body.append(contentsOf: salt)
        Self.appendBigEndian(Self.recordSize, to: &body)
        body.append(UInt8(senderPublic.count))
        body.append(contentsOf: senderPublic)
        body.append(contentsOf: box.ciphertext)
        body.append(contentsOf: box.tag)
        return body
    }

    /// Decrypts a body as a browser does: the header's framing, the sender key, the one record's
    /// tag, then the final-record padding (`0x02` followed only by zeros).
    package static func decrypt(
        _ body: some Collection<UInt8>,
        receiverKey: P256.KeyAgreement.PrivateKey,
        auth: [UInt8]
    ) throws(WebPushDecryptionError) -> [UInt8] {
        let bytes = Array(body)
        let header = try Self.header(of: bytes)
        let senderKey: P256.KeyAgreement.PublicKey
        let shared: SharedSecret
        do {
            senderKey = try P256.KeyAgreement.PublicKey(x963Representation: header.senderKey)
            shared = try receiverKey.sharedSecretFromKeyAgreement(with: senderKey)
        } catch {
            throw .badSenderKey
        }
        let secrets = Self.deriveSecrets(
            sharedSecret: shared,
            auth: auth,
            receiverPublic: Array(receiverKey.publicKey.x963Representation),
            senderPublic: header.senderKey,
            salt: header.salt
        )
        let record = bytes[header.length...]
        let tagStart = record.endIndex - Self.tagLength
        var plaintext: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(
                nonce: secrets.nonce,
                ciphertext: record[record.startIndex..<tagStart],
                tag: record[tagStart...]
            )
            plaintext = Array(try AES.GCM.open(box, using: secrets.key))
        } catch {
            throw .badTag
        }
        while let last = plaintext.last, last == 0 { plaintext.removeLast() }
        guard plaintext.last == 0x02 else { throw .badPadding }
        plaintext.removeLast()
        return plaintext
    }

    /// The `aes128gcm` header: `salt ‖ rs ‖ idlen ‖ keyid`.
    package struct Header: Sendable, Hashable {
        package var salt: [UInt8]
        package var recordSize: UInt32
        /// The key id: the sender's (application server's) ECDH public key.
        package var senderKey: [UInt8]
        /// Octets before the record: 21 + the key id's length.
        package var length: Int { 21 + self.senderKey.count }

        package init(salt: [UInt8], recordSize: UInt32, senderKey: [UInt8]) {
            self.salt = salt
            self.recordSize = recordSize
            self.senderKey = senderKey
        }
    }

    /// The header of a body, after the framing checks a receiver makes before it needs any key:
    /// at least 21 octets (else ``WebPushDecryptionError/truncatedHeader``), `rs` ≥ 18
    /// (``WebPushDecryptionError/badRecordSize``), a 65-octet key id that is a point on P-256
    /// (``WebPushDecryptionError/badSenderKey``), and one record: no longer than `rs`
    /// (``WebPushDecryptionError/multipleRecords``) and long enough for a tag and a delimiter
    /// (``WebPushDecryptionError/badTag``). What a push service can judge without the keys.
    package static func header(of body: some Collection<UInt8>) throws(WebPushDecryptionError) -> Header {
        let result =
            body.withContiguousStorageIfAvailable { Self.parseHeader($0) }
            ?? Array(body).withUnsafeBufferPointer { Self.parseHeader($0) }
        return try result.get()
    }

    private static func parseHeader(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<Header, WebPushDecryptionError> {
        guard bytes.count >= 21 else { return .failure(.truncatedHeader) }
        let recordSize = bytes[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let idLength = Int(bytes[20])
        guard bytes.count >= 21 + idLength else { return .failure(.truncatedHeader) }
        guard recordSize >= 18 else { return .failure(.badRecordSize) }
        let keyID = Array(bytes[21..<(21 + idLength)])
        guard idLength == 65, (try? P256.KeyAgreement.PublicKey(x963Representation: keyID)) != nil else {
            return .failure(.badSenderKey)
        }
        let recordLength = bytes.count - 21 - idLength
        guard recordLength <= Int(recordSize) else { return .failure(.multipleRecords) }
        guard recordLength >= Self.tagLength + 1 else { return .failure(.badTag) }
        return .success(Header(salt: Array(bytes[0..<16]), recordSize: recordSize, senderKey: keyID))
    }

    private static func appendBigEndian(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }
}

/// Why a message cannot be encrypted.
package enum WebPushEncryptionError: Error, Equatable, Sendable {
    /// The plaintext (with the padding asked for) exceeds ``WebPushEncryption/maximumPlaintext``;
    /// carries the plaintext's length in octets.
    case tooLarge(Int)
}

/// Why a body does not decrypt, in the order a receiver finds out.
package enum WebPushDecryptionError: Error, Equatable, Sendable {
    /// Shorter than 21 octets, or than 21 + the key id length it announces.
    case truncatedHeader
    /// `rs` below 18 (RFC 8188 §2.1; Firefox: "Record sizes smaller than 18 are invalid").
    case badRecordSize
    /// The key id is not 65 octets, or not an uncompressed point on P-256.
    case badSenderKey
    /// The record does not authenticate (wrong keys, altered bytes), or has no room for a tag.
    case badTag
    /// The decrypted record does not end in `0x02` followed only by zeros.
    case badPadding
    /// More octets than one record of `rs` can hold: Web Push bodies are a single record.
    case multipleRecords
}

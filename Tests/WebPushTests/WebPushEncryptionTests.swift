// SPDX-License-Identifier: Apache-2.0
import Crypto
import Testing

@testable import WebPush

@Suite struct WebPushEncryptionTests {
    let browser = Browser()
    var subscription: WebPushSubscriptionKeys { get throws { try WebPushSubscriptionKeys(p256dh: self.browser.publicKey, auth: self.browser.auth) } }

    func decrypt(_ body: [UInt8]) throws(WebPushDecryptionError) -> [UInt8] {
        try WebPushEncryption.decrypt(body, receiverKey: self.browser.privateKey, auth: self.browser.auth)
    }

    func decryptionError(_ body: [UInt8]) -> WebPushDecryptionError? {
        do {
            _ = try self.decrypt(body)
            return nil
        } catch {
            return error
        }
    }

    /// A body sealed like Herald's but over `padded` as given (delimiter and padding included), to
    /// make records that break the padding rules.
    func seal(padded: [UInt8], recordSize: UInt32 = 4096) throws -> [UInt8] {
        let sender = P256.KeyAgreement.PrivateKey()
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let senderPublic = Array(sender.publicKey.x963Representation)
        let secrets = WebPushEncryption.deriveSecrets(
            sharedSecret: try sender.sharedSecretFromKeyAgreement(with: self.browser.privateKey.publicKey),
            auth: self.browser.auth,
            receiverPublic: self.browser.publicKey,
            senderPublic: senderPublic,
            salt: salt
        )
        let box = try AES.GCM.seal(padded, using: secrets.key, nonce: secrets.nonce)
        let rs = [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: recordSize >> $0) }
        return salt + rs + [65] + senderPublic + Array(box.ciphertext) + Array(box.tag)
    }

    @Test("round trips from nothing to 3993 octets, with and without padding", arguments: [0, 1, 300, 3000, 3993])
    func roundTrip(length: Int) throws {
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let body = try WebPushEncryption.encrypt(plaintext, for: self.subscription)
        #expect(body.count == 86 + length + 17)
        #expect(try self.decrypt(body) == plaintext)
        let padding = WebPushEncryption.maximumPlaintext - length
        let padded = try WebPushEncryption.encrypt(
            plaintext, for: self.subscription, senderKey: .init(), salt: Array(repeating: 7, count: 16), padding: padding
        )
        #expect(padded.count == 4096)
        #expect(try self.decrypt(padded) == plaintext)
    }

    @Test("3993 octets make a 4096-octet body; 3994, or 3993 with padding, are too large")
    func limits() throws {
        let body = try WebPushEncryption.encrypt([UInt8](repeating: 0x41, count: 3993), for: self.subscription)
        #expect(body.count == 4096)
        #expect(throws: WebPushEncryptionError.tooLarge(3994)) {
            try WebPushEncryption.encrypt([UInt8](repeating: 0x41, count: 3994), for: self.subscription)
        }
        #expect(throws: WebPushEncryptionError.tooLarge(3993)) {
            try WebPushEncryption.encrypt(
                [UInt8](repeating: 0x41, count: 3993), for: self.subscription, senderKey: .init(), salt: Array(repeating: 0, count: 16),
                padding: 1
            )
        }
    }

    @Test("every message has its own sender key and salt")
    func freshKeyAndSalt() throws {
        let plaintext = Array("same text".utf8)
        let first = try WebPushEncryption.header(of: WebPushEncryption.encrypt(plaintext, for: self.subscription))
        let second = try WebPushEncryption.header(of: WebPushEncryption.encrypt(plaintext, for: self.subscription))
        #expect(first.salt != second.salt)
        #expect(first.senderKey != second.senderKey)
        #expect(first.recordSize == 4096)
    }

    @Test("a flipped bit anywhere in the record, the wrong auth or the wrong key is badTag")
    func badTag() throws {
        let body = try WebPushEncryption.encrypt(Array("hello".utf8), for: self.subscription)
        var lastBit = body
        lastBit[lastBit.count - 1] ^= 1
        #expect(self.decryptionError(lastBit) == .badTag)
        var cipherBit = body
        cipherBit[86] ^= 0x80
        #expect(self.decryptionError(cipherBit) == .badTag)
        var saltBit = body
        saltBit[0] ^= 1
        #expect(self.decryptionError(saltBit) == .badTag)
        #expect(throws: WebPushDecryptionError.badTag) {
            try WebPushEncryption.decrypt(body, receiverKey: self.browser.privateKey, auth: Array(repeating: 0, count: 16))
        }
        #expect(throws: WebPushDecryptionError.badTag) {
            try WebPushEncryption.decrypt(body, receiverKey: .init(), auth: self.browser.auth)
        }
        #expect(self.decryptionError(Array(body[..<(86 + 16)])) == .badTag)  // no room for tag and delimiter
    }

    @Test("rs below 18 is badRecordSize; 18 itself is a valid record size")
    func badRecordSize() throws {
        var body = try WebPushEncryption.encrypt([], for: self.subscription)
        body[16..<20] = [0, 0, 0, 17]
        #expect(self.decryptionError(body) == .badRecordSize)
        body[16..<20] = [0, 0, 0, 0]
        #expect(self.decryptionError(body) == .badRecordSize)
        let smallest = try self.seal(padded: [0x02], recordSize: 18)
        #expect(try self.decrypt(smallest) == [])
    }

    @Test("a 64-octet key id, or 65 octets that are not a point, is badSenderKey")
    func badSenderKey() throws {
        let body = try WebPushEncryption.encrypt(Array("hello".utf8), for: self.subscription)
        let shortKey = Array(body[0..<20]) + [64] + Array(body[21..<85]) + Array(body[86...])
        #expect(self.decryptionError(shortKey) == .badSenderKey)
        var offCurve = body
        offCurve[85] ^= 1  // the last octet of Y
        #expect(self.decryptionError(offCurve) == .badSenderKey)
        var compressedTag = body
        compressedTag[21] = 0x02
        #expect(self.decryptionError(compressedTag) == .badSenderKey)
    }

    @Test("fewer than 21 octets, or fewer than the key id announces, is truncatedHeader")
    func truncatedHeader() throws {
        let body = try WebPushEncryption.encrypt(Array("hello".utf8), for: self.subscription)
        #expect(self.decryptionError([]) == .truncatedHeader)
        #expect(self.decryptionError(Array(body[..<20])) == .truncatedHeader)
        #expect(self.decryptionError(Array(body[..<50])) == .truncatedHeader)
        #expect(self.decryptionError(Array(body[..<85])) == .truncatedHeader)
    }

    @Test("a record without the 0x02 delimiter, or with non-zero padding, is badPadding")
    func badPadding() throws {
        let text = Array("hello".utf8)
        #expect(try self.decrypt(self.seal(padded: text + [0x02, 0, 0, 0])) == text)
        #expect(self.decryptionError(try self.seal(padded: text + [0x01])) == .badPadding)  // "more records follow"
        #expect(self.decryptionError(try self.seal(padded: text + [0x03])) == .badPadding)
        #expect(self.decryptionError(try self.seal(padded: text)) == .badPadding)
        #expect(self.decryptionError(try self.seal(padded: text + [0x02, 0, 1, 0])) == .badPadding)
        #expect(self.decryptionError(try self.seal(padded: [0, 0, 0])) == .badPadding)
    }

    @Test("more octets than one record of rs holds is multipleRecords")
    func multipleRecords() throws {
        let body = try self.seal(padded: [UInt8](repeating: 0x41, count: 100) + [0x02], recordSize: 100)
        #expect(self.decryptionError(body) == .multipleRecords)
        #expect(throws: WebPushDecryptionError.multipleRecords) { try WebPushEncryption.header(of: body) }
    }

    @Test("header(of:) reads the framing of any collection without keys")
    func headerWithoutKeys() throws {
        let body = try WebPushEncryption.encrypt(Array("hello".utf8), for: self.subscription)
        let fromArray = try WebPushEncryption.header(of: body)
        let fromSlice = try WebPushEncryption.header(of: body[...])
        let fromNonContiguous = try WebPushEncryption.header(of: body.lazy.map { $0 })
        #expect(fromArray == fromSlice)
        #expect(fromArray == fromNonContiguous)
        #expect(fromArray.salt == Array(body[0..<16]))
        #expect(fromArray.senderKey == Array(body[21..<86]))
        #expect(throws: WebPushDecryptionError.truncatedHeader) { try WebPushEncryption.header(of: body.prefix(20)) }
    }

    /// Words in order, then zeros: the sender-key draw's rejection of 0 and of scalars ≥ n.
    struct ScriptedGenerator: RandomNumberGenerator {
        var words: [UInt64]
        mutating func next() -> UInt64 { self.words.isEmpty ? 0 : self.words.removeFirst() }
    }

    @Test("a sender key is a scalar in [1, n − 1]: zero and n itself are drawn again")
    func senderKeyRejection() throws {
        // P-256's order n, big-endian, as four words in the order randomBytes lays them out.
        let order: [UInt8] = [
            0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
        ]
        func words(_ bytes: [UInt8]) -> [UInt64] {
            stride(from: 0, to: 32, by: 8).map { start in
                (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[start + $1]) << ($1 * 8) }
            }
        }
        var nMinusOne = order
        nMinusOne[31] -= 1
        var generator = ScriptedGenerator(words: [0, 0, 0, 0] + words(order) + words(nMinusOne))
        let key = WebPushEncryption.ephemeralKey(using: &generator)
        #expect(Array(key.rawRepresentation) == nMinusOne)
        #expect(generator.words.isEmpty)
        var system = SystemRandomNumberGenerator()
        #expect(WebPushEncryption.ephemeralKey(using: &system).rawRepresentation != WebPushEncryption.ephemeralKey(using: &system).rawRepresentation)
    }
}

// SPDX-License-Identifier: Apache-2.0
import Crypto
import Testing

@testable import WebPush

/// RFC 8291 §5 and Appendix A, typed in from the RFC: the proof that Herald agrees with the
/// specification, not merely with itself.
@Suite struct RFC8291VectorTests {
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
    static let ecdhSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
    static let ikm = "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg"
    static let cek = "oIhVW04MRdy2XN9CiKLxTg"
    static let nonce = "4h_95klXJ5E_qnoN"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml"
        + "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT"
        + "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    func keys() throws -> (sender: P256.KeyAgreement.PrivateKey, receiver: P256.KeyAgreement.PrivateKey) {
        let sender = try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes(Self.asPrivate))
        let receiver = try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes(Self.uaPrivate))
        #expect(Array(sender.publicKey.x963Representation) == (try bytes(Self.asPublic)))
        #expect(Array(receiver.publicKey.x963Representation) == (try bytes(Self.uaPublic)))
        return (sender, receiver)
    }

    @Test("the intermediate values of Appendix A")
    func intermediateValues() throws {
        let (sender, receiver) = try self.keys()
        let shared = try sender.sharedSecretFromKeyAgreement(with: receiver.publicKey)
        #expect(shared.withUnsafeBytes { Array($0) } == (try bytes(Self.ecdhSecret)))
        let ikm = try shared.withUnsafeBytes { ecdh in
            WebPushEncryption.inputKeyingMaterial(
                ecdhSecret: ecdh,
                auth: try bytes(Self.auth),
                receiverPublic: try bytes(Self.uaPublic),
                senderPublic: try bytes(Self.asPublic)
            )
        }
        #expect(ikm == (try bytes(Self.ikm)))
        let secrets = WebPushEncryption.contentSecrets(ikm: ikm, salt: try bytes(Self.salt))
        #expect(secrets.keyBytes == (try bytes(Self.cek)))
        #expect(secrets.nonceBytes == (try bytes(Self.nonce)))
    }

    @Test("encrypting the example gives the RFC's body octet for octet")
    func encryptsTheExample() throws {
        let (sender, _) = try self.keys()
        let subscription = try WebPushSubscriptionKeys(p256dh: Self.uaPublic, auth: Self.auth)
        let body = try WebPushEncryption.encrypt(Self.plaintext, for: subscription, senderKey: sender, salt: bytes(Self.salt))
        #expect(body == (try bytes(Self.body)))
        #expect(body.count == WebPushEncryption.headerLength + Self.plaintext.count + 1 + 16)
    }

    @Test("decrypting the RFC's body gives the plaintext, and its header reads as the RFC says")
    func decryptsTheExample() throws {
        let (_, receiver) = try self.keys()
        let body = try bytes(Self.body)
        #expect(try WebPushEncryption.decrypt(body, receiverKey: receiver, auth: bytes(Self.auth)) == Self.plaintext)
        let header = try WebPushEncryption.header(of: body)
        #expect(header.salt == (try bytes(Self.salt)))
        #expect(header.recordSize == 4096)
        #expect(header.senderKey == (try bytes(Self.asPublic)))
        #expect(header.length == 86)
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import Foundation
import HeraldTesting
import Testing
import WebPush

/// Herald's RFC 8291 and RFC 8292 against the Python libraries the ecosystem uses (http-ece,
/// py-vapid, PyJWT, pywebpush, cryptography): `Tests/ThirdParty/webpush_crypto.py`. Needs
/// `python3 -m pip install http-ece py-vapid pywebpush cryptography pyjwt`; runs only with
/// HERALD_THIRD_PARTY=1. No request leaves the process: pywebpush posts to a stand-in session.
@Suite(.heavy, .enabled(if: ProcessInfo.processInfo.environment["HERALD_THIRD_PARTY"] == "1"))
struct ThirdPartyCryptoTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("ThirdParty/webpush_crypto.py").path
    static let endpoint = "http://127.0.0.1:29102/wpush/v2/gAAAAABherald"

    @Test("http-ece and py-vapid accept what Herald makes; Herald accepts what pywebpush makes")
    func agreement() async throws {
        let browser = Browser()
        let subscription = try WebPushSubscriptionKeys(p256dh: browser.publicKey, auth: browser.auth)
        let plaintexts: [[UInt8]] = [
            [], Array("When I grow up, I want to be a watermelon".utf8), Array(#"{"title":"Herald ✓","body":"🔔 ding"}"#.utf8),
            (0..<300).map { UInt8(truncatingIfNeeded: $0) }, [UInt8](repeating: 0x7A, count: WebPushEncryption.maximumPlaintext),
        ]
        let messages: [JSONValue] = try plaintexts.map { plaintext in
            let body = try WebPushEncryption.encrypt(plaintext, for: subscription)
            return ["plaintext": .string(Base64URL.encode(plaintext)), "body": .string(Base64URL.encode(body))]
        }
        let vapid = VAPIDKey()
        let now = Int64(Date().timeIntervalSince1970)
        let audience = try #require(VAPID.origin(of: Self.endpoint))
        let subject = "mailto:ops@herald.example"
        let authorization = vapid.authorization(audience: audience, subject: subject, expiresAt: now + 43_200)
        let pywebpushVAPID = VAPIDKey()
        let pywebpushPlaintexts: [[UInt8]] = [
            Array("from pywebpush".utf8), (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) },
            [UInt8](repeating: 0x51, count: WebPushEncryption.maximumPlaintext),
        ]
        let input: JSONValue = [
            "receiver_private": .string(Base64URL.encode(browser.privateKey.rawRepresentation)),
            "receiver_public": .string(subscription.p256dhBase64URL),
            "auth": .string(subscription.authBase64URL),
            "messages": .array(messages),
            "vapid": [
                "authorization": .string(authorization), "audience": .string(audience), "subject": .string(subject),
                "expires_at": .int(now + 43_200), "now": .int(now), "public_key": .string(vapid.publicKeyBase64URL),
            ],
            "vapid_private": .string(Base64URL.encode(pywebpushVAPID.rawRepresentation)),
            "endpoint": .string(Self.endpoint),
            "pywebpush_plaintexts": .array(pywebpushPlaintexts.map { .string(Base64URL.encode($0)) }),
        ]
        let directory = try TemporaryDirectory(prefix: "webpush-crypto")
        defer { directory.remove() }
        let inputFile = try directory.write("input.json", input.jsonString)
        let result = try await ProcessRunner.run("env", ["WEBPUSH_INPUT=\(inputFile)", "python3", Self.script], timeout: 120)
        #expect(result.exitCode == 0, "\(result.standardOutput)\n\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").last.map(String.init), "\(result.standardError)")
        let report = try JSONValue.parse(line)
        #expect(report["failures"]?.arrayValue?.isEmpty == true, "\(line)")
        #expect(report["decrypted"]?.intValue == Int64(plaintexts.count))
        #expect(report["vapid_claims"]?["aud"]?.stringValue == audience)

        // (3) What pywebpush, WebPusher.encode and http_ece.encrypt sent, opened by Herald.
        let sent = try #require(report["sent"]?.arrayValue)
        #expect(sent.count == pywebpushPlaintexts.count + 2)
        let reportedNow = report["now"]?.intValue ?? now
        for message in sent {
            let source = message["source"]?.stringValue ?? "?"
            let plaintext = try #require(message["plaintext"]?.stringValue.flatMap { Base64URL.decode($0) })
            let body = try #require(message["body"]?.stringValue.flatMap { Base64URL.decode($0) })
            let header = try WebPushEncryption.header(of: body)
            #expect(header.recordSize == 4096, "\(source)")
            #expect(try WebPushEncryption.decrypt(body, receiverKey: browser.privateKey, auth: browser.auth) == plaintext, "\(source)")
            guard source == "webpush" else { continue }
            let header2 = try #require(message["authorization"]?.stringValue)
            #expect(header2.hasPrefix("vapid t=") && header2.contains(",k="), "pywebpush writes no space after the comma: \(header2)")
            let verified = try VAPID.verify(header2, audience: audience, now: reportedNow)
            #expect(verified.key == pywebpushVAPID.publicKey)
            #expect(verified.claims.subject == "mailto:push@herald.example")
            #expect((verified.claims.expiresAt ?? 0) - reportedNow <= 12 * 3600)
        }
    }
}

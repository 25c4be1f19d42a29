// SPDX-License-Identifier: Apache-2.0
import APNSModels
import _CryptoExtras

/// A Firebase service account's key file (the JSON the Firebase console hands out): what
/// signs the OAuth assertion and where it is exchanged for an access token.
public struct FCMServiceAccountKey: Sendable {
    public let projectID: String
    public let clientEmail: String
    public let privateKeyID: String?
    /// Where the assertion is exchanged (the JSON's `token_uri`).
    public let tokenURI: String
    let privateKey: _RSA.Signing.PrivateKey

    /// Google's token endpoint: the assertion's audience, whatever `token_uri` says (as
    /// google-auth does).
    public static let googleTokenAudience = "https://oauth2.googleapis.com/token"
    /// The scope FCM's send takes.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    /// Reads a key file; throws ``FCMKeyError`` naming what is wrong (never the key itself).
    public init(json: [UInt8]) throws(FCMKeyError) {
        guard let value = try? JSONValue.parse(json), value.objectMembers != nil else {
            throw FCMKeyError("the service account is not a JSON object")
        }
        func field(_ name: String) throws(FCMKeyError) -> String {
            guard let text = value[name]?.stringValue, !text.isEmpty else { throw FCMKeyError("the service account has no \(name)") }
            return text
        }
        guard value["type"]?.stringValue == "service_account" else {
            throw FCMKeyError("the JSON is not a service account (type must be service_account)")
        }
        self.projectID = try field("project_id")
        self.clientEmail = try field("client_email")
        self.privateKeyID = value["private_key_id"]?.stringValue
        let tokenURI = try field("token_uri")
        guard tokenURI.hasPrefix("https://") || tokenURI.hasPrefix("http://") else { throw FCMKeyError("token_uri is not an http(s) URL") }
        self.tokenURI = tokenURI
        guard self.projectID.utf8.count <= 128,
            self.projectID.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) })
        else {
            throw FCMKeyError("project_id is not a Firebase project id")
        }
        do {
            self.privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: try field("private_key"))
        } catch let error as FCMKeyError {
            throw error
        } catch {
            throw FCMKeyError("private_key is not a PEM RSA private key")
        }
        guard self.privateKey.keySizeInBits >= 2048 else { throw FCMKeyError("private_key is shorter than 2048 bits") }
    }

    /// The OAuth 2.0 JWT-bearer assertion for `scope`, issued at `now` (UNIX seconds), valid for
    /// an hour: RS256 over `header.claims`, as Google's libraries sign it.
    public func assertion(now: Int64, scope: String = Self.messagingScope) throws -> String {
        var header: [(String, JSONValue)] = [("alg", "RS256"), ("typ", "JWT")]
        if let keyID = self.privateKeyID { header.append(("kid", .string(keyID))) }
        let claims: JSONValue = .object([
            ("iss", .string(self.clientEmail)), ("scope", .string(scope)), ("aud", .string(Self.googleTokenAudience)),
            ("iat", .int(now)), ("exp", .int(now + 3600)),
        ])
        let signingInput = Base64URL.encode(JSONValue.object(header).serialized()) + "." + Base64URL.encode(claims.serialized())
        let signature = try self.privateKey.signature(for: Array(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

/// What is wrong with a service-account key file.
public struct FCMKeyError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

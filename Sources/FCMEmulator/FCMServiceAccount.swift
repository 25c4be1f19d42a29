// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import _CryptoExtras

/// A Google service account as Firebase hands it out (the JSON key file), with an RSA key.
public struct FCMServiceAccount: Sendable, Hashable {
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    public var projectID: String
    public var privateKeyID: String
    /// The RSA private key, PEM (`-----BEGIN PRIVATE KEY-----`, PKCS#8).
    public var privateKeyPEM: String
    public var clientEmail: String
    public var clientID: String
    /// Where google-auth posts its JWT assertion: the emulator's `/token` for accounts it made.
    public var tokenURI: String

    public init(projectID: String, privateKeyID: String, privateKeyPEM: String, clientEmail: String, clientID: String, tokenURI: String) {
        self.projectID = projectID
        self.privateKeyID = privateKeyID
        self.privateKeyPEM = privateKeyPEM
        self.clientEmail = clientEmail
        self.clientID = clientID
        self.tokenURI = tokenURI
    }

    public struct InvalidJSON: Error, Sendable, Hashable, CustomStringConvertible {
        public var message: String
        public var description: String { "invalid service account JSON: \(self.message)" }
    }

    /// Parses a service-account key file. Requires `type` = `service_account` (as firebase-admin
    /// does), `project_id`, `private_key_id`, `private_key` (an RSA key in PEM), `client_email`;
    /// `client_id` and `token_uri` may be missing (`token_uri` then is Google's).
    public init(json: String) throws {
        let object: JSONValue
        do {
            object = try JSONValue.parse(json)
        } catch {
            throw InvalidJSON(message: "\(error)")
        }
        try self.init(object: object)
    }

    init(object: JSONValue) throws {
        guard object.objectMembers != nil else { throw InvalidJSON(message: "not a JSON object") }
        func required(_ key: String) throws -> String {
            guard let value = object[key]?.stringValue, !value.isEmpty else { throw InvalidJSON(message: "\(key) is missing") }
            return value
        }
        guard object["type"]?.stringValue == "service_account" else {
            throw InvalidJSON(message: "type must be \"service_account\"")
        }
        self.init(
            projectID: try required("project_id"),
            privateKeyID: try required("private_key_id"),
            privateKeyPEM: try required("private_key"),
            clientEmail: try required("client_email"),
            clientID: object["client_id"]?.stringValue ?? "",
            tokenURI: object["token_uri"]?.stringValue ?? Self.googleTokenURI
        )
        guard (try? self.publicKey()) != nil else { throw InvalidJSON(message: "private_key is not an RSA private key in PEM form") }
    }

    /// A new account for `projectID` with a fresh RSA-2048 key, named the way Firebase names
    /// its Admin SDK accounts (`firebase-adminsdk-xxxxx@<project>.iam.gserviceaccount.com`).
    public static func generate(projectID: String, tokenURI: String = Self.googleTokenURI) throws -> FCMServiceAccount {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let lower = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        let suffix = String((0..<5).map { _ in lower.randomElement()! })
        let keyID = (0..<20).map { _ in String(UInt8.random(in: 0...255), radix: 16).leftPadded(to: 2) }.joined()
        let clientID = "1" + String((0..<20).map { _ in "0123456789".randomElement()! })
        return FCMServiceAccount(
            projectID: projectID,
            privateKeyID: keyID,
            privateKeyPEM: key.pkcs8PEMRepresentation + "\n",
            clientEmail: "firebase-adminsdk-\(suffix)@\(projectID).iam.gserviceaccount.com",
            clientID: clientID,
            tokenURI: tokenURI
        )
    }

    /// The public half of ``privateKeyPEM``.
    func publicKey() throws -> _RSA.Signing.PublicKey {
        try _RSA.Signing.PrivateKey(pemRepresentation: self.privateKeyPEM).publicKey
    }

    /// The key file as Firebase's console hands it out (pretty-printed, keys in its order).
    public var json: String {
        let escapedEmail = self.clientEmail.replacingAll("@", with: "%40")
        let members: [(String, String)] = [
            ("type", "service_account"),
            ("project_id", self.projectID),
            ("private_key_id", self.privateKeyID),
            ("private_key", self.privateKeyPEM),
            ("client_email", self.clientEmail),
            ("client_id", self.clientID),
            ("auth_uri", "https://accounts.google.com/o/oauth2/auth"),
            ("token_uri", self.tokenURI),
            ("auth_provider_x509_cert_url", "https://www.googleapis.com/oauth2/v1/certs"),
            ("client_x509_cert_url", "https://www.googleapis.com/robot/v1/metadata/x509/\(escapedEmail)"),
            ("universe_domain", "googleapis.com"),
        ]
        let lines = members.map { "  " + JSONValue.string($0.0).jsonString + ": " + JSONValue.string($0.1).jsonString }
        return "{\n" + lines.joined(separator: ",\n") + "\n}\n"
    }

    var jsonValue: JSONValue { (try? JSONValue.parse(self.json)) ?? .null }
}

extension String {
    func leftPadded(to length: Int, with pad: Character = "0") -> String {
        self.count >= length ? self : String(repeating: pad, count: length - self.count) + self
    }

    /// Replaces every occurrence of `target` (no Foundation on this path).
    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}

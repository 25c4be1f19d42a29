// SPDX-License-Identifier: Apache-2.0
public import Crypto

/// An APNs signing key: the `.p8` file from the developer account with its key id and team id.
public struct SigningKey: Sendable {
    public let keyID: String
    public let teamID: String
    let privateKey: P256.Signing.PrivateKey

    /// Reads a PKCS#8 (`.p8`) or SEC1 PEM P-256 private key.
    public init(pem: String, keyID: String, teamID: String) throws(APNSValidationError) {
        guard !keyID.isEmpty, !teamID.isEmpty else {
            throw APNSValidationError(.badKey, "a signing key needs a key id and a team id")
        }
        do {
            self.privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw APNSValidationError(.badKey, "the key is not a P-256 private key in PEM form (a .p8 file)")
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) {
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
    }

    /// A fresh key, for tests and the emulator's own credentials.
    public static func generate(keyID: String, teamID: String) -> SigningKey {
        SigningKey(privateKey: P256.Signing.PrivateKey(), keyID: keyID, teamID: teamID)
    }

    public var publicKey: P256.Signing.PublicKey { self.privateKey.publicKey }

    /// The public key as a PEM `PUBLIC KEY` block, for registering it with an emulator.
    public var publicKeyPEM: String { self.privateKey.publicKey.pemRepresentation }

    /// The private key as PKCS#8 PEM, the form of Apple's `.p8` files.
    public var privateKeyPEM: String { self.privateKey.pemRepresentation }

    /// An ES256 provider token: header `{"alg":"ES256","kid":…}`, claims `{"iss":…,"iat":…}`
    /// with `iat` a JSON integer, and the raw 64-byte r‖s signature (RFC 7515).
    public func providerToken(issuedAt: Int64) throws(APNSValidationError) -> String {
        let header = JSONValue.object([("alg", "ES256"), ("kid", .string(self.keyID))]).serialized()
        let claims = JSONValue.object([("iss", .string(self.teamID)), ("iat", .int(issuedAt))]).serialized()
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try self.privateKey.signature(for: SHA256.hash(data: Array(signingInput.utf8)))
        } catch {
            throw APNSValidationError(.badKey, "signing the provider token failed")
        }
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

/// A provider token taken apart, before or after its signature is checked.
public struct ProviderTokenClaims: Sendable, Hashable {
    public var keyID: String
    public var teamID: String
    /// UNIX seconds.
    public var issuedAt: Int64
    public var algorithm: String
    let signingInput: [UInt8]
    let signature: [UInt8]

    /// Parses `header.claims.signature`. Accepts `iat` as a number or a numeric string (both are
    /// seen in the wild) and any of `typ`/extra claims. Does not check the signature.
    public init(token: String) throws(APNSValidationError) {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw APNSValidationError(.badProviderToken, "a JWT has three dot-separated parts") }
        guard let headerBytes = Base64URL.decode(Substring(parts[0])),
            let claimBytes = Base64URL.decode(Substring(parts[1])),
            let signature = Base64URL.decode(Substring(parts[2]))
        else {
            throw APNSValidationError(.badProviderToken, "a JWT part is not base64url")
        }
        guard let header = try? JSONValue.parse(headerBytes), let claims = try? JSONValue.parse(claimBytes) else {
            throw APNSValidationError(.badProviderToken, "the JWT header or claims are not JSON")
        }
        guard let algorithm = header["alg"]?.stringValue else {
            throw APNSValidationError(.badProviderToken, "the JWT header has no alg")
        }
        guard let keyID = header["kid"]?.stringValue, !keyID.isEmpty else {
            throw APNSValidationError(.badProviderToken, "the JWT header has no kid")
        }
        guard let teamID = claims["iss"]?.stringValue, !teamID.isEmpty else {
            throw APNSValidationError(.badProviderToken, "the JWT claims have no iss")
        }
        let issuedAt: Int64
        switch claims["iat"] {
        case .some(.int(let seconds)): issuedAt = seconds
        case .some(.string(let text)):
            guard let seconds = Int64(text) else {
                throw APNSValidationError(.badProviderToken, "the JWT iat is not a number")
            }
            issuedAt = seconds
        case .some(let value) where value.intValue != nil: issuedAt = value.intValue!
        default: throw APNSValidationError(.badProviderToken, "the JWT claims have no iat")
        }
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
        self.algorithm = algorithm
        let signingInputEnd = parts[1].endIndex
        self.signingInput = Array(token.utf8[token.utf8.startIndex..<signingInputEnd])
        self.signature = signature
    }

    /// Whether the token is ES256 and signed by `publicKey`; raw r‖s and DER signatures both count.
    public func isSigned(by publicKey: P256.Signing.PublicKey) -> Bool {
        guard self.algorithm == "ES256" else { return false }
        let digest = SHA256.hash(data: self.signingInput)
        if self.signature.count == 64, let raw = try? P256.Signing.ECDSASignature(rawRepresentation: self.signature) {
            return publicKey.isValidSignature(raw, for: digest)
        }
        if let der = try? P256.Signing.ECDSASignature(derRepresentation: self.signature) {
            return publicKey.isValidSignature(der, for: digest)
        }
        return false
    }
}

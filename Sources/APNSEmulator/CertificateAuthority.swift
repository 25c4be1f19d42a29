// SPDX-License-Identifier: Apache-2.0
public import APNSModels
import Crypto
import Foundation
public import SwiftASN1
public import X509

/// The emulator's own certificate authority: it signs the emulator's server certificate (so
/// clients trust one CA file) and issues APNs-style client certificates for certificate auth.
public final class CertificateAuthority: Sendable {
    public let certificate: Certificate
    let privateKey: P256.Signing.PrivateKey

    /// The CA certificate as PEM: the file clients trust.
    public let certificatePEM: String

    /// Apple's extension listing a certificate's topics (`1.2.840.113635.100.6.3.6`).
    public static let topicsExtensionOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 6]
    /// Marks a certificate for the development environment.
    public static let developmentExtensionOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 1]
    /// Marks a certificate for the production environment.
    public static let productionExtensionOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 2]
    /// The `UID` attribute of the subject, which holds the bundle id.
    public static let userIDOID: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    /// A new CA with a fresh P-256 key.
    public convenience init() throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName {
            OrganizationName("Herald")
            CommonName("Herald APNs Emulator CA")
        }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-86_400),
            notValidAfter: now.addingTimeInterval(10 * 365 * 86_400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey))
            },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
        try self.init(certificate: certificate, privateKey: key)
    }

    init(certificate: Certificate, privateKey: P256.Signing.PrivateKey) throws {
        self.certificate = certificate
        self.privateKey = privateKey
        self.certificatePEM = try certificate.serializeAsPEM().pemString
    }

    /// Loads the CA from `directory` (`ca.pem`, `ca-key.pem`), creating and saving one on first use.
    public static func loadOrCreate(in directory: String) throws -> CertificateAuthority {
        let manager = FileManager.default
        let certificatePath = directory + "/ca.pem"
        let keyPath = directory + "/ca-key.pem"
        if manager.fileExists(atPath: certificatePath), manager.fileExists(atPath: keyPath) {
            let certificate = try Certificate(pemEncoded: try String(contentsOfFile: certificatePath, encoding: .utf8))
            let key = try P256.Signing.PrivateKey(pemRepresentation: try String(contentsOfFile: keyPath, encoding: .utf8))
            return try CertificateAuthority(certificate: certificate, privateKey: key)
        }
        try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let authority = try CertificateAuthority()
        guard manager.createFile(atPath: keyPath, contents: Data(authority.privateKey.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw EmulatorError(.io, "cannot write \(keyPath)")
        }
        try authority.certificatePEM.write(toFile: certificatePath, atomically: true, encoding: .utf8)
        return authority
    }

    /// A certificate and its private key, both PEM.
    public struct IssuedCertificate: Sendable {
        public var certificatePEM: String
        public var privateKeyPEM: String
    }

    /// A server certificate for the emulator's TLS listeners: localhost, the loopback addresses and
    /// Apple's host names, so clients can keep the real host name and only change the address.
    public func issueServerCertificate(extraHosts: [String] = []) throws -> IssuedCertificate {
        let key = P256.Signing.PrivateKey()
        var names: [GeneralName] = [
            .dnsName("localhost"),
            .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
            .ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
        ]
        for host in APNSEnvironment.allCases.flatMap({ [$0.host, $0.channelManagementHost] }) + [
            "api.development.push.apple.com"
        ] + extraHosts {
            names.append(.dnsName(host))
        }
        let subject = try DistinguishedName {
            OrganizationName("Herald")
            CommonName("Herald APNs Emulator")
        }
        return try self.issue(
            key: key,
            subject: subject,
            validDays: 825,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            }
        )
    }

    /// An APNs provider certificate as Apple issues them: subject `UID=<bundle id>`, the topics
    /// extension listing `topics` (default: the bundle id, `.voip` and `.complication`), and the
    /// environment extensions.
    public func issueClientCertificate(
        bundleID: String,
        topics: [String]? = nil,
        environments: Set<APNSEnvironment> = [.development, .production],
        validDays: Int = 365
    ) throws -> IssuedCertificate {
        let key = P256.Signing.PrivateKey()
        let allTopics = topics ?? [bundleID, bundleID + ".voip", bundleID + ".complication"]
        let subject = DistinguishedName([
            RelativeDistinguishedName(RelativeDistinguishedName.Attribute(type: Self.userIDOID, utf8String: bundleID)),
            RelativeDistinguishedName(
                RelativeDistinguishedName.Attribute(type: .RDNAttributeType.commonName, utf8String: "Apple Push Services: \(bundleID)")
            ),
        ])
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            for topic in allTopics {
                try coder.serialize(ASN1UTF8String(topic))
                let kind = topic == bundleID ? "app" : String(topic.dropFirst(bundleID.count + 1))
                try coder.appendConstructedNode(identifier: .sequence) { inner in
                    try inner.serialize(ASN1UTF8String(kind))
                }
            }
        }
        let topicsValue = serializer.serializedBytes
        let null: [UInt8] = [0x05, 0x00]
        return try self.issue(
            key: key,
            subject: subject,
            validDays: validDays,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
                Certificate.Extension(oid: Self.topicsExtensionOID, critical: false, value: topicsValue[...])
                if environments.contains(.development) {
                    Certificate.Extension(oid: Self.developmentExtensionOID, critical: false, value: null[...])
                }
                if environments.contains(.production) {
                    Certificate.Extension(oid: Self.productionExtensionOID, critical: false, value: null[...])
                }
            }
        )
    }

    private func issue(
        key: P256.Signing.PrivateKey,
        subject: DistinguishedName,
        validDays: Int,
        extensions: Certificate.Extensions
    ) throws -> IssuedCertificate {
        let now = Date()
        var allExtensions = extensions
        try allExtensions.append(
            Certificate.Extension(
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: self.certificate.publicKey).keyIdentifier),
                critical: false
            )
        )
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(Double(validDays) * 86_400),
            issuer: self.certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: allExtensions,
            issuerPrivateKey: Certificate.PrivateKey(self.privateKey)
        )
        return IssuedCertificate(certificatePEM: try certificate.serializeAsPEM().pemString, privateKeyPEM: key.pemRepresentation)
    }
}

/// What an APNs provider certificate says about itself.
public struct ProviderCertificateInfo: Sendable, Hashable {
    /// The subject's UID: the app's bundle id.
    public var bundleID: String
    /// The topics the certificate may push to (the bundle id when it lists none).
    public var topics: [String]
    public var environments: Set<APNSEnvironment>

    /// Reads a DER certificate; `nil` when it has no UID.
    public init?(derEncoded bytes: [UInt8]) {
        guard let certificate = try? Certificate(derEncoded: bytes) else { return nil }
        var bundleID: String?
        for rdn in certificate.subject {
            for attribute in rdn where attribute.type == CertificateAuthority.userIDOID {
                bundleID = String(describing: attribute.value)
            }
        }
        guard let bundleID, !bundleID.isEmpty else { return nil }
        var topics: [String] = []
        var environments: Set<APNSEnvironment> = []
        for ext in certificate.extensions {
            switch ext.oid {
            case CertificateAuthority.topicsExtensionOID:
                if let node = try? DER.parse(Array(ext.value)), case .constructed(let children) = node.content {
                    for child in children where child.identifier == .utf8String {
                        if let topic = try? ASN1UTF8String(derEncoded: child) { topics.append(String(topic)) }
                    }
                }
            case CertificateAuthority.developmentExtensionOID: environments.insert(.development)
            case CertificateAuthority.productionExtensionOID: environments.insert(.production)
            default: break
            }
        }
        self.bundleID = bundleID
        self.topics = topics.isEmpty ? [bundleID] : topics
        // A certificate without environment markers is treated as valid for both.
        self.environments = environments.isEmpty ? Set(APNSEnvironment.allCases) : environments
    }
}

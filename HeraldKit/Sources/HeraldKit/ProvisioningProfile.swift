// SPDX-License-Identifier: Apache-2.0
public import Foundation

/// An app's provisioning profile (`embedded.mobileprovision` on iOS, tvOS, watchOS and visionOS,
/// `Contents/embedded.provisionprofile` on macOS): a CMS (PKCS #7) SignedData whose content is a
/// property list. HeraldKit reads its entitlements for the APNs environment the build's tokens
/// belong to; it does not check the signature (the system did, when it installed the app).
public struct ProvisioningProfile: Sendable {
    /// Why a profile could not be read.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// `not_cms` (not a CMS SignedData in DER or BER), `no_content` (detached, nothing
        /// inside), `not_plist` (the content is not a property-list dictionary).
        public var code: String
        public init(code: String) { self.code = code }
        public var description: String { self.code }
    }

    /// The profile's property list.
    public var propertyList: [String: any Sendable]

    /// Reads a profile's bytes.
    public init(data: Data) throws {
        let content = try CMSReader.content(of: data)
        guard let plist = try? PropertyListSerialization.propertyList(from: content, options: [], format: nil) as? [String: Any] else {
            throw Failure(code: "not_plist")
        }
        self.propertyList = Self.sendable(plist) as? [String: any Sendable] ?? [:]
    }

    /// The profile's `Entitlements` dictionary (empty when it has none).
    public var entitlements: [String: any Sendable] { self.propertyList["Entitlements"] as? [String: any Sendable] ?? [:] }

    /// The profile's `aps-environment` entitlement (`com.apple.developer.aps-environment` in a
    /// macOS profile): `development` is ``PushEnvironment/sandbox``, `production` is
    /// ``PushEnvironment/production``; nil when the profile has no push entitlement.
    public var apsEnvironment: PushEnvironment? {
        let value = (self.entitlements["aps-environment"] ?? self.entitlements["com.apple.developer.aps-environment"]) as? String
        switch value {
        case "development": return .sandbox
        case "production": return .production
        default: return nil
        }
    }

    /// Property-list values as `Sendable` ones (they are: strings, numbers, dates, data, arrays
    /// and dictionaries of those).
    private static func sendable(_ value: Any) -> any Sendable {
        switch value {
        case let dictionary as [String: Any]: return dictionary.mapValues { Self.sendable($0) }
        case let array as [Any]: return array.map { Self.sendable($0) }
        case let string as String: return string
        case let bool as Bool: return bool
        case let int as Int: return int
        case let double as Double: return double
        case let date as Date: return date
        case let data as Data: return data
        default: return String(describing: value)
        }
    }
}

extension PushEnvironment {
    /// The APNs environment of this build, as its provisioning profile says.
    ///
    /// Reads `embedded.mobileprovision` (iOS, tvOS, watchOS, visionOS) or
    /// `Contents/embedded.provisionprofile` (macOS) from `bundle`. Without a profile (an App Store
    /// build, whose profile the store strips, or Linux), or with one that cannot be read or has no
    /// `aps-environment`, the answer is `fallback`: ``production`` unless you say otherwise, since
    /// a build without a profile is most often the App Store's. The simulator has no profile and
    /// gets sandbox tokens: pass `fallback: .sandbox` there (`#if targetEnvironment(simulator)`).
    public static func fromProvisioningProfile(in bundle: Bundle = .main, fallback: PushEnvironment = .production) -> PushEnvironment {
        let candidates = [
            bundle.bundleURL.appendingPathComponent("embedded.mobileprovision"),
            bundle.bundleURL.appendingPathComponent("Contents").appendingPathComponent("embedded.provisionprofile"),
            bundle.bundleURL.appendingPathComponent("embedded.provisionprofile"),
        ]
        for url in candidates {
            guard let data = try? Data(contentsOf: url) else { continue }
            return (try? ProvisioningProfile(data: data))?.apsEnvironment ?? fallback
        }
        return fallback
    }
}

/// The few DER/BER rules a CMS SignedData's encapsulated content needs: ContentInfo →
/// `[0]` SignedData → encapContentInfo → `[0]` eContent OCTET STRING (primitive, or constructed
/// from pieces, as BER allows; definite or indefinite lengths).
enum CMSReader {
    struct Element {
        var tag: UInt8
        /// The contents (for an indefinite length, up to its end-of-contents).
        var body: ArraySlice<UInt8>
        var constructed: Bool { self.tag & 0x20 != 0 }
    }

    static let signedDataOID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]  // 1.2.840.113549.1.7.2

    static func content(of data: Data) throws -> Data {
        let bytes = [UInt8](data)
        let failure = ProvisioningProfile.Failure(code: "not_cms")
        guard let top = try? Self.read(bytes[...]), top.element.tag == 0x30 else { throw failure }
        // ContentInfo ::= SEQUENCE { contentType OID, content [0] EXPLICIT SignedData }
        let info = try Self.children(top.element.body)
        guard info.count >= 2, info[0].tag == 0x06, Array(info[0].body) == Self.signedDataOID, info[1].tag == 0xA0 else { throw failure }
        // SignedData ::= SEQUENCE { version, digestAlgorithms SET, encapContentInfo SEQUENCE, … }
        guard let signedData = try Self.children(info[1].body).first, signedData.tag == 0x30 else { throw failure }
        let fields = try Self.children(signedData.body)
        guard fields.count >= 3, fields[0].tag == 0x02, fields[1].tag == 0x31, fields[2].tag == 0x30 else { throw failure }
        // EncapsulatedContentInfo ::= SEQUENCE { eContentType OID, eContent [0] EXPLICIT OCTET STRING OPTIONAL }
        let encapsulated = try Self.children(fields[2].body)
        guard encapsulated.first?.tag == 0x06 else { throw failure }
        guard encapsulated.count >= 2, encapsulated[1].tag == 0xA0, let octets = try Self.children(encapsulated[1].body).first else {
            throw ProvisioningProfile.Failure(code: "no_content")
        }
        let content = try Self.octets(octets)
        guard !content.isEmpty else { throw ProvisioningProfile.Failure(code: "no_content") }
        return Data(content)
    }

    /// An OCTET STRING's bytes: primitive, or the concatenation of a constructed one's pieces.
    static func octets(_ element: Element) throws -> [UInt8] {
        switch element.tag {
        case 0x04: return Array(element.body)
        case 0x24: return try Self.children(element.body).flatMap { try Self.octets($0) }
        default: throw ProvisioningProfile.Failure(code: "not_cms")
        }
    }

    static func children(_ bytes: ArraySlice<UInt8>) throws -> [Element] {
        var rest = bytes
        var elements: [Element] = []
        while !rest.isEmpty {
            // End-of-contents of an indefinite length: the parent's end.
            if rest.count >= 2, rest[rest.startIndex] == 0, rest[rest.startIndex + 1] == 0 { break }
            let (element, remainder) = try Self.read(rest)
            elements.append(element)
            rest = remainder
        }
        return elements
    }

    /// One element at the front of `bytes`, and what follows it.
    static func read(_ bytes: ArraySlice<UInt8>) throws -> (element: Element, rest: ArraySlice<UInt8>) {
        let failure = ProvisioningProfile.Failure(code: "not_cms")
        var index = bytes.startIndex
        guard index < bytes.endIndex else { throw failure }
        let tag = bytes[index]
        guard tag & 0x1F != 0x1F else { throw failure }  // multi-byte tags: not in a profile
        index += 1
        guard index < bytes.endIndex else { throw failure }
        let first = bytes[index]
        index += 1
        if first == 0x80 {
            // Indefinite (BER, constructed only): the contents run to a matching end-of-contents.
            guard tag & 0x20 != 0 else { throw failure }
            let end = try Self.endOfContents(bytes[index...])
            return (Element(tag: tag, body: bytes[index..<end]), bytes[(end + 2)...])
        }
        var length = 0
        if first & 0x80 == 0 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count <= 4, bytes.endIndex - index >= count else { throw failure }
            for byte in bytes[index..<(index + count)] { length = length << 8 | Int(byte) }
            index += count
        }
        guard length <= bytes.endIndex - index else { throw failure }
        return (Element(tag: tag, body: bytes[index..<(index + length)]), bytes[(index + length)...])
    }

    /// Where the end-of-contents closing the indefinite-length contents at the front of `bytes` is.
    static func endOfContents(_ bytes: ArraySlice<UInt8>) throws -> Int {
        var rest = bytes
        while true {
            guard rest.count >= 2 else { throw ProvisioningProfile.Failure(code: "not_cms") }
            if rest[rest.startIndex] == 0, rest[rest.startIndex + 1] == 0 { return rest.startIndex }
            rest = try Self.read(rest).rest
        }
    }
}

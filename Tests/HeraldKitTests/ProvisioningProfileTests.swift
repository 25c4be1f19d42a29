// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldKit
import Testing

/// The provisioning-profile reader on profiles made with `openssl cms -sign` (see
/// `Fixtures/make-fixtures.sh`): DER and streamed BER, iOS and macOS entitlement keys, and
/// malformed ones.
@Suite struct ProvisioningProfileTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    static func fixture(_ name: String) throws -> Data { try Data(contentsOf: Self.fixtures.appendingPathComponent(name)) }

    @Test(
        "reads aps-environment from the plist inside the CMS signature",
        arguments: [
            ("development.mobileprovision", PushEnvironment.sandbox),
            ("production.mobileprovision", .production),
            ("macos.provisionprofile", .sandbox),
            ("streamed-ber.mobileprovision", .sandbox),
        ])
    func environment(file: String, expected: PushEnvironment) throws {
        let profile = try ProvisioningProfile(data: try Self.fixture(file))
        #expect(profile.apsEnvironment == expected)
        #expect(profile.entitlements["application-identifier"] as? String == "ABCDE12345.com.example.app")
        #expect(profile.propertyList["AppIDName"] as? String == "Herald Demo")
    }

    @Test("a profile without a push entitlement has no environment")
    func noPush() throws {
        #expect(try ProvisioningProfile(data: try Self.fixture("nopush.mobileprovision")).apsEnvironment == nil)
    }

    @Test(
        "malformed profiles are refused with a code",
        arguments: [
            ("truncated.mobileprovision", "not_cms"),
            ("notplist.mobileprovision", "not_plist"),
            ("detached.mobileprovision", "no_content"),
            ("make-fixtures.sh", "not_cms"),
        ])
    func malformed(file: String, code: String) throws {
        #expect(throws: ProvisioningProfile.Failure(code: code)) { try ProvisioningProfile(data: try Self.fixture(file)) }
    }

    @Test("garbage of every length up to a real profile's is refused, never a crash")
    func prefixes() throws {
        let whole = try Self.fixture("development.mobileprovision")
        for length in 0..<whole.count {
            #expect(throws: ProvisioningProfile.Failure.self) { try ProvisioningProfile(data: whole.prefix(length)) }
        }
    }

    @Test("from an app bundle: the profile's environment, else the stated fallback")
    func bundle() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("heraldkit-bundle-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        func app(_ name: String, _ profile: String?, at path: String) throws -> Bundle {
            let url = root.appendingPathComponent(name)
            let file = url.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            if let profile { try Self.fixture(profile).write(to: file) }
            return try #require(Bundle(url: url))
        }
        let ios = try app("Dev.app", "development.mobileprovision", at: "embedded.mobileprovision")
        #expect(PushEnvironment.fromProvisioningProfile(in: ios, fallback: .production) == .sandbox)
        let mac = try app("Mac.app", "production.mobileprovision", at: "Contents/embedded.provisionprofile")
        #expect(PushEnvironment.fromProvisioningProfile(in: mac, fallback: .sandbox) == .production)
        let store = try app("Store.app", nil, at: "Info.plist")
        #expect(PushEnvironment.fromProvisioningProfile(in: store) == .production, "no profile: the App Store's default")
        #expect(PushEnvironment.fromProvisioningProfile(in: store, fallback: .sandbox) == .sandbox)
        let broken = try app("Broken.app", "truncated.mobileprovision", at: "embedded.mobileprovision")
        #expect(PushEnvironment.fromProvisioningProfile(in: broken, fallback: .sandbox) == .sandbox)
    }
}

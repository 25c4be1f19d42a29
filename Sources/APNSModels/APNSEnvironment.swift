// SPDX-License-Identifier: Apache-2.0

/// Which APNs a request goes to. Device tokens belong to one environment.
public struct APNSEnvironment: Sendable, Hashable, RawRepresentable, CustomStringConvertible, CaseIterable {
    public let rawValue: String

    public init?(rawValue: String) {
        switch rawValue.lowercased() {
        case "development", "sandbox": self = .development
        case "production": self = .production
        default: return nil
        }
    }

    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// Apple's sandbox: apps built with a development provisioning profile.
    public static let development = APNSEnvironment("development")
    /// Apps from the App Store, TestFlight and ad hoc builds.
    public static let production = APNSEnvironment("production")

    public static let allCases: [APNSEnvironment] = [.development, .production]

    /// The host for device pushes (`POST /3/device/…`) and broadcasts.
    public var host: String {
        self == .production ? "api.push.apple.com" : "api.sandbox.push.apple.com"
    }

    /// The host and port of the channel-management API.
    public var channelManagementHost: String {
        self == .production ? "api-manage-broadcast.push.apple.com" : "api-manage-broadcast.sandbox.push.apple.com"
    }

    public var channelManagementPort: Int { self == .production ? 2196 : 2195 }

    public var description: String { self.rawValue }
}

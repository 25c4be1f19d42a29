// SPDX-License-Identifier: Apache-2.0
public import Foundation

/// A token the system gave the app, of any kind Herald knows.
public enum PushToken: Sendable, Hashable {
    /// `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`'s token (alert,
    /// background and MDM pushes).
    case device(Data)
    /// A PushKit VoIP token (`PKPushRegistry`, `.voIP`).
    case voip(Data)
    /// A Live Activity's update token (`Activity.pushTokenUpdates`), for that activity only.
    case liveActivity(Data, activityID: String)
    /// A push-to-start token (`Activity<Attributes>.pushToStartTokenUpdates`) for one
    /// `ActivityAttributes` type.
    case pushToStart(Data, attributesType: String)
    /// Another PushKit or extension token: `complication`, `fileprovider`, `location`,
    /// `pushtotalk`, `widgets` or `controls`.
    case other(Data, kind: String)

    public var data: Data {
        switch self {
        case .device(let data), .voip(let data), .liveActivity(let data, _), .pushToStart(let data, _), .other(let data, _): data
        }
    }

    /// The token as Herald and APNs spell it: lowercase hex.
    public var hex: String {
        var text = ""
        text.reserveCapacity(self.data.count * 2)
        for byte in self.data {
            text.append(Character(Unicode.Scalar(Self.digits[Int(byte >> 4)])))
            text.append(Character(Unicode.Scalar(Self.digits[Int(byte & 0x0F)])))
        }
        return text
    }

    private static let digits = Array("0123456789abcdef".utf8)

    /// Herald's name for the token's kind.
    public var kind: String {
        switch self {
        case .device: "device"
        case .voip: "voip"
        case .liveActivity: "liveactivity"
        case .pushToStart: "push-to-start"
        case .other(_, let kind): kind
        }
    }

    /// Reads a hex token (as printed by a server or a log) back; nil when it is not hex.
    public static func data(hex: String) -> Data? {
        let bytes = Array(hex.utf8)
        guard bytes.count % 2 == 0, !bytes.isEmpty else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var data = Data(capacity: bytes.count / 2)
        var index = 0
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else { return nil }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }
}

/// The APNs environment a token belongs to: debug builds get sandbox tokens, TestFlight and App
/// Store builds production ones.
public enum PushEnvironment: String, Sendable, Hashable {
    case sandbox
    case production
}

/// What Herald stores beside a token.
public struct DeviceDetails: Sendable, Hashable {
    public var environment: PushEnvironment
    public var userID: String?
    public var tags: [String]
    public var locale: String?
    public var timeZone: String?
    public var appVersion: String?
    public var platform: String?
    /// The device's end-to-end encryption key (its private half stays on the device).
    public var encryptionKey: EncryptedPayload.PublicKey?

    public init(
        environment: PushEnvironment, userID: String? = nil, tags: [String] = [], locale: String? = Locale.current.identifier,
        timeZone: String? = TimeZone.current.identifier, appVersion: String? = nil, platform: String? = nil,
        encryptionKey: EncryptedPayload.PublicKey? = nil
    ) {
        self.encryptionKey = encryptionKey
        self.environment = environment
        self.userID = userID
        self.tags = tags
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.platform = platform
    }
}

/// A device as Herald answered it.
public struct RegisteredDevice: Sendable, Hashable {
    public var token: String
    public var kind: String
    public var userID: String?
    public var active: Bool
    public var lastRegisteredAt: Int64

    public init(token: String, kind: String, userID: String?, active: Bool, lastRegisteredAt: Int64) {
        self.token = token
        self.kind = kind
        self.userID = userID
        self.active = active
        self.lastRegisteredAt = lastRegisteredAt
    }
}

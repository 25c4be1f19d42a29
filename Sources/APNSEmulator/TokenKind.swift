// SPDX-License-Identifier: Apache-2.0

/// The kinds of token an app can hold, each registered for one topic of its app.
///
/// This table is the emulator's own, written apart from the client-side model on purpose: the
/// emulator must catch a client whose push-type/topic rules are wrong, not share its mistakes.
public enum TokenKind: String, Sendable, Hashable, CaseIterable, Codable {
    /// `registerForRemoteNotifications`: alert and background pushes.
    case device
    /// PushKit VoIP.
    case voip
    /// PushKit complication (watchOS).
    case complication
    /// PushKit File Provider.
    case fileprovider
    /// Location Push Service Extension.
    case location
    /// Push to Talk channel token.
    case pushtotalk
    /// A Live Activity's update token.
    case liveactivity
    /// ActivityKit push-to-start token.
    case pushToStart = "push-to-start"
    /// WidgetKit push token.
    case widgets
    /// Controls push token.
    case controls
    /// MDM: the topic is the push certificate's UID.
    case mdm

    /// The topic this token is registered for, given the app's bundle id.
    public func topic(bundleID: String) -> String {
        switch self {
        case .device, .mdm: return bundleID
        case .voip: return bundleID + ".voip"
        case .complication: return bundleID + ".complication"
        case .fileprovider: return bundleID + ".pushkit.fileprovider"
        case .location: return bundleID + ".location-query"
        case .pushtotalk: return bundleID + ".voip-ptt"
        case .liveactivity, .pushToStart: return bundleID + ".push-type.liveactivity"
        case .widgets: return bundleID + ".push-type.widgets"
        case .controls: return bundleID + ".push-type.controls"
        }
    }

    /// Bytes of a fresh token: 32 like classic device tokens, longer for Live Activities.
    var tokenByteCount: Int {
        switch self {
        case .liveactivity, .pushToStart: return 80
        default: return 32
        }
    }
}

/// The emulator's own reading of `apns-push-type` values and the topic suffix each needs.
enum WirePushType {
    static let all = [
        "alert", "background", "complication", "controls", "fileprovider", "liveactivity", "location", "mdm", "pushtotalk",
        "voip", "widgets",
    ]

    /// The topic suffix `pushType` needs: `""` for the bare bundle id, `.some(nil)` for any topic
    /// (as for MDM); `nil` when it is not a push type. A switch, not a dictionary: it runs on
    /// every request, and hashing the value costs more than comparing it.
    static func suffix(of pushType: String) -> String?? {
        switch pushType {
        case "alert", "background": ""
        case "complication": ".complication"
        case "controls": ".push-type.controls"
        case "fileprovider": ".pushkit.fileprovider"
        case "liveactivity": ".push-type.liveactivity"
        case "location": ".location-query"
        case "mdm": .some(nil)
        case "pushtotalk": ".voip-ptt"
        case "voip": ".voip"
        case "widgets": ".push-type.widgets"
        default: nil
        }
    }

    static func isPushType(_ pushType: String) -> Bool { Self.suffix(of: pushType) != nil }

    static let allSuffixes: [String] = all.compactMap { Self.suffix(of: $0) ?? nil }.filter { !$0.isEmpty }

    /// Whether `topic` has the shape `pushType` needs.
    static func topicFits(_ topic: Substring, pushType: String) -> Bool {
        guard let entry = Self.suffix(of: pushType) else { return false }
        guard let suffix = entry else { return true }
        if suffix.isEmpty {
            return !allSuffixes.contains(where: { hasSuffix(topic, $0) })
        }
        return hasSuffix(topic, suffix) && topic.utf8.count > suffix.utf8.count
    }

    /// A byte-wise suffix test (topics are ASCII; no Unicode work needed).
    static func hasSuffix(_ text: Substring, _ suffix: String) -> Bool {
        let textBytes = text.utf8
        let suffixBytes = suffix.utf8
        // The last bytes first: most suffixes end differently, so most tests stop here.
        guard textBytes.count >= suffixBytes.count, textBytes.last == suffixBytes.last else { return false }
        return textBytes.suffix(suffixBytes.count).elementsEqual(suffixBytes)
    }

    static func maximumPayload(_ pushType: String) -> Int {
        pushType == "voip" ? 5120 : 4096
    }

    /// Certificate connections cannot carry these (token auth only).
    static func needsTokenAuthentication(_ pushType: String) -> Bool {
        pushType == "location" || pushType == "liveactivity"
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels

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
    /// Push type → the topic suffix it needs: `""` for the bare bundle id, `nil` for any topic
    /// (as for MDM). Searched in order, not hashed: it runs on every request, and comparing the
    /// few names costs less than hashing one (`alert` is found first).
    static let table: [(pushType: String, suffix: String?)] = [
        ("alert", ""), ("background", ""), ("complication", ".complication"), ("controls", ".push-type.controls"),
        ("fileprovider", ".pushkit.fileprovider"), ("liveactivity", ".push-type.liveactivity"), ("location", ".location-query"),
        ("mdm", nil), ("pushtotalk", ".voip-ptt"), ("voip", ".voip"), ("widgets", ".push-type.widgets"),
    ]

    /// The entry of `pushType`; nil when it is not a push type.
    static func entry(_ pushType: String) -> (pushType: String, suffix: String?)? {
        Self.table.first { $0.pushType == pushType }
    }

    static func isPushType(_ pushType: String) -> Bool { Self.entry(pushType) != nil }

    static let allSuffixes: [String] = table.compactMap(\.suffix).filter { !$0.isEmpty }

    /// Whether `topic` has the shape `pushType` needs.
    static func topicFits(_ topic: Substring, pushType: String) -> Bool {
        guard let entry = Self.entry(pushType) else { return false }
        guard let suffix = entry.suffix else { return true }
        if suffix.isEmpty {
            return !allSuffixes.contains(where: { topic.hasUTF8Suffix($0) })
        }
        return topic.hasUTF8Suffix(suffix) && topic.utf8.count > suffix.utf8.count
    }

    static func maximumPayload(_ pushType: String) -> Int {
        pushType == "voip" ? 5120 : 4096
    }

    /// Certificate connections cannot carry these (token auth only).
    static func needsTokenAuthentication(_ pushType: String) -> Bool {
        pushType == "location" || pushType == "liveactivity"
    }
}

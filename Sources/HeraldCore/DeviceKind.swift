// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// What a registered token is, and so which push type and topic reach it.
package enum DeviceKind: String, Sendable, Hashable, CaseIterable, Codable {
    /// The app's remote-notification token (alerts, badges, background updates).
    case device
    /// A PushKit VoIP token.
    case voip
    /// A Live Activity's update token (bound to one activity id).
    case liveActivity = "liveactivity"
    /// A Live Activity push-to-start token (bound to an attributes type).
    case pushToStart = "push-to-start"
    case complication
    case fileProvider = "fileprovider"
    case location
    case pushToTalk = "pushtotalk"
    case widgets
    case controls

    /// The push type sent to this kind when the sender names none.
    package var defaultPushType: PushType {
        switch self {
        case .device: return .alert
        case .voip: return .voip
        case .liveActivity, .pushToStart: return .liveactivity
        case .complication: return .complication
        case .fileProvider: return .fileprovider
        case .location: return .location
        case .pushToTalk: return .pushtotalk
        case .widgets: return .widgets
        case .controls: return .controls
        }
    }

    /// Push types this kind of token can receive.
    package var pushTypes: Set<PushType> {
        self == .device ? [.alert, .background] : [self.defaultPushType]
    }
}

/// A registry environment: which APNs host a token belongs to.
extension APNSEnvironment {
    /// Accepts Apple's "sandbox" as a name for development.
    package init?(name: String) {
        switch name {
        case "sandbox", "development": self = .development
        case "production": self = .production
        default: return nil
        }
    }
}

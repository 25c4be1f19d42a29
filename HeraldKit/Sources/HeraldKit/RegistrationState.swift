// SPDX-License-Identifier: Apache-2.0
import Foundation

/// What a ``HeraldClient`` registered and what it still owes Herald, as kept in its state file:
/// the user, and per token slot (a kind, plus the activity or attributes type for Live
/// Activities) the token, its details and any pending work with its back-off.
struct RegistrationState: Codable, Sendable, Equatable {
    struct Entry: Codable, Sendable, Equatable {
        enum Work: String, Codable, Sendable { case register, unregister }

        var kind: String
        var token: String
        var activityID: String?
        var attributesType: String?
        var details: StoredDetails
        /// Work Herald has not confirmed yet; nil when Herald has what this entry says.
        var pending: Work?
        /// Failed attempts at `pending` in a row.
        var failures: Int = 0
        /// Not tried again before this (within one launch; a launch tries everything once).
        var notBefore: Date?
        var lastError: String?

        var pushToken: PushToken? {
            guard let data = PushToken.data(hex: self.token) else { return nil }
            switch self.kind {
            case "device": return .device(data)
            case "voip": return .voip(data)
            case "liveactivity": return .liveActivity(data, activityID: self.activityID ?? "")
            case "push-to-start": return .pushToStart(data, attributesType: self.attributesType ?? "")
            default: return .other(data, kind: self.kind)
            }
        }

        /// The slot a token fills: a new device (or VoIP) token replaces the old one, a Live
        /// Activity's token its activity's.
        var slot: String { "\(self.kind)/\(self.activityID ?? self.attributesType ?? "")" }
    }

    /// `DeviceDetails` as stored.
    struct StoredDetails: Codable, Sendable, Equatable {
        var environment: String
        var userID: String?
        var tags: [String]
        var locale: String?
        var timeZone: String?
        var appVersion: String?
        var platform: String?
        var publicKeyType: String?
        var publicKey: Data?

        init(_ details: DeviceDetails) {
            self.environment = details.environment.rawValue
            self.userID = details.userID
            self.tags = details.tags
            self.locale = details.locale
            self.timeZone = details.timeZone
            self.appVersion = details.appVersion
            self.platform = details.platform
            self.publicKeyType = details.encryptionKey?.type
            self.publicKey = details.encryptionKey?.data
        }

        var details: DeviceDetails {
            DeviceDetails(
                environment: PushEnvironment(rawValue: self.environment) ?? .production, userID: self.userID, tags: self.tags,
                locale: self.locale, timeZone: self.timeZone, appVersion: self.appVersion, platform: self.platform,
                encryptionKey: zip(self.publicKeyType, self.publicKey).map { EncryptedPayload.PublicKey(type: $0, data: $1) }
            )
        }
    }

    var version = 1
    var serverURL: String
    var appID: String
    /// The user ``HeraldClient/setUser(_:assertion:)`` last set (nil: signed out).
    var userID: String?
    var entries: [Entry] = []

    init(serverURL: String, appID: String) {
        self.serverURL = serverURL
        self.appID = appID
    }

    static func slot(of token: PushToken) -> String {
        switch token {
        case .liveActivity(_, let activityID): "liveactivity/\(activityID)"
        case .pushToStart(_, let attributesType): "push-to-start/\(attributesType)"
        default: "\(token.kind)/"
        }
    }

    /// Sets (or replaces) the entry for `token`'s slot.
    mutating func upsert(_ token: PushToken, _ details: DeviceDetails, pending: Entry.Work) {
        var entry = Entry(kind: token.kind, token: token.hex, details: StoredDetails(details), pending: pending)
        switch token {
        case .liveActivity(_, let activityID): entry.activityID = activityID
        case .pushToStart(_, let attributesType): entry.attributesType = attributesType
        default: break
        }
        if let index = self.entries.firstIndex(where: { $0.slot == entry.slot }) {
            self.entries[index] = entry
        } else {
            self.entries.append(entry)
        }
    }

    mutating func update(_ token: PushToken, _ body: (inout Entry) -> Void) {
        guard let index = self.entries.firstIndex(where: { $0.token == token.hex && $0.kind == token.kind }) else { return }
        body(&self.entries[index])
    }

    mutating func remove(_ token: PushToken) {
        self.entries.removeAll { $0.token == token.hex && $0.kind == token.kind }
    }
}

private func zip<A, B>(_ a: A?, _ b: B?) -> (A, B)? {
    guard let a, let b else { return nil }
    return (a, b)
}

/// Reads and writes the state file: JSON, written atomically (a new file renamed over the old),
/// in a folder created on first write. A file that cannot be read starts a fresh state.
struct StateFile: Sendable {
    var url: URL?

    func load(serverURL: String, appID: String) -> RegistrationState {
        let fresh = RegistrationState(serverURL: serverURL, appID: appID)
        guard let url = self.url, let data = try? Data(contentsOf: url),
            let state = try? JSONDecoder().decode(RegistrationState.self, from: data), state.version == 1
        else { return fresh }
        // Another server or app: its tokens are not this one's; the user stays.
        guard state.serverURL == serverURL, state.appID == appID else {
            var moved = fresh
            moved.userID = state.userID
            return moved
        }
        return state
    }

    func save(_ state: RegistrationState) {
        guard let url = self.url else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(state) else { return }
        try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? data.write(to: url, options: .atomic)
    }
}

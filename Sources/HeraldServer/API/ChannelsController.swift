// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/apps/{app}/channels` (send and admin keys): the app's Live Activity broadcast channels,
/// created and deleted at Apple (or the built-in emulator) through the app's own client, and kept
/// in the store with Apple's id, per environment.
///
/// A register key cannot: it lives in the app, and a channel is the server's to manage (an app
/// that could create channels could use up the app's 10,000 or delete the channels its
/// activities are subscribed to).
struct ChannelsController {
    let store: any HeraldStore
    let clients: ClientProvider
    let clock: any EpochClock

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let channels = v1.group("apps/:app/channels").add(middleware: RequireScope(.send, store: self.store, clock: self.clock))
        channels.post(use: self.create)
        channels.get(use: self.list)
        channels.get(":id", use: self.get)
        channels.delete(":id", use: self.delete)
    }

    /// 201 with the channel Apple made. The 10,000 per app and environment are counted here
    /// first (422 `channel_limit_reached`, as Apple's own `CannotCreateChannelConfig` is).
    @Sendable func create(_ request: Request, context: APIRequestContext) async throws -> Answer<ChannelResponse> {
        let app = try context.requireApp()
        let body = try await request.decode(as: CreateChannelRequest.self, context: context)
        guard let name = body.environment else {
            throw HeraldError.invalid("environment (sandbox or production) is required", code: "missing_environment")
        }
        let environment = try Self.environment(name)
        guard let policy = APNSMessageStoragePolicy(rawValue: body.messageStoragePolicy ?? 0) else {
            throw HeraldError.invalid("messageStoragePolicy is 0 (no message stored) or 1 (the most recent)", code: "bad_message_storage_policy")
        }
        let channel = try await self.create(app: app, environment: environment, policy: policy)
        return Answer(.created, ChannelResponse(channel))
    }

    /// A new channel at APNs, kept here (the API's and the dashboard's create).
    func create(app: App, environment: APNSEnvironment, policy: APNSMessageStoragePolicy) async throws -> StoredChannel {
        let existing = try await self.store.channels(appID: app.id, environment: environment).count
        guard existing < StoredChannel.maximumPerApp else { throw Self.limitReached }
        let client = try await self.clients.client(appID: app.id, environment: environment)
        let created: APNSCreatedChannel
        do {
            created = try await client.createChannel(bundleID: app.bundleID, storagePolicy: policy)
        } catch {
            throw Self.heraldError(error)
        }
        let channel = StoredChannel(
            appID: app.id, environment: environment, channelID: created.channelID.rawValue, messageStoragePolicy: policy.rawValue,
            createdAt: self.clock.nowMilliseconds)
        do {
            _ = try await self.store.createChannel(channel)
        } catch {
            // Not kept, so not counted nor deletable through Herald: give it back to Apple.
            try? await client.deleteChannel(created.channelID, bundleID: app.bundleID)
            throw error
        }
        return channel
    }

    /// The app's channels, oldest first; `?environment=` for one environment's only.
    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> ChannelList {
        let app = try context.requireApp()
        let environments = try request.uri.queryParameters["environment"].map { [try Self.environment(String($0))] } ?? APNSEnvironment.allCases
        var channels: [ChannelResponse] = []
        for environment in environments {
            channels += try await self.store.channels(appID: app.id, environment: environment).map(ChannelResponse.init)
        }
        return ChannelList(channels: channels)
    }

    @Sendable func get(_ request: Request, context: APIRequestContext) async throws -> ChannelResponse {
        ChannelResponse(try await self.existing(context))
    }

    /// Deletes at Apple, then here. When Apple answers `ChannelNotRegistered` the channel is gone
    /// there already (Apple never gives an id back): it is forgotten here too, and the answer is 204.
    /// Any other refusal keeps it, and answers with its code.
    @Sendable func delete(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let channel = try await self.existing(context)
        try await self.delete(channel, app: app)
        return Response(status: .noContent)
    }

    /// Deletes at APNs, then here (the API's and the dashboard's delete): 409 `channel_in_use`
    /// while a Live Activity within its 8 hours is joined to it (deleting the channel would leave
    /// it showing, never to be updated or ended).
    func delete(_ channel: StoredChannel, app: App) async throws {
        let now = self.clock.nowMilliseconds
        let active = try await self.store.liveActivities(appID: app.id, activeOnly: true, limit: 10_000)
        if let joined = active.first(where: { $0.channelID == channel.channelID && now < $0.startedAt + LiveActivity.maximumActiveMilliseconds }) {
            throw HeraldError(
                code: "channel_in_use",
                "the Live Activity \(joined.id) is joined to this channel: end it first (DELETE /v1/apps/\(app.id)/live-activities/\(joined.id))")
        }
        let client = try await self.clients.client(appID: app.id, environment: channel.environment)
        do {
            guard let id = APNSChannelID(rawValue: channel.channelID) else { throw Self.notFound }
            try await client.deleteChannel(id, bundleID: app.bundleID)
        } catch let error as APNSClientError where error.reason == .channelNotRegistered {
            // Already gone at Apple: forgotten below.
        } catch let error as APNSClientError {
            throw Self.heraldError(error)
        }
        _ = try await self.store.deleteChannel(appID: app.id, environment: channel.environment, channelID: channel.channelID)
    }

    /// The ids APNs holds for the app in `environment` (Apple's own list, as `herald channels list`
    /// shows it); what it refuses, with its code.
    func atAPNs(app: App, environment: APNSEnvironment, timeout: Duration) async throws -> Set<String> {
        let client = try await self.clients.client(appID: app.id, environment: environment)
        do {
            return Set(try await client.channels(bundleID: app.bundleID, timeout: timeout).map(\.rawValue))
        } catch {
            throw Self.heraldError(error)
        }
    }

    /// The channel named by the path, in either environment (ids are Apple's random ones).
    private func existing(_ context: APIRequestContext) async throws -> StoredChannel {
        let app = try context.requireApp()
        return try await Self.stored(self.store, appID: app.id, channelID: try Self.channelID(context.parameters.get("id") ?? "").rawValue)
    }

    /// The app's channel with this id, in either environment; 404 `channel_not_found`.
    static func stored(_ store: any HeraldStore, appID: String, channelID: String) async throws -> StoredChannel {
        for environment in APNSEnvironment.allCases {
            if let channel = try await store.channel(appID: appID, environment: environment, channelID: channelID) { return channel }
        }
        throw Self.notFound
    }

    static let notFound = HeraldError(code: "channel_not_found", "no such channel for this app")
    static let limitReached = HeraldError(
        code: "channel_limit_reached", "the app has \(StoredChannel.maximumPerApp) channels in this environment, Apple's limit: delete unused ones")

    /// A channel id from a path: Apple's base64, in its base64url form (`-`, `_`) or percent-encoded.
    static func channelID(_ text: String) throws(HeraldError) -> APNSChannelID {
        let decoded = (text.removingPercentEncoding ?? text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard let id = APNSChannelID(rawValue: decoded) else {
            throw HeraldError.invalid("a channel id is base64 (in a path: base64url, or percent-encoded)", code: "bad_channel_id")
        }
        return id
    }

    static func environment(_ name: String) throws(HeraldError) -> APNSEnvironment {
        guard let environment = APNSEnvironment(rawValue: name) else {
            throw HeraldError.invalid("environment must be sandbox (development) or production", code: "bad_environment")
        }
        return environment
    }

    /// Apple's broadcast and channel errors as Herald's codes (each with one status):
    /// `ChannelNotRegistered` 404 `channel_not_found`, `CannotCreateChannelConfig` 422
    /// `channel_limit_reached`, `FeatureNotEnabled` 422 `broadcast_not_enabled`, `BadChannelId`
    /// 400 `bad_channel_id`, `BadExpirationDate` 400 `bad_expiration`; 429 and 5xx, and no answer
    /// at all, 503 `apns_unavailable`; any other refusal 422 `apns_rejected`, Apple's reason in the message.
    static func heraldError(_ error: APNSClientError) -> HeraldError {
        if error.code == .invalidRequest {
            return HeraldError.invalid(error.message, code: "apns_rejected")
        }
        guard error.code == .rejected, let status = error.status else {
            if error.code == .badConfiguration { return HeraldError(code: "credentials_unusable", error.message) }
            return HeraldError(code: "apns_unavailable", "APNs did not answer (\(error.code)): try again later")
        }
        let reason = error.reason?.rawValue ?? "no reason"
        switch error.reason {
        case .channelNotRegistered?: return HeraldError(code: "channel_not_found", "APNs has no such channel (ChannelNotRegistered)")
        case .cannotCreateChannelConfig?:
            return HeraldError(code: "channel_limit_reached", "APNs refused a new channel (CannotCreateChannelConfig): delete unused ones")
        case .featureNotEnabled?:
            return HeraldError(code: "broadcast_not_enabled", "the Broadcast capability is not enabled for this app's bundle id (FeatureNotEnabled)")
        case .badChannelId?: return HeraldError(code: "bad_channel_id", "APNs refused the channel id (BadChannelId)")
        case .badExpirationDate?:
            return HeraldError(code: "bad_expiration", "APNs refused the expiration (BadExpirationDate): a no-message-stored channel takes 0 only")
        default:
            if status == 429 || status >= 500 { return HeraldError(code: "apns_unavailable", "APNs answered \(status) \(reason): try again later") }
            return HeraldError(code: "apns_rejected", "APNs answered \(status) \(reason)")
        }
    }
}

extension ChannelResponse {
    init(_ channel: StoredChannel) {
        self.init(
            id: channel.channelID, environment: channel.environment.apiName, messageStoragePolicy: channel.messageStoragePolicy,
            createdAt: channel.createdAt)
    }
}

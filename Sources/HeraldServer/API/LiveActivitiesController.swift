// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/apps/{app}/live-activities` (send and admin keys): Live Activities as a resource. A start
/// goes by push-to-start to an audience's push-to-start tokens; updates and the end go to the
/// update tokens registered with Herald's activity id, or as one broadcast on the channel it was
/// started with. Herald's id travels in the start's `attributes` (``LiveActivity/idKey``).
///
/// A register key cannot: it lives inside the app, and whoever holds it could otherwise put
/// anything on every user's Lock Screen.
struct LiveActivitiesController {
    let store: any HeraldStore
    let engine: DeliveryEngine
    let clients: ClientProvider
    let clock: any EpochClock
    var rateLimit: RateLimitGate?

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let sending = v1.group("apps/:app/live-activities").add(middleware: RateLimit(operation: .send, gate: self.rateLimit))
            .add(middleware: RequireScope(.send, store: self.store, clock: self.clock))
        sending.post(use: self.start)
        sending.patch(":id", use: self.update)
        sending.delete(":id", use: self.end)
        let reading = v1.group("apps/:app/live-activities").add(middleware: RequireScope(.send, store: self.store, clock: self.clock))
        reading.get(use: self.list)
        reading.get(":id", use: self.get)
    }

    private var notifications: NotificationsController {
        NotificationsController(store: self.store, engine: self.engine, clients: self.clients, clock: self.clock, rateLimit: nil)
    }

    /// 201 once the start notification and the activity are stored (the engine sends the start).
    @Sendable func start(_ request: Request, context: APIRequestContext) async throws -> Answer<LiveActivityResponse> {
        let app = try context.requireApp()
        let body = try await request.decode(as: StartLiveActivityRequest.self, context: context)
        return Answer(.created, try await self.start(body, app: app))
    }

    /// Starts the activity `body` describes (the API's and the dashboard's start).
    func start(_ body: StartLiveActivityRequest, app: App) async throws -> LiveActivityResponse {
        let now = self.clock.nowMilliseconds
        let audience = try NotificationRequest.audience(body.audience)
        switch audience {
        case .users, .tags, .tokens: break
        default: throw HeraldError.invalid("a Live Activity starts for users, tags or tokens (their push-to-start tokens)", code: "bad_audience")
        }
        guard let attributesType = body.attributesType else {
            throw HeraldError.invalid("attributesType (the app's ActivityAttributes type) is required", code: "missing_attributesType")
        }
        guard !attributesType.isEmpty, attributesType.utf8.count <= 256 else {
            throw HeraldError.invalid("attributesType must be a string of 1 to 256 bytes", code: "bad_attributesType")
        }
        guard let given = body.attributes else { throw HeraldError.invalid("attributes (an object) is required", code: "missing_attributes") }
        guard case .object(let members) = given else { throw HeraldError.invalid("attributes must be an object", code: "bad_attributes") }
        guard !members.contains(where: { $0.key == LiveActivity.idKey }) else {
            throw HeraldError.invalid("attributes cannot hold \(LiveActivity.idKey) (Herald puts its activity id there)", code: "bad_attributes")
        }
        let contentState = try Self.contentState(body.contentState)
        guard let alert = try Self.alert(body.alert) else {
            throw HeraldError.invalid("alert is required: the system shows it when the activity starts", code: "missing_alert")
        }
        var environment: APNSEnvironment?
        if let name = body.environment {
            guard let parsed = APNSEnvironment(name: name) else {
                throw HeraldError.invalid("environment must be sandbox (development) or production", code: "bad_environment")
            }
            environment = parsed
        }
        var channel: StoredChannel?
        switch (body.inputPushToken, body.inputPushChannel) {
        case (true?, nil):
            break
        case (nil, let text?), (false?, let text?):
            let id = try ChannelsController.channelID(text).rawValue
            for candidate in APNSEnvironment.allCases {
                if let found = try await self.store.channel(appID: app.id, environment: candidate, channelID: id) { channel = found }
            }
            guard let channel else { throw HeraldError.invalid("inputPushChannel is not a channel of this app", code: "unknown_channel") }
            guard environment == nil || environment == channel.environment else {
                throw HeraldError.invalid("environment differs from the channel's (\(channel.environment.apiName))", code: "bad_environment")
            }
            environment = channel.environment
        case (nil, nil), (false?, nil):
            throw HeraldError.invalid(
                "give inputPushToken: true (updates to the update token each device mints) or inputPushChannel (a channel id)",
                code: "missing_input_push")
        case (true?, _?):
            throw HeraldError.invalid("inputPushToken and inputPushChannel exclude each other", code: "bad_input_push")
        }
        let id = UUIDText.random()
        var aps: [(String, JSONValue)] = [
            ("timestamp", .int(now / 1000)), ("event", .string("start")), ("content-state", contentState),
            ("attributes-type", .string(attributesType)),
            ("attributes", .object(members.map { ($0.key, JSONValue($0.value)) } + [(LiveActivity.idKey, .string(id))])), ("alert", alert),
        ]
        aps += try Self.extras(staleDate: body.staleDate, relevanceScore: body.relevanceScore, now: now)
        if let channel {
            aps.append(("input-push-channel", .string(channel.channelID)))
        } else {
            aps.append(("input-push-token", .int(1)))
        }
        let payload = try NotificationRequest.encode(.object([("aps", .object(aps))]), pushType: .liveactivity)
        var spec = NotificationSpec(
            audience: audience, kinds: [.pushToStart], environment: environment, pushType: .liveactivity, priority: .immediate, payload: payload)
        spec.ignoresQuietHours = true
        spec.attributesType = attributesType
        let starters = try await self.store.audienceKinds(appID: app.id, targeting: spec.targeting)[.pushToStart] ?? 0
        guard starters > 0 else {
            throw HeraldError.unprocessable("the audience has no active push-to-start token", code: "no_push_to_start_tokens")
        }
        // The activity is kept first, then its start: once the start exists the engine may send
        // it at once (or another process may), and an activity started is one Herald can end.
        let startID = UUIDText.random()
        if let channel {
            // An activity past its 8 hours still holds the channel until it is brought up to date.
            for active in try await self.store.liveActivities(appID: app.id, activeOnly: true, limit: 500)
            where active.channelID == channel.channelID {
                _ = try await self.refreshed(active, app: app, now: now)
            }
        }
        let activity = StoredLiveActivity(
            appID: app.id, id: id, attributesType: attributesType,
            audienceJSON: Self.storedAudience(audience), channelID: channel?.channelID,
            environment: channel?.environment, contentState: contentState.jsonString, startNotificationID: startID, startedAt: now)
        guard try await self.store.createLiveActivity(activity) else {
            guard channel == nil else {
                throw HeraldError(
                    code: "channel_in_use", "the channel carries another active Live Activity (a broadcast names no activity): end it first")
            }
            throw HeraldError(code: "internal_error", "activity id taken")
        }
        do {
            _ = try await self.store.createNotification(appID: app.id, id: startID, bundleID: app.bundleID, spec, now: now)
        } catch {
            // Never started, so nothing to update nor end: not kept either.
            _ = try? await self.store.deleteLiveActivity(appID: app.id, id: id)
            throw error
        }
        self.engine.ring()
        return try await self.response(activity, app: app)
    }

    /// An `update` event: to the activity's update tokens (of its users, for an activity
    /// started for users), or as one broadcast on its channel. 409 `activity_ended` once ended.
    @Sendable func update(_ request: Request, context: APIRequestContext) async throws -> LiveActivityResponse {
        let app = try context.requireApp()
        let body = try await request.decode(as: UpdateLiveActivityRequest.self, context: context)
        return try await self.update(id: context.parameters.get("id") ?? "", body, app: app)
    }

    /// Sends an update to the activity `id` (the API's and the dashboard's update).
    func update(id: String, _ body: UpdateLiveActivityRequest, app: App) async throws -> LiveActivityResponse {
        let now = self.clock.nowMilliseconds
        let contentState = try Self.contentState(body.contentState)
        var priority = Priority.throttled
        if let value = body.priority {
            guard value == 5 || value == 10, let parsed = Priority(rawValue: value) else {
                throw HeraldError.invalid("priority is 5 (the default) or 10 (counts against Apple's hourly budget)", code: "bad_priority")
            }
            priority = parsed
        }
        var aps: [(String, JSONValue)] = [("timestamp", .int(now / 1000)), ("event", .string("update")), ("content-state", contentState)]
        aps += try Self.extras(staleDate: body.staleDate, relevanceScore: body.relevanceScore, now: now)
        if let alert = try Self.alert(body.alert) { aps.append(("alert", alert)) }
        // Claimed before it is sent (compare-and-swap on the count of updates): an update that
        // loses to an end sends nothing; one that loses to another update tries again.
        let state = contentState.jsonString
        var activity = try await self.current(id: id, app: app, now: now)
        var claimed = false
        for _ in 0..<Self.updateAttempts {
            guard activity.isActive else { throw Self.ended(activity) }
            claimed = try await self.store.claimLiveActivityUpdate(
                appID: app.id, id: activity.id, expectedUpdates: activity.updates, contentState: state, now: now)
            if claimed { break }
            activity = try await self.stored(app: app, id: activity.id)
        }
        guard activity.isActive else { throw Self.ended(activity) }
        guard claimed else {
            throw HeraldError(code: "activity_busy", "other updates to this Live Activity won: send it again")
        }
        return try await self.sendClaimed(aps, priority: priority, to: activity, app: app, now: now) {
            try? await self.store.undoLiveActivityUpdate(
                appID: app.id, id: activity.id, claimedUpdates: activity.updates + 1, contentState: state, previousContentState: activity.contentState
            )
        }
    }

    /// An `end` event with the newest content state (`?dismissalDate=` UNIX seconds: when the
    /// system removes it; in the past, at once), then the activity is ended. 409 once ended.
    @Sendable func end(_ request: Request, context: APIRequestContext) async throws -> LiveActivityResponse {
        let app = try context.requireApp()
        let dismissalDate = request.uri.queryParameters["dismissalDate"].map { String($0) }
        return try await self.end(id: context.parameters.get("id") ?? "", dismissalDate: dismissalDate, app: app)
    }

    /// Ends the activity `id`, `dismissalDate` UNIX seconds as text (the API's and the dashboard's end).
    func end(id: String, dismissalDate: String?, app: App) async throws -> LiveActivityResponse {
        let now = self.clock.nowMilliseconds
        var dismissal: Int64?
        if let text = dismissalDate {
            guard let value = Int64(text), value >= 0, value <= now / 1000 + Self.horizonSeconds else {
                throw HeraldError.invalid(
                    "dismissalDate is UNIX seconds, at most 30 days ahead (in the past: removed at once)", code: "bad_dismissalDate")
            }
            dismissal = value
        }
        let activity = try await self.current(id: id, app: app, now: now)
        guard activity.isActive else { throw Self.ended(activity) }
        // Claimed before it is sent: of concurrent ends one sends, the others answer 409; the end
        // carries the content state of the last update claimed.
        guard let claimed = try await self.store.claimLiveActivityEnd(appID: app.id, id: activity.id, at: now) else {
            throw Self.ended(try await self.stored(app: app, id: activity.id))
        }
        let state = (try? JSONValue.parse(claimed)) ?? .object([])
        var aps: [(String, JSONValue)] = [("timestamp", .int(now / 1000)), ("event", .string("end")), ("content-state", state)]
        if let dismissal { aps.append(("dismissal-date", .int(dismissal))) }
        return try await self.sendClaimed(aps, priority: .immediate, to: activity, app: app, now: now) {
            try? await self.store.undoLiveActivityEnd(appID: app.id, id: activity.id, at: now)
        }
    }

    /// The app's activities, newest first, a page at a time (`cursor`, each page's `next`);
    /// `?state=active` for the active ones only.
    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> LiveActivityList {
        let app = try context.requireApp()
        let limit = try Validate.limit(request, fallback: 100, maximum: 500)
        var activeOnly = false
        if let state = request.uri.queryParameters["state"] {
            guard state == "active" || state == "all" else { throw HeraldError.invalid("state is active or all", code: "bad_state") }
            activeOnly = state == "active"
        }
        let stored = try await self.store.liveActivities(
            appID: app.id, activeOnly: activeOnly, limit: limit + 1, before: try PageCursor.liveActivity(request))
        let page = PageCursor.page(stored, limit: limit) { PageCursor.next(LiveActivityPosition(startedAt: $0.startedAt, id: $0.id)) }
        return LiveActivityList(liveActivities: try await self.list(app: app, stored: page.items, activeOnly: activeOnly), next: page.next)
    }

    /// The app's activities, newest first, each brought up to date (the API's and the dashboard's list).
    func list(app: App, activeOnly: Bool, limit: Int) async throws -> [LiveActivityResponse] {
        try await self.list(
            app: app, stored: try await self.store.liveActivities(appID: app.id, activeOnly: activeOnly, limit: limit), activeOnly: activeOnly)
    }

    /// `stored`, each brought up to date; with `activeOnly`, those still active.
    private func list(app: App, stored: [StoredLiveActivity], activeOnly: Bool) async throws -> [LiveActivityResponse] {
        let now = self.clock.nowMilliseconds
        var answers: [LiveActivityResponse] = []
        for activity in stored {
            let current = try await self.refreshed(activity, app: app, now: now)
            if activeOnly, !current.isActive { continue }
            answers.append(try await self.response(current, app: app))
        }
        return answers
    }

    @Sendable func get(_ request: Request, context: APIRequestContext) async throws -> LiveActivityResponse {
        let app = try context.requireApp()
        return try await self.read(id: context.parameters.get("id") ?? "", app: app)
    }

    /// The activity `id`, brought up to date; 404 `activity_not_found`.
    func read(id: String, app: App) async throws -> LiveActivityResponse {
        try await self.readWithState(id: id, app: app).activity
    }

    /// The activity `id`, brought up to date, and its newest content state (JSON text) for the
    /// dashboard's update form; 404 `activity_not_found`.
    func readWithState(id: String, app: App) async throws -> (activity: LiveActivityResponse, contentState: String) {
        let activity = try await self.current(id: id, app: app, now: self.clock.nowMilliseconds)
        return (try await self.response(activity, app: app), activity.contentState)
    }

    // MARK: sending

    /// Sends an update or end already claimed in the store; `undo` gives the claim back if the
    /// send fails. The activity as it is after, with the notification that carried it noted.
    private func sendClaimed(
        _ aps: [(String, JSONValue)], priority: Priority, to activity: StoredLiveActivity, app: App, now: Int64,
        undo: () async -> Void
    ) async throws -> LiveActivityResponse {
        let notificationID: String?
        do {
            notificationID = try await self.send(aps, priority: priority, to: activity, app: app, now: now)
        } catch {
            await undo()
            throw error
        }
        if let notificationID {
            try await self.store.setLiveActivityNotification(appID: app.id, id: activity.id, notificationID: notificationID, now: now)
        }
        return try await self.response(try await self.stored(app: app, id: activity.id), app: app)
    }

    /// Sends one Live Activity event to the activity; the notification it is recorded as, nil
    /// when no update token receives it (none registered yet, or none of its users').
    /// `tokens`: the update tokens to reach, when not the activity's receivers (``receivers(_:app:)``).
    private func send(
        _ aps: [(String, JSONValue)], priority: Priority, to activity: StoredLiveActivity, app: App, now: Int64, tokens given: [String]? = nil
    ) async throws
        -> String?
    {
        let payload = try NotificationRequest.encode(.object([("aps", .object(aps))]), pushType: .liveactivity)
        if let channelID = activity.channelID {
            // No expiration given: the channel's (kept 8 hours where it keeps the most recent message, 0 where it keeps none).
            let spec = NotificationSpec(audience: .channel(channelID), pushType: .liveactivity, priority: priority, payload: payload)
            return try await self.notifications.broadcast(spec, channelID: channelID, app: app).body.id
        }
        let tokens: [String]
        if let given { tokens = given } else { tokens = try await self.receivers(activity, app: app) }
        guard !tokens.isEmpty else { return nil }
        var spec = NotificationSpec(audience: .tokens(tokens), kinds: [.liveActivity], pushType: .liveactivity, priority: priority, payload: payload)
        spec.ignoresQuietHours = true
        let created = try await self.store.createNotification(appID: app.id, id: UUIDText.random(), bundleID: app.bundleID, spec, now: now)
        self.engine.ring()
        return created.id
    }

    /// The update tokens that receive the activity's updates: those registered with its id and,
    /// for an activity started for users, held by one of them (a token moved to another user, or
    /// to none at a logout, no longer receives).
    private func receivers(_ activity: StoredLiveActivity, app: App) async throws -> [String] {
        let tokens = try await self.store.activityTokens(appID: app.id, activityID: activity.id)
        guard let users = activity.users.map({ Set($0) }) else { return tokens.map(\.token) }
        return tokens.filter { token in token.userID.map { users.contains($0) } ?? false }.map(\.token)
    }

    // MARK: state

    /// The activity `id`, brought up to date (``refreshed(_:app:now:)``); 404 `activity_not_found`.
    private func current(id: String, app: App, now: Int64) async throws -> StoredLiveActivity {
        try await self.refreshed(try await self.stored(app: app, id: id), app: app, now: now)
    }

    private func stored(app: App, id: String) async throws -> StoredLiveActivity {
        guard id.utf8.count <= 64, let activity = try await self.store.liveActivity(appID: app.id, id: id) else {
            throw HeraldError(code: "activity_not_found", "no such Live Activity for this app")
        }
        return activity
    }

    /// Ends, as of now, an active activity the system has ended already or that its users no
    /// longer hold: 8 hours after its start (``LiveActivity/maximumActiveMilliseconds``,
    /// reason `expired`); started for users, when those users hold none of it any longer
    /// (reason `user_changed`): no update token of theirs while some are registered with its
    /// id, or, for a channel's activity, no push-to-start token of theirs left. An expired one
    /// is sent nothing (the system ended it); one whose users changed is sent an end that removes
    /// it at once, to every update token registered with its id (or on its channel), so a phone
    /// logged out does not go on showing it.
    private func refreshed(_ activity: StoredLiveActivity, app: App, now: Int64) async throws -> StoredLiveActivity {
        guard activity.isActive else { return activity }
        var ending: (LiveActivity.EndReason, Int64)?
        let deadline = activity.startedAt + LiveActivity.maximumActiveMilliseconds
        if now >= deadline {
            ending = (.expired, deadline)
        } else if let users = activity.users {
            if activity.channelID != nil {
                let targeting = Targeting(
                    audience: .users(users), kinds: [.pushToStart], environment: activity.environment, pushType: .liveactivity,
                    attributesType: activity.attributesType)
                if (try await self.store.audienceKinds(appID: app.id, targeting: targeting)[.pushToStart] ?? 0) == 0 { ending = (.userChanged, now) }
            } else {
                let tokens = try await self.store.activityTokens(appID: app.id, activityID: activity.id)
                if !tokens.isEmpty, !tokens.contains(where: { token in token.userID.map { users.contains($0) } ?? false }) {
                    ending = (.userChanged, now)
                }
            }
        }
        guard let ending else { return activity }
        if try await self.store.endLiveActivity(appID: app.id, id: activity.id, reason: ending.0, at: ending.1), ending.0 == .userChanged,
            app.deletion == nil
        {
            // Best effort, once (the end is recorded first, so only one reader sends it): a read
            // must not fail because the end could not be sent.
            _ = try? await self.sendUserChangedEnd(activity, app: app, now: now)
        }
        return try await self.stored(app: app, id: activity.id)
    }

    /// The end of an activity whose users no longer hold it, dismissed at once: to every update
    /// token registered with its id, whoever holds it now, or on its channel.
    private func sendUserChangedEnd(_ activity: StoredLiveActivity, app: App, now: Int64) async throws {
        let state = (try? JSONValue.parse(activity.contentState)) ?? .object([])
        let aps: [(String, JSONValue)] = [
            ("timestamp", .int(now / 1000)), ("event", .string("end")), ("content-state", state), ("dismissal-date", .int(now / 1000)),
        ]
        // Every update token registered with its id, whoever holds it now (not only its users').
        let tokens = activity.channelID == nil ? try await self.store.activityTokens(appID: app.id, activityID: activity.id).map(\.token) : nil
        if let notificationID = try await self.send(aps, priority: .immediate, to: activity, app: app, now: now, tokens: tokens) {
            try await self.store.setLiveActivityNotification(appID: app.id, id: activity.id, notificationID: notificationID, now: now)
        }
    }

    private func response(_ activity: StoredLiveActivity, app: App) async throws -> LiveActivityResponse {
        let tokens = activity.isActive && activity.channelID == nil ? try await self.receivers(activity, app: app).count : 0
        return LiveActivityResponse(
            id: activity.id, state: activity.isActive ? "active" : "ended", endReason: activity.endReason?.rawValue,
            attributesType: activity.attributesType, channel: activity.channelID, environment: activity.environment?.apiName, tokens: tokens,
            updates: activity.updates, startNotificationId: activity.startNotificationID, lastNotificationId: activity.lastNotificationID,
            startedAt: activity.startedAt, updatedAt: activity.updatedAt, endedAt: activity.endedAt)
    }

    // MARK: checks

    /// How often an update tries to claim its turn while other updates win.
    static let updateAttempts = 3

    /// How far ahead a stale or dismissal date may be: 30 days (s).
    static let horizonSeconds: Int64 = 30 * 86_400

    /// The audience as the activity keeps it: a list of users as written (it decides whose
    /// update tokens the activity reaches, and a user's erasure finds it); a list of tokens only
    /// as its length, so that no push-to-start token stays in a row no erasure reads.
    static func storedAudience(_ audience: Audience) -> String {
        var users = false
        if case .users = audience { users = true }
        return Targeting(audience: audience).jsonString(listsAsCounts: !users)
    }

    static func ended(_ activity: StoredLiveActivity) -> HeraldError {
        HeraldError(code: "activity_ended", "the Live Activity has ended (\(activity.endReason?.rawValue ?? "ended")): nothing more is sent to it")
    }

    static func contentState(_ value: JSON?) throws -> JSONValue {
        guard let value else { throw HeraldError.invalid("contentState (an object) is required", code: "missing_contentState") }
        guard case .object = value else { throw HeraldError.invalid("contentState must be an object", code: "bad_contentState") }
        return JSONValue(value)
    }

    /// A Live Activity alert: a string, or an object (`title`, `body`, `sound`; title and body
    /// may be localized objects).
    static func alert(_ value: JSON?) throws -> JSONValue? {
        switch value {
        case nil: return nil
        case .string(let text)? where !text.isEmpty: return .string(text)
        case .object(let members)? where Self.isAlert(members): return JSONValue(.object(members))
        default:
            throw HeraldError.invalid(
                "alert is a string, or an object of title and/or body (strings or localization objects) and an optional sound (a string)",
                code: "bad_alert")
        }
    }

    /// A Live Activity's alert object as Apple reads it: `title` and `body` (at least one), each
    /// a text or a localization object (`loc-key`, `loc-args`), and a `sound` name.
    static func isAlert(_ members: [JSON.Member]) -> Bool {
        guard members.contains(where: { $0.key == "title" || $0.key == "body" }) else { return false }
        return members.allSatisfy { member in
            switch (member.key, member.value) {
            case ("title", .string(let text)), ("body", .string(let text)), ("sound", .string(let text)): !text.isEmpty
            case ("title", .object), ("body", .object): true
            default: false
            }
        }
    }

    static func extras(staleDate: Int64?, relevanceScore: Double?, now: Int64) throws -> [(String, JSONValue)] {
        var members: [(String, JSONValue)] = []
        if let staleDate {
            guard staleDate > now / 1000, staleDate <= now / 1000 + Self.horizonSeconds else {
                throw HeraldError.invalid("staleDate is UNIX seconds in the next 30 days", code: "bad_staleDate")
            }
            members.append(("stale-date", .int(staleDate)))
        }
        if let relevanceScore {
            guard relevanceScore.isFinite, relevanceScore >= 0 else {
                throw HeraldError.invalid("relevanceScore is a number ≥ 0 (higher ranks first)", code: "bad_relevanceScore")
            }
            members.append(("relevance-score", .double(relevanceScore)))
        }
        return members
    }
}

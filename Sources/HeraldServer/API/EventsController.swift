// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HTTPTypes
import HeraldCore
import Hummingbird
import NIOCore
import Synchronization

/// `GET /v1/apps/{app}/events` (send keys): the app's delivery events as server-sent events.
/// The stream lasts while its key would still be let in (``KeyAccess``): it is asked again every
/// ``EventStream/recheckInterval`` and at the key's expiry, and a key revoked, expired or no
/// longer allowed ends the stream with a `closed` event.
struct EventsController {
    let store: any HeraldStore
    let events: DeliveryEvents
    let clock: any EpochClock

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        v1.group("apps/:app/events").add(middleware: RequireScope(.send, store: self.store, clock: self.clock)).get(use: self.stream)
    }

    @Sendable func stream(_ request: Request, context: APIRequestContext) async throws -> Response {
        let appID = try context.requireApp().id
        let keyID = try context.requireKey().id
        let types = try EventTypes.parse(query: request.uri.queryParameters["types"].map(String.init))
        let hub = self.events
        let store = self.store
        let clock = self.clock
        let door = KeyAccess.Door.api(scope: .send, appID: appID)
        return EventStream.response { writer in
            // Subscribed here, where the body is written: a client gone before this holds nothing.
            let (subscription, items, feed) = hub.subscribe(appID: appID)
            defer { hub.unsubscribe(subscription) }
            let watch = EventStream.Watch(clock: clock) {
                // The key as it is now: revoked keys are not found.
                guard let key = try await store.apiKey(id: keyID) else { return .ended("the API key was revoked") }
                do {
                    try KeyAccess.authorize(key, at: door, now: clock.nowMilliseconds)
                } catch let refusal as HeraldError {
                    return .ended(refusal.message)
                }
                return .until(key.expiresAt)
            }
            try await EventStream.write(&writer, preamble: ": herald delivery events\n", items: items, feed: feed, watch: watch) { event in
                guard types.contains(event.type) else { return nil }
                return "id: \(event.id)\nevent: \(event.type.rawValue)\ndata: \(String(decoding: event.json.serialized(), as: UTF8.self))\n\n"
            }
        }
    }
}

/// `text/event-stream` answers, for the API's event stream and the dashboard's emulated phone.
enum EventStream {
    /// A `text/event-stream` answer whose body `write` produces.
    static func response(_ write: @escaping @Sendable (inout any ResponseBodyWriter) async throws -> Void) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                try await write(&writer)
                try await writer.finish(nil)
            })
    }

    /// How often a stream asks again whether what opened it (a key, a dashboard session) still
    /// lets it in: the bound on how long a stream outlives a revoked key in this process (another
    /// process sharing a PostgreSQL database sees the revocation ``LookupCache/defaultLifetime`` later).
    static let recheckInterval: Duration = .seconds(5)

    /// Asks whether a stream may go on: every ``EventStream/recheckInterval`` and at the expiry
    /// the last answer named.
    struct Watch: Sendable {
        enum Verdict: Sendable {
            /// Go on; ask again at this time (ms) at the latest, or after the interval.
            case until(Int64?)
            /// End the stream, saying why.
            case ended(String)
        }

        let clock: any EpochClock
        let check: @Sendable () async throws -> Verdict

        /// Waits until the stream must end: why.
        func run() async throws -> String {
            while true {
                let verdict: Verdict
                do {
                    verdict = try await self.check()
                } catch {
                    // The database did not answer: ask again at the next round, and no longer.
                    verdict = .until(nil)
                }
                let expiry: Int64?
                switch verdict {
                case .ended(let why): return why
                case .until(let at): expiry = at
                }
                var wait = EventStream.recheckInterval
                if let expiry { wait = min(wait, .milliseconds(max(0, expiry - self.clock.nowMilliseconds))) }
                try await Task.sleep(for: wait)
            }
        }
    }

    /// Writes `items` as server-sent events (`render` gives each one's text, nil to skip it),
    /// with a comment every 15 s to keep proxies from closing an idle stream, until `items` ends,
    /// the client goes, or `watch` says the stream must end (then a `closed` event says why).
    /// `feed` is `items`' continuation (the keep-alive ticks go through it).
    static func write(
        _ writer: inout any ResponseBodyWriter, preamble: String, items: AsyncStream<StreamItem>, feed: AsyncStream<StreamItem>.Continuation,
        watch: Watch?, render: @Sendable (DeliveryEvent) -> String?
    ) async throws {
        try await writer.write(ByteBuffer(string: preamble + "retry: 2000\n\n"))
        // Why the watch ended the stream, also kept here: a `.closed` item can be dropped from a
        // full buffer (a slow reader of a busy app), and the stream must end all the same.
        let ended = Ending()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(15))
                    feed.yield(.keepAlive)
                }
            }
            if let watch {
                group.addTask {
                    let why = try await watch.run()
                    ended.why.withLock { $0 = why }
                    feed.yield(.closed(why))
                }
            }
            streaming: for await item in items {
                var item = item
                if let why = ended.why.withLock({ $0 }) { item = .closed(why) }
                switch item {
                case .event(let event):
                    guard let text = render(event) else { continue }
                    try await writer.write(ByteBuffer(string: text))
                case .keepAlive:
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                case .closed(let why):
                    let data = JSONValue.object([("reason", .string(why))]).serialized()
                    try await writer.write(ByteBuffer(string: "event: closed\ndata: \(String(decoding: data, as: UTF8.self))\n\n"))
                    break streaming
                }
            }
            group.cancelAll()
        }
    }
}

/// Why a stream's watch ended it, once it has.
private final class Ending: Sendable {
    let why = Mutex<String?>(nil)
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HTTPTypes
import HeraldCore
import Hummingbird
import NIOCore

/// `GET /v1/apps/{app}/events` (send keys): the app's delivery events as server-sent events.
struct EventsController {
    let store: any HeraldStore
    let events: DeliveryEvents

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        v1.group("apps/:app/events").add(middleware: RequireScope(.send, store: self.store)).get(use: self.stream)
    }

    @Sendable func stream(_ request: Request, context: APIRequestContext) async throws -> Response {
        let appID = try context.requireApp().id
        let types = try EventTypes.parse(query: request.uri.queryParameters["types"].map(String.init))
        let hub = self.events
        return EventStream.response { writer in
            // Subscribed here, where the body is written: a client gone before this holds nothing.
            let (subscription, items, feed) = hub.subscribe(appID: appID)
            defer { hub.unsubscribe(subscription) }
            try await EventStream.write(&writer, preamble: ": herald delivery events\n", items: items, feed: feed) { event in
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

    /// Writes `items` as server-sent events (`render` gives each one's text, nil to skip it),
    /// with a comment every 15 s to keep proxies from closing an idle stream, until `items` ends
    /// or the client goes. `feed` is `items`' continuation (the keep-alive ticks go through it).
    static func write(
        _ writer: inout any ResponseBodyWriter, preamble: String, items: AsyncStream<StreamItem>, feed: AsyncStream<StreamItem>.Continuation,
        render: @Sendable (DeliveryEvent) -> String?
    ) async throws {
        try await writer.write(ByteBuffer(string: preamble + "retry: 2000\n\n"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(15))
                    feed.yield(.keepAlive)
                }
            }
            for await item in items {
                switch item {
                case .event(let event):
                    guard let text = render(event) else { continue }
                    try await writer.write(ByteBuffer(string: text))
                case .keepAlive:
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                }
            }
            group.cancelAll()
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Hummingbird

/// The `cursor` of the list endpoints, opaque to clients: base64url of where a page ended in one
/// list, tagged with that list, so that a cursor from one list (or one made up) is refused with
/// 400 `bad_cursor` instead of being read as another list's position. A page's `next` is the
/// cursor of its last item when more may follow, and null at the end of the list.
enum PageCursor {
    enum List: String {
        case notifications = "n"
        case devices = "d"
        case deliveries = "x"
        case webhookMessages = "w"
        case liveActivities = "l"
    }

    static func encode(_ list: List, _ fields: [String]) -> String {
        Base64URL.encode(Array(([list.rawValue] + fields).joined(separator: ",").utf8))
    }

    /// The `cursor` query parameter's `count` fields, or nil when there is none.
    static func fields(_ request: Request, _ list: List, count: Int) throws -> [Substring]? {
        guard let text = request.uri.queryParameters["cursor"] else { return nil }
        guard text.utf8.count <= 512, let bytes = Base64URL.decode(text), let decoded = String(validating: bytes, as: UTF8.self) else {
            throw Self.bad
        }
        let fields = decoded.split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count == count + 1, fields[0] == list.rawValue else { throw Self.bad }
        return Array(fields.dropFirst())
    }

    static var bad: HeraldError {
        HeraldError.invalid("cursor is not one this list gave: pass a page's next as it is", code: "bad_cursor")
    }

    /// A position that is a row id (devices, deliveries, webhook messages).
    static func id(_ request: Request, _ list: List) throws -> Int64? {
        guard let fields = try Self.fields(request, list, count: 1) else { return nil }
        guard let id = Int64(fields[0]), id > 0 else { throw Self.bad }
        return id
    }

    static func next(_ list: List, id: Int64) -> String { Self.encode(list, [String(id)]) }

    /// A position in an app's notifications: the last one's creation time and id.
    static func notification(_ request: Request) throws -> NotificationPosition? {
        guard let fields = try Self.fields(request, .notifications, count: 2) else { return nil }
        guard let createdAt = Int64(fields[0]), createdAt >= 0, !fields[1].isEmpty, fields[1].utf8.count <= 128 else { throw Self.bad }
        return NotificationPosition(createdAt: createdAt, id: String(fields[1]))
    }

    /// A position in an app's Live Activities: the last one's start and id.
    static func liveActivity(_ request: Request) throws -> LiveActivityPosition? {
        guard let fields = try Self.fields(request, .liveActivities, count: 2) else { return nil }
        guard let startedAt = Int64(fields[0]), startedAt >= 0, !fields[1].isEmpty, fields[1].utf8.count <= 64 else { throw Self.bad }
        return LiveActivityPosition(startedAt: startedAt, id: String(fields[1]))
    }

    static func next(_ position: LiveActivityPosition) -> String {
        Self.encode(.liveActivities, [String(position.startedAt), position.id])
    }

    static func next(_ position: NotificationPosition) -> String {
        Self.encode(.notifications, [String(position.createdAt), position.id])
    }

    /// One page of `items` fetched with a limit of `limit + 1`: the first `limit`, and the next
    /// page's cursor (of the last of them) when there was one more.
    static func page<Item>(_ items: [Item], limit: Int, cursor: (Item) -> String) -> (items: [Item], next: String?) {
        guard items.count > limit else { return (items, nil) }
        let kept = Array(items.prefix(limit))
        return (kept, kept.last.map(cursor))
    }
}

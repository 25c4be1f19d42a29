// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Logging
import Synchronization

/// What a live stream carries: an event, or a tick to keep an idle connection open.
enum StreamItem: Sendable {
    case event(DeliveryEvent)
    case keepAlive
    /// What opened the stream no longer lets it in: the stream ends, saying why.
    case closed(String)
}

/// One delivery event, as streamed (SSE) and POSTed to webhooks.
struct DeliveryEvent: Sendable {
    var id: String
    var type: DeliveryEventType
    var appID: String
    var json: JSONValue
}

/// Where the delivery engine's outcomes go besides the store: live SSE subscribers, the
/// webhook outbox of apps that have webhooks, and the per-minute activity the dashboard charts.
///
/// Subscribers see what this process delivers (each process of a shared database streams its
/// own share); webhooks are durable and see everything.
final class DeliveryEvents: Sendable {
    /// The last hour, one bucket per minute, over every app (this process).
    struct Minute: Sendable, Hashable {
        var minute: Int64
        var sent = 0
        var failed = 0
        var retried = 0
        var reasons: [String: Int] = [:]
    }

    private struct State {
        var subscribers: [String: [Int: AsyncStream<StreamItem>.Continuation]] = [:]
        var nextSubscriber = 0
        var minutes: [Minute] = []
        var webhooks: [String: [Webhook]] = [:]
        var webhooksLoadedAt: Int64?
        /// Bumped by every change made here, so a load that started before it is not kept.
        var webhooksGeneration = 0
        /// Shutdown began: new streams end at once.
        var closed = false
    }

    private let state = Mutex(State())
    private let store: any HeraldStore
    let clock: any EpochClock
    private let logger: Logger
    /// How long an undelivered webhook message is kept.
    let webhookExpiry: Int64
    /// Rung when webhook messages were queued, so the dispatcher looks at once.
    let webhookDoorbell: @Sendable () -> Void

    init(store: any HeraldStore, clock: any EpochClock, webhookExpiry: Int64, logger: Logger, webhookDoorbell: @escaping @Sendable () -> Void) {
        self.store = store
        self.clock = clock
        self.webhookExpiry = webhookExpiry
        self.logger = logger
        self.webhookDoorbell = webhookDoorbell
    }

    // MARK: subscribers (SSE)

    /// A live stream of `appID`'s events; the newest 10,000 are buffered for a slow reader.
    func subscribe(appID: String) -> (id: Int, items: AsyncStream<StreamItem>, feed: AsyncStream<StreamItem>.Continuation) {
        let (stream, continuation) = AsyncStream<StreamItem>.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        let id = self.state.withLock { state -> Int? in
            guard !state.closed else { return nil }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[appID, default: [:]][id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return (-1, stream, continuation)
        }
        return (id, stream, continuation)
    }

    func unsubscribe(_ id: Int) {
        let removed = self.state.withLock { state -> AsyncStream<StreamItem>.Continuation? in
            for app in state.subscribers.keys {
                if let continuation = state.subscribers[app]?.removeValue(forKey: id) { return continuation }
            }
            return nil
        }
        removed?.finish()
    }

    /// Ends every stream (shutdown).
    func finishAll() {
        let all = self.state.withLock { state in
            state.closed = true
            defer { state.subscribers = [:] }
            return state.subscribers.values.flatMap(\.values)
        }
        for continuation in all { continuation.finish() }
    }

    // MARK: webhooks

    /// Forget the cached webhooks: one was added or removed through this process.
    func webhooksChanged() {
        self.state.withLock { state in
            state.webhooksLoadedAt = nil
            state.webhooksGeneration += 1
        }
    }

    /// The apps' webhooks, reloaded at most every 5 s (other processes may add some).
    func webhooks(now: Int64) async -> [String: [Webhook]] {
        let (cached, generation) = self.state.withLock { state in
            (state.webhooksLoadedAt.map { now - $0 < 5000 } == true ? state.webhooks : nil, state.webhooksGeneration)
        }
        if let cached { return cached }
        do {
            let all = Dictionary(grouping: try await self.store.allWebhooks(), by: \.appID)
            self.state.withLock { state in
                // A change made while this loaded: keep the answer for now, load again next time.
                guard state.webhooksGeneration == generation else { return }
                state.webhooks = all
                state.webhooksLoadedAt = now
            }
            return all
        } catch {
            self.logger.warning("cannot load webhooks", metadata: ["error": "\(error)"])
            return self.state.withLock { $0.webhooks }
        }
    }

    // MARK: the engine's outcomes

    /// Called by the engine once a batch is recorded; only what the store applied is told
    /// (a result fenced out by a newer claim is that claim's to tell).
    func recorded(_ batch: [ClaimedDelivery], _ results: [DeliveryResult], _ recorded: RecordedOutcomes) async {
        let now = self.clock.nowMilliseconds
        var minute = Minute(minute: now / 60_000)
        for result in results {
            switch result.outcome {
            case .sent: minute.sent += 1
            case .retry(_, let reason, _):
                minute.retried += 1
                minute.reasons[reason, default: 0] += 1
            case .failed(_, let reason, _, _):
                minute.failed += 1
                minute.reasons[reason, default: 0] += 1
            }
        }
        self.add(minute)

        let apps = Set(batch.map(\.appID))
        let listening = self.state.withLock { state in apps.filter { !(state.subscribers[$0]?.isEmpty ?? true) } }
        let hooks = await self.webhooks(now: now)
        let interested = apps.filter { listening.contains($0) || hooks[$0]?.isEmpty == false }
        guard !interested.isEmpty else { return }

        let deliveries = Dictionary(batch.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var events: [DeliveryEvent] = []
        for result in results where recorded.applied.contains(result.deliveryID) {
            guard let delivery = deliveries[result.deliveryID], interested.contains(delivery.appID) else { continue }
            switch result.outcome {
            case .sent(let apnsID):
                events.append(Self.event(.sent, delivery, result, now: now, extra: [("apnsId", apnsID.map(JSONValue.string) ?? .null)]))
            case .retry:
                continue
            case .failed(let status, let reason, let invalidate, _):
                let extra: [(String, JSONValue)] = [("status", status.map { .int(Int64($0)) } ?? .null), ("reason", .string(reason))]
                events.append(Self.event(.failed, delivery, result, now: now, extra: extra))
                // The registry decided (a device registered again after APNs's timestamp stays).
                if invalidate, recorded.invalidated.contains(result.deliveryID) {
                    events.append(Self.event(.invalidated, delivery, result, now: now, extra: extra))
                }
            }
        }
        guard !events.isEmpty else { return }
        self.publish(events)
        await self.enqueueWebhooks(events, hooks: hooks, now: now)
    }

    func publish(_ events: [DeliveryEvent]) {
        self.state.withLock { state in
            for event in events {
                guard let subscribers = state.subscribers[event.appID] else { continue }
                for continuation in subscribers.values { continuation.yield(.event(event)) }
            }
        }
    }

    /// One outbox message per webhook per 500 events of the batch, in one transaction.
    func enqueueWebhooks(_ events: [DeliveryEvent], hooks: [String: [Webhook]], now: Int64) async {
        var messages: [WebhookMessage] = []
        for (appID, appEvents) in Dictionary(grouping: events, by: \.appID) {
            for hook in hooks[appID] ?? [] {
                let wanted = appEvents.filter { hook.types.contains($0.type) }
                for start in stride(from: 0, to: wanted.count, by: 500) {
                    let slice = wanted[start..<min(start + 500, wanted.count)]
                    let body = JSONValue.object([("webhookId", .string(hook.id)), ("events", .array(slice.map(\.json)))]).serialized()
                    messages.append(WebhookMessage(webhookID: hook.id, body: body, events: slice.count))
                }
            }
        }
        guard !messages.isEmpty else { return }
        do {
            try await self.store.enqueueWebhookMessages(messages, now: now, expiresAt: now + self.webhookExpiry)
            self.webhookDoorbell()
        } catch {
            self.logger.error("cannot queue webhook events", metadata: ["error": "\(error)", "herald.events": "\(events.count)"])
        }
    }

    static func event(
        _ type: DeliveryEventType, _ delivery: ClaimedDelivery, _ result: DeliveryResult, now: Int64, extra: [(String, JSONValue)]
    ) -> DeliveryEvent {
        let id = "\(delivery.id)-\(delivery.attempts)-\(type == .invalidated ? "i" : "d")"
        let json = JSONValue.object(
            [
                ("id", .string(id)), ("type", .string(type.rawValue)), ("at", .int(now)), ("appId", .string(delivery.appID)),
                ("notificationId", .string(delivery.notificationID)), ("deliveryId", .int(delivery.id)), ("token", .string(delivery.token)),
                ("environment", .string(delivery.route.apiName)),
                ("pushType", .string(delivery.pushType.rawValue)), ("attempts", .int(Int64(delivery.attempts))),
                ("latencyMs", .int(result.latencyMilliseconds)),
            ] + extra
        )
        return DeliveryEvent(id: id, type: type, appID: delivery.appID, json: json)
    }

    // MARK: activity

    private func add(_ minute: Minute) {
        self.state.withLock { state in
            if let index = state.minutes.lastIndex(where: { $0.minute == minute.minute }) {
                state.minutes[index].sent += minute.sent
                state.minutes[index].failed += minute.failed
                state.minutes[index].retried += minute.retried
                state.minutes[index].reasons.merge(minute.reasons, uniquingKeysWith: +)
            } else {
                state.minutes.append(minute)
                state.minutes.removeAll { $0.minute <= minute.minute - 60 }
            }
        }
    }

    /// The 60 minutes ending with the current one, oldest first (empty minutes included).
    func lastHour() -> [Minute] {
        let current = self.clock.nowMilliseconds / 60_000
        let kept = self.state.withLock { Dictionary($0.minutes.map { ($0.minute, $0) }, uniquingKeysWith: { first, _ in first }) }
        return (current - 59...current).map { kept[$0] ?? Minute(minute: $0) }
    }

    /// Whether anyone listens to `appID`'s events here (SSE).
    func hasSubscribers(appID: String) -> Bool {
        self.state.withLock { !($0.subscribers[appID]?.isEmpty ?? true) }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import CoreMetrics
import Foundation
import HTTPTypes
import HeraldAPI
import HeraldCore
import Logging
import ServiceLifecycle
import Synchronization

/// The delivery engine: claims due deliveries in batches under a lease, sends them through the
/// APNs client of their app and environment, and records the outcomes in one transaction per
/// batch. Retries what APNs says may succeed later (429, 5xx, connection failures) with
/// exponential back-off and jitter, until the notification expires or `maximumAttempts`; never
/// retries what must be fixed; invalidates tokens APNs calls dead.
///
/// A send whose outcome is unknown (written, unanswered: APNs may have delivered it) is resent
/// at most once per delivery, and only if its notification's `onUnknownOutcome` is `resend`
/// (``UnknownOutcomePolicy``); the delivery counts it either way. A push whose sender set no
/// collapse id carries its notification's id as one, so that a resend replaces on the device.
///
/// At-least-once: a delivery is leased, not removed, while it is sent; if the process dies, the
/// lease runs out and another claim sends it again.
package final class DeliveryEngine: Service, Sendable {
    package struct Configuration: Sendable {
        package var batchSize = 1000
        /// Batches in progress at once.
        package var workers = 4
        package var lease: Duration = .seconds(60)
        /// How long an APNs request may wait for its answer; nil for 10 s or half the lease,
        /// whichever is shorter. At most half the lease (`herald serve` refuses more), so that a
        /// batch is answered or failed before another worker can claim (and send again) what is
        /// still in flight.
        package var apnsTimeout: Duration?
        /// How often an idle engine looks for due deliveries.
        package var pollInterval: Duration = .milliseconds(50)
        package var maximumAttempts = 8
        /// Streams in flight on the connection that carries resends of unknown outcomes
        /// (``ClientLane/resend``): a lost connection takes at most this many resends with it.
        package var resendStreams = 8
        package var retryBase: Duration = .seconds(1)
        package var retryMaximum: Duration = .seconds(300)

        package init() {}

        /// The APNs request deadline in use.
        var effectiveAPNSTimeout: Duration { self.apnsTimeout ?? min(.seconds(10), self.lease / 2) }
    }

    let store: any HeraldStore
    /// One transport per platform: the engine claims, retries, invalidates and records alike
    /// for all of them.
    private let apns: APNsPushTransport
    private let fcm: FCMPushTransport
    private let webPush: WebPushTransport
    private let configuration: Configuration
    private let clock: any EpochClock
    private let logger: Logger
    /// Told every recorded batch: SSE streams, webhooks and the dashboard's activity.
    let events: DeliveryEvents?
    /// Signs receipt ids (``ReceiptID``) under the master key; nil: pushes carry none.
    let secrets: SecretBox?
    /// Rung when work is committed (and at shutdown); every idle worker waiting on it wakes.
    private let doorbell = Doorbell()

    init(
        store: any HeraldStore, clients: ClientProvider, fcmClients: FCMClientProvider? = nil, webPush: WebPushTransport,
        configuration: Configuration, clock: any EpochClock, logger: Logger, events: DeliveryEvents? = nil, secrets: SecretBox? = nil
    ) {
        self.apns = APNsPushTransport(clients: clients, logger: logger)
        self.fcm = FCMPushTransport(clients: fcmClients, clock: clock, logger: logger)
        self.webPush = webPush
        self.secrets = secrets
        self.events = events
        self.store = store
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
    }

    /// New work was committed: look now instead of at the next poll.
    func ring() { self.doorbell.ring() }

    package func run() async throws {
        // Several workers, each claim → send → record: one's database work overlaps another's
        // sending. Leases keep them apart. Graceful shutdown rings, so that idle workers stop now.
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for index in 0..<max(1, self.configuration.workers) {
                    group.addTask { await self.work(polls: index == 0) }
                }
            }
        } onGracefulShutdown: {
            self.doorbell.ring()
        }
    }

    /// One worker's loop. Idle, the worker that `polls` looks again at each poll interval (for
    /// retries come due, scheduled notifications, another process's work) and rings when such a
    /// look finds work, so that the others join. The others look at each poll interval too while
    /// work was found recently (a broadcast's chunks come and go between looks), and once they
    /// have found none for ``quietAfter`` looks, wait for a ring or 20 poll intervals: every look
    /// of every worker was a claim's statements on the database, four workers' 80 a second on
    /// an idle server.
    private func work(polls: Bool) async {
        var failures = 0
        var emptyLooks = 0
        while true {
            // Rings before this look began are answered by it; one during it may have come too late.
            // Read before the shutdown check: a graceful shutdown is marked before its ring, so
            // a shutdown this check misses rings after `looked`, and the wait below ends at once.
            // (Checked first, a shutdown marked and rung between the check and this read would
            // leave the worker waiting a whole poll interval for a ring that had come.)
            let looked = self.doorbell.rings
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
            let worked: Bool
            do {
                worked = try await self.runBatch()
                failures = 0
            } catch {
                // The database is away (or refusing): wait longer each time, up to 5 s, instead
                // of polling it every 50 ms. What was claimed is due again when its lease ends.
                failures += 1
                self.logger.error("delivery batch failed", metadata: ["error": "\(error)"])
                let backoff = Duration.milliseconds(min(5000, 100 << min(failures, 6)))
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: backoff) }
                continue
            }
            if worked {
                if polls, emptyLooks > 0 { self.doorbell.ring() }
                emptyLooks = 0
            } else {
                emptyLooks += 1
                await self.updateQueueDepth(force: false)
                // The poll interval (a quiet worker that does not poll: 20 of them) or the
                // doorbell, whichever comes first.
                let quiet = !polls && emptyLooks > Self.quietAfter
                await self.doorbell.wait(after: looked, timeout: self.configuration.pollInterval * (quiet ? 20 : 1))
            }
        }
    }

    /// Looks in a row that found nothing after which a worker that does not poll waits for a
    /// ring (a second of them at the default poll interval).
    static let quietAfter = 20

    /// Records a sent batch, retrying while the database is unreachable until the batch's lease
    /// ends: a record lost means the batch is sent again once its lease ends, and a record is
    /// fenced by its claim (one that comes after another claim is ignored), so trying until then
    /// costs nothing. (It tried for half the lease from the claim, at most 12 times: a batch whose
    /// send took long on a busy machine had little of that left, and a short outage then cost
    /// duplicates.)
    private func recordPatiently(_ results: [DeliveryResult], claimedAt: Int64) async throws -> RecordedOutcomes {
        let deadline = claimedAt + self.configuration.lease.wholeMilliseconds
        var wait: Int64 = 100
        while true {
            do {
                return try await self.store.record(results, now: self.clock.nowMilliseconds)
            } catch {
                guard self.clock.nowMilliseconds + wait < deadline, !Task.isCancelled else { throw error }
                self.logger.warning("recording a batch failed; retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .milliseconds(wait))
                wait = min(wait * 2, 2000)
            }
        }
    }

    /// Claims, sends and records one batch; false when nothing was due.
    func runBatch() async throws -> Bool {
        let now = self.clock.nowMilliseconds
        let batch = try await self.store.claimDeliveries(
            limit: self.configuration.batchSize, now: now,
            leaseMilliseconds: self.configuration.lease.wholeMilliseconds
        )
        guard !batch.isEmpty else { return false }
        // A full batch: there may be more. A worker that found nothing while this claim held a
        // notification's audience (PostgreSQL skips a locked one) tries again now, not after its poll.
        if batch.count >= self.configuration.batchSize { self.ring() }
        // Usually one app and route per batch: a short list beats hashing every delivery.
        // A resend of an unknown outcome goes on its own lane (``ClientLane/resend``).
        // A batch that is one group already (a broadcast's chunk) is sent as it is: no delivery is copied.
        var groups: [(appID: String, route: Route, lane: ClientLane, deliveries: [ClaimedDelivery])] = []
        func lane(_ delivery: ClaimedDelivery) -> ClientLane {
            UnknownOutcomePolicy.isResend(delivery.unknownOutcomes) ? .resend : .main
        }
        let first = batch[0]
        let firstLane = lane(first)
        if batch.allSatisfy({ $0.appID == first.appID && $0.route == first.route && lane($0) == firstLane }) {
            groups.append((first.appID, first.route, firstLane, batch))
        } else {
            for delivery in batch {
                let lane = lane(delivery)
                if let index = groups.firstIndex(where: { $0.appID == delivery.appID && $0.route == delivery.route && $0.lane == lane }) {
                    groups[index].deliveries.append(delivery)
                } else {
                    groups.append((delivery.appID, delivery.route, lane, [delivery]))
                }
            }
        }
        let outcomes = await withTaskGroup(of: GroupOutcome.self) { group in
            for entry in groups {
                group.addTask { await self.send(entry.deliveries, route: entry.route, lane: entry.lane) }
            }
            var all: [GroupOutcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        // Each result names the claim it answers, so a record that comes after the lease ran out
        // (and another worker claimed the delivery) changes nothing.
        // A chunk's deliveries carry what their rows are created from.
        // By position in the batch: the deliveries themselves are not copied into the table.
        let positions = Dictionary(batch.indices.map { (batch[$0].id, $0) }, uniquingKeysWith: { first, _ in first })
        var results = outcomes.flatMap(\.results)
        for index in results.indices {
            guard let position = positions[results[index].deliveryID] else { continue }
            results[index].attempt = batch[position].attempts
            results[index].created = NewDelivery(batch[position])
        }
        let recorded = try await self.recordPatiently(results, claimedAt: now)
        await self.events?.recorded(batch, results, recorded)
        // End-to-end encrypted notifications keep their plaintext only while something is left to send.
        let sealed = Set(batch.lazy.filter { $0.placeholder != nil }.map(\.notificationID))
        if !sealed.isEmpty { try await self.store.forgetPlaintext(notificationIDs: Array(sealed)) }
        // Metrics per batch, not per delivery: one increment per (app, push type, result).
        for outcome in outcomes {
            for (key, count) in outcome.tallies {
                Counter(
                    label: "herald_deliveries_total",
                    dimensions: [("app", outcome.appID), ("push_type", key.pushType.rawValue), ("result", key.result)]
                )
                .increment(by: count)
            }
            for (decision, count) in outcome.unknownOutcomes {
                Counter(label: "herald_unknown_outcomes_total", dimensions: [("app", outcome.appID), ("decision", decision)])
                    .increment(by: count)
            }
            if !outcome.latencies.isEmpty {
                let timer = Timer(label: "herald_delivery_latency", dimensions: [("app", outcome.appID)])
                for value in outcome.latencies { timer.recordMilliseconds(value) }
            }
        }
        await self.updateQueueDepth(force: false)
        return true
    }

    /// One group's results, with its metrics already tallied.
    private struct GroupOutcome: Sendable {
        struct Key: Hashable, Sendable {
            var pushType: PushType
            var result: String
        }

        var appID: String
        var results: [DeliveryResult] = []
        var tallies: [Key: Int64] = [:]
        var latencies: [Int64] = []
        /// Unknown outcomes by decision: "resend" or "drop".
        var unknownOutcomes: [String: Int64] = [:]

        mutating func add(_ result: DeliveryResult, pushType: PushType) {
            let name: String
            switch result.outcome {
            case .sent:
                name = "sent"
                self.latencies.append(result.latencyMilliseconds)
            case .retry: name = "retry"
            case .failed: name = "failed"
            }
            self.tallies[Key(pushType: pushType, result: name), default: 0] += 1
            self.results.append(result)
        }
    }

    private let lastDepthUpdate = Mutex<ContinuousClock.Instant?>(nil)

    /// The pending-deliveries gauge, refreshed at most every 5 seconds (a COUNT over the outbox).
    func updateQueueDepth(force: Bool) async {
        let now = ContinuousClock.now
        let due = self.lastDepthUpdate.withLock { last -> Bool in
            if !force, let last, now - last < .seconds(5) { return false }
            last = now
            return true
        }
        guard due, let pending = try? await self.store.pendingDeliveries() else { return }
        Gauge(label: "herald_deliveries_pending").record(pending)
    }

    /// Sends one group (one app, route and lane) through its route's transport and turns each
    /// answer into the delivery's result: sent, retried later (after the service's
    /// `Retry-After` when it gave one), failed (and its address invalidated when dead), or an
    /// unknown outcome resent at most once.
    private func send(_ deliveries: [ClaimedDelivery], route: Route, lane: ClientLane) async -> GroupOutcome {
        guard let first = deliveries.first else { return GroupOutcome(appID: "") }
        var outcome = GroupOutcome(appID: first.appID)
        outcome.results.reserveCapacity(deliveries.count)
        let receipts = await self.receiptIDs(appID: first.appID)
        let transport: any PushTransport
        switch route.transport {
        case .apns: transport = self.apns
        case .fcm: transport = self.fcm
        case .webpush: transport = self.webPush
        }
        let started = self.clock.nowMilliseconds
        await transport.send(deliveries, route: route, lane: lane, receipts: receipts) { index, answer in
            let delivery = deliveries[index]
            switch answer {
            case .sent(let id):
                let latency = self.clock.nowMilliseconds - started
                outcome.add(
                    DeliveryResult(deliveryID: delivery.id, outcome: .sent(apnsID: id), latencyMilliseconds: latency), pushType: delivery.pushType)
            case .refused(let status, let reason, let invalidate, let timestamp):
                outcome.add(
                    DeliveryResult(
                        deliveryID: delivery.id, outcome: .failed(status: status, reason: reason, invalidate: invalidate, timestamp: timestamp),
                        latencyMilliseconds: self.clock.nowMilliseconds - started),
                    pushType: delivery.pushType)
            case .retryLater(let status, let reason, let after):
                var result = self.retryOrFail(delivery, status: status, reason: reason, retryable: true, after: after)
                result.latencyMilliseconds = self.clock.nowMilliseconds - started
                outcome.add(result, pushType: delivery.pushType)
            case .unknown(let status):
                // The service may have delivered it: resent at most once per delivery, if its sender wants.
                var result: DeliveryResult
                switch UnknownOutcomePolicy.decide(delivery.onUnknownOutcome, earlier: delivery.unknownOutcomes) {
                case .resend:
                    result = self.retryOrFail(delivery, status: status, reason: UnknownOutcomePolicy.reason, retryable: true)
                    outcome.unknownOutcomes["resend", default: 0] += 1
                case .fail(let reason):
                    result = DeliveryResult(
                        deliveryID: delivery.id, outcome: .failed(status: status, reason: reason, invalidate: false, timestamp: nil),
                        latencyMilliseconds: 0)
                    outcome.unknownOutcomes["drop", default: 0] += 1
                }
                result.outcomeUncertain = true
                result.latencyMilliseconds = self.clock.nowMilliseconds - started
                outcome.add(result, pushType: delivery.pushType)
            }
        }
        return outcome
    }

    /// An end-to-end encrypted delivery's payload: the placeholder with the plaintext sealed for
    /// this device beside `aps`; nil when the device has no usable key.
    static func seal(_ delivery: ClaimedDelivery, placeholder: [UInt8]) -> [UInt8]? {
        guard let key = delivery.publicKey, placeholder.last == UInt8(ascii: "}"),
            let envelope = try? EncryptedPayload.sealedJSON(Data(delivery.payload), type: key.type, publicKey: Data(key.key))
        else { return nil }
        return placeholder.dropLast() + Array(#","\#(EncryptedPayload.key)":"#.utf8) + Array(envelope.utf8) + [UInt8(ascii: "}")]
    }

    /// A retry after back-off with jitter — no sooner than `after` (ms), the service's
    /// `Retry-After` — or a failure when it may not be retried, is out of attempts or would
    /// come after its notification expires.
    private func retryOrFail(_ delivery: ClaimedDelivery, status: Int?, reason: String, retryable: Bool, after: Int64? = nil) -> DeliveryResult {
        let now = self.clock.nowMilliseconds
        var wait = backOffMilliseconds(attempt: delivery.attempts, base: self.configuration.retryBase, maximum: self.configuration.retryMaximum)
        if let after, after > wait {
            // The service named its time: that, plus up to a tenth more, so that a fleet's retries spread out.
            wait = after + Int64.random(in: 0...max(1, after / 10))
        }
        let retryAt = now + wait
        let expired = delivery.expiration.map { $0 == 0 || retryAt >= $0 * 1000 } ?? false
        guard retryable, delivery.attempts < self.configuration.maximumAttempts, !expired else {
            let why = !retryable ? reason : expired ? "\(reason) (expired before a retry)" : "\(reason) (after \(delivery.attempts) attempts)"
            return DeliveryResult(
                deliveryID: delivery.id, outcome: .failed(status: status, reason: why, invalidate: false, timestamp: nil), latencyMilliseconds: 0)
        }
        return DeliveryResult(deliveryID: delivery.id, outcome: .retry(status: status, reason: reason, retryAt: retryAt), latencyMilliseconds: 0)
    }

}

extension Duration {
    /// The duration in whole milliseconds.
    var wholeMilliseconds: Int64 { self.components.seconds * 1000 + self.components.attoseconds / 1_000_000_000_000_000 }
}

/// Exponential back-off with jitter, in milliseconds: `base` doubled for each attempt before
/// `attempt` (counted from 1), capped at `maximum`, then a random 50–100% of that.
func backOffMilliseconds(attempt: Int, base: Duration, maximum: Duration) -> Int64 {
    let ceiling = min(base.wholeMilliseconds << min(max(attempt - 1, 0), 20), maximum.wholeMilliseconds)
    return Int64(Double(ceiling) * Double.random(in: 0.5...1.0))
}

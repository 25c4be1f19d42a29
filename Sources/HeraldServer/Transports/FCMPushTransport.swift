// SPDX-License-Identifier: Apache-2.0
import APNSModels
import CoreMetrics
import FCMClient
import HeraldCore
import Logging

/// FCM under the delivery engine: a group's messages through its app's ``FCMClient``, each
/// notification's FCM part (``FCMPart``) framed once per batch with its time to live, priority
/// and collapse key, then given each device's target and receipt id; every FCM answer mapped to
/// the engine's terms as FCM documents it (``FCMError/action``).
struct FCMPushTransport: PushTransport {
    let clients: FCMClientProvider?
    let clock: any EpochClock
    let logger: Logger

    /// What makes one frame: deliveries of one notification (and one rendering) share it.
    private struct FrameKey: Hashable {
        var payload: [UInt8]
        var expiration: Int64?
        var priority: Int?
        var collapseID: String?
    }

    func send(
        _ deliveries: [ClaimedDelivery], route: Route, lane: ClientLane, receipts: ReceiptID?, answer: (Int, TransportAnswer) -> Void
    ) async {
        guard let first = deliveries.first else { return }
        let client: FCMClient
        do throws(HeraldError) {
            guard let clients = self.clients else { throw HeraldError(code: "no_credentials", "this server sends nothing to FCM") }
            client = try await clients.client(appID: first.appID)
        } catch {
            self.logger.warning("no FCM client", metadata: ["herald.app": "\(first.appID)", "error": "\(error.message)"])
            self.answerAll(deliveries, error, answer: answer)
            return
        }
        let nowSeconds = self.clock.nowMilliseconds / 1000
        var frames: [FrameKey: FCMPart.Frame] = [:]
        var bodies: [[UInt8]] = []
        var indices: [Int] = []
        bodies.reserveCapacity(deliveries.count)
        indices.reserveCapacity(deliveries.count)
        for (index, delivery) in deliveries.enumerated() {
            guard let target = PushAddress.fcmTarget(stored: delivery.token) else {
                answer(index, .refused(status: nil, reason: "INVALID_ARGUMENT", invalidate: true, timestamp: nil))
                continue
            }
            let key = FrameKey(
                payload: delivery.payload, expiration: delivery.expiration, priority: delivery.priority?.rawValue, collapseID: delivery.collapseID)
            let frame: FCMPart.Frame
            if let made = frames[key] {
                frame = made
            } else {
                // Expiration 0 is now-or-never (FCM's ttl 0); otherwise what is left of it.
                let ttl = delivery.expiration.map { $0 == 0 ? 0 : max(0, $0 - nowSeconds) }
                guard
                    let made = FCMPart.Frame(
                        // Only the sender's collapse key: FCM throttles collapsible messages per device.
                        part: delivery.payload, ttl: ttl, priority: delivery.priority, collapseKey: delivery.collapseID)
                else {
                    answer(index, .refused(status: nil, reason: "NoFCMPart", invalidate: false, timestamp: nil))
                    continue
                }
                frames[key] = made
                frame = made
            }
            var extra: [(String, String)] = []
            if let receipts, delivery.pushType == .alert || delivery.pushType == .background {
                extra.append(("hr", receipts.id(appID: delivery.appID, deliveryID: delivery.id)))
            }
            bodies.append(frame.body(field: target.field, target: target.value, extra: extra))
            indices.append(index)
        }
        var answers: [String: Int64] = [:]
        await client.send(bodies) { position, result in
            switch result {
            case .success(let name):
                // `projects/{project}/messages/{id}`: the id is FCM's own.
                answer(indices[position], .sent(id: name.split(separator: "/").last.map(String.init) ?? name))
                answers["sent", default: 0] += 1
            case .failure(let error):
                answer(indices[position], Self.answer(error))
                answers[error.code, default: 0] += 1
            }
        }
        // One increment per (app, answer) a batch: FCM's error codes, or `sent`.
        for (result, count) in answers {
            Counter(label: "herald_fcm_messages_total", dimensions: [("app", first.appID), ("result", result)]).increment(by: count)
        }
    }

    /// What FCM's failure means for the delivery.
    static func answer(_ error: FCMError) -> TransportAnswer {
        if error.outcomeUnknown { return .unknown(status: error.status) }
        switch error.action {
        case .invalidate: return .refused(status: error.status, reason: error.code, invalidate: true, timestamp: nil)
        case .configuration, .refuse: return .refused(status: error.status, reason: error.code, invalidate: false, timestamp: nil)
        case .retry: return .retryLater(status: error.status, reason: error.code, after: error.retryAfterSeconds.map { $0 * 1000 })
        }
    }
}

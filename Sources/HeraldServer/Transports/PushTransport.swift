// SPDX-License-Identifier: Apache-2.0
import HTTPTypes
import HeraldCore

/// What a push service answered for one delivery, in the engine's terms: every transport maps
/// its service's answers onto these, and the engine alone decides retries, failures,
/// invalidations and unknown outcomes from them.
enum TransportAnswer: Sendable, Hashable {
    /// Accepted; the service's id for the message (APNs's apns-id, FCM's message id).
    case sent(id: String?)
    /// Not sent, for good; `invalidate` when the address is dead (`timestamp`: when the service
    /// says it died, ms).
    case refused(status: Int?, reason: String, invalidate: Bool, timestamp: Int64?)
    /// It may succeed later; `after`: the service's `Retry-After`, in ms.
    case retryLater(status: Int?, reason: String, after: Int64?)
    /// Written and left unanswered: the service may have delivered it.
    case unknown(status: Int?)
}

/// One push service under the delivery engine. A transport sends one group of claimed
/// deliveries (one app, one route, one lane) and answers each of them exactly once, by its
/// index in the group; it never retries what its service may have processed.
protocol PushTransport: Sendable {
    func send(
        _ deliveries: [ClaimedDelivery], route: Route, lane: ClientLane, receipts: ReceiptID?, answer: (Int, TransportAnswer) -> Void
    ) async
}

extension PushTransport {
    /// Every delivery of a group answered alike: the transport has no client for the app (no
    /// credentials, unreadable ones). A server-side cause (5xx) may pass; the rest is the
    /// configuration's to fix.
    func answerAll(_ deliveries: [ClaimedDelivery], _ error: HeraldError, answer: (Int, TransportAnswer) -> Void) {
        let retryable = HeraldError.status(forCode: error.code).code >= 500
        for index in deliveries.indices {
            answer(
                index,
                retryable
                    ? .retryLater(status: nil, reason: error.code, after: nil)
                    : .refused(status: nil, reason: error.code, invalidate: false, timestamp: nil)
            )
        }
    }
}

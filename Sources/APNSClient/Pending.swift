// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore

/// Whom to tell when a request is done.
enum Completion: Sendable {
    /// A caller suspended in `send`.
    case continuation(UnsafeContinuation<APNSResult, Never>)
    /// A bulk send's collector.
    case callback(@Sendable (APNSRequest, APNSResult) -> Void)
}

/// A request on its way through the client: what to send, whom to tell, and until when.
///
/// A pending request moves by value through the intake, the pool's queues, the stream table
/// and the state machine's actions. What never changes on the way sits in one shared box, so
/// each move is two words and one retain, not the request's nine fields and their retains.
struct Pending: Sendable {
    /// The part of a pending request that is fixed when it is submitted.
    final class Fixed: Sendable {
        let request: APNSRequest
        let completion: Completion
        let submitted: NIODeadline
        let deadline: NIODeadline
        /// A broadcast or channel-management request; nil for a device push.
        let extra: ExtraRequest?

        init(request: APNSRequest, completion: Completion, submitted: NIODeadline, deadline: NIODeadline, extra: ExtraRequest? = nil) {
            self.request = request
            self.extra = extra
            self.completion = completion
            self.submitted = submitted
            self.deadline = deadline
        }
    }

    let fixed: Fixed
    /// How often it has been put on the wire.
    var sends = 0
    /// Whether it was already resent once after `ExpiredProviderToken`.
    var tokenRetried = false

    init(request: APNSRequest, completion: Completion, submitted: NIODeadline, deadline: NIODeadline, extra: ExtraRequest? = nil) {
        self.fixed = Fixed(request: request, completion: completion, submitted: submitted, deadline: deadline, extra: extra)
    }

    var request: APNSRequest { self.fixed.request }
    var completion: Completion { self.fixed.completion }
    var submitted: NIODeadline { self.fixed.submitted }
    var deadline: NIODeadline { self.fixed.deadline }

    func complete(_ result: APNSResult) {
        switch self.fixed.completion {
        case .continuation(let continuation): continuation.resume(returning: result)
        case .callback(let callback): callback(self.fixed.request, result)
        }
    }
}

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
struct Pending: Sendable {
    var request: APNSRequest
    let completion: Completion
    let submitted: NIODeadline
    let deadline: NIODeadline
    /// How often it has been put on the wire.
    var sends = 0
    /// Whether it was already resent once after `ExpiredProviderToken`.
    var tokenRetried = false

    func complete(_ result: APNSResult) {
        switch self.completion {
        case .continuation(let continuation): continuation.resume(returning: result)
        case .callback(let callback): callback(self.request, result)
        }
    }
}

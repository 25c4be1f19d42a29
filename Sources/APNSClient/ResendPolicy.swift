// SPDX-License-Identifier: Apache-2.0
import NIOCore

/// What the client does with a request whose stream ended without an answer, on plain values.
///
/// Two classes, and only the first is ever sent again by the client:
/// - *not processed*: APNs cannot have acted on it (RST_STREAM REFUSED_STREAM, a stream above a
///   GOAWAY's last-stream-id, a request handed back before it was written). Resent, as often as
///   `maximumResends` allows, within its deadline.
/// - *unknown outcome*: it was written and no answer came (the connection was lost, or the
///   deadline passed while it was in flight). APNs may have delivered it: the client reports it
///   to the caller (``APNSClientError/outcomeUnknown``) and never sends it again itself, so
///   whoever resends it decides once, knowing it may show twice.
struct ResendPolicy: Sendable, Hashable {
    /// Why a stream ended unanswered.
    enum Fate: Sendable, Hashable {
        /// APNs did not process it; `reason` says how we know.
        case notProcessed(reason: String)
        /// Written, then the connection ended before an answer (`reason`: what ended it).
        case connectionLost(reason: String)
    }

    enum Decision: Sendable, Hashable {
        /// Put it on the wire again, ahead of the intake; `counts`: it had gone on the wire.
        case resend(counts: Bool)
        /// Complete it with this error.
        case fail(APNSClientError)
    }

    var maximumResends: Int

    /// The decision for a request put on the wire `sends` times (this one included), due by
    /// `deadline`, whose stream ended as `fate` at `now`. `written`: this stream had gone on the
    /// wire (false for one handed back unwritten).
    func decide(_ fate: Fate, sends: Int, written: Bool, deadline: NIODeadline, now: NIODeadline) -> Decision {
        switch fate {
        case .connectionLost(let reason):
            return .fail(Self.unknownOutcome(reason: reason))
        case .notProcessed(let reason):
            // Every earlier send of it was not processed either (an unknown outcome is never
            // resent here): a deadline passed now means not delivered.
            if deadline <= now {
                return .fail(APNSClientError(code: .deadlineExceeded, message: "not sent before the deadline; last: \(reason)"))
            }
            if sends > self.maximumResends {
                return .fail(
                    APNSClientError(code: .connectionFailed, message: "sent \(sends) times, never processed by APNs; last: \(reason)"))
            }
            return .resend(counts: written)
        }
    }

    /// Written, and the connection ended before the answer.
    static func unknownOutcome(reason: String) -> APNSClientError {
        APNSClientError(
            code: .unknownOutcome,
            message: "the connection ended before APNs answered (\(reason)); it may or may not have been delivered",
            outcomeUnknown: true
        )
    }

    /// Written, and the deadline passed before the answer.
    static func deadlinePassedInFlight() -> APNSClientError {
        APNSClientError(
            code: .deadlineExceeded, message: "APNs did not answer in time; the notification may or may not have been delivered",
            outcomeUnknown: true)
    }
}

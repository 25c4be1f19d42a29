// SPDX-License-Identifier: Apache-2.0

/// What a notification's sender wants done with a push APNs may or may not have delivered (it
/// was written, and no answer came: the connection was lost, or the deadline passed).
package enum UnknownOutcomeAction: String, Sendable, Hashable, CaseIterable {
    /// Send it once more (at-least-once; the device may show it twice — once, with the
    /// collapse id Herald gives every delivery that has none).
    case resend
    /// Never send it again (at-most-once; it may not arrive).
    case drop

    package static let `default` = UnknownOutcomeAction.resend
}

/// The engine's decision on an unknown outcome, once per delivery, on plain values.
package enum UnknownOutcomePolicy {
    package enum Decision: Sendable, Hashable {
        /// Retry it like any retryable failure (back-off, attempts, expiration).
        case resend
        /// Record it as failed with `reason`, never sent again.
        case fail(reason: String)
    }

    /// The reason a delivery records when an unknown outcome ends it.
    package static let reason = "UnknownOutcome"

    /// The decision for a delivery whose send had an unknown outcome, with `earlier` unknown
    /// outcomes recorded before this one, for a notification that asked for `action`.
    ///
    /// At most one resend after an unknown outcome, across every layer: the client never resends
    /// one, and the engine resends only the first. A second unknown outcome ends the delivery as
    /// failed ("UnknownOutcome (after a resend)"): it may have arrived, once or twice.
    package static func decide(_ action: UnknownOutcomeAction, earlier: Int) -> Decision {
        switch action {
        case .drop: return .fail(reason: "\(Self.reason) (not resent: onUnknownOutcome is drop)")
        case .resend: return earlier == 0 ? .resend : .fail(reason: "\(Self.reason) (after a resend)")
        }
    }

    /// Whether a delivery with `earlier` unknown outcomes is being resent: its next send is its
    /// last chance (another unknown outcome ends it), so the engine sends it on a connection
    /// with few streams in flight, where a lost connection takes few others with it.
    package static func isResend(_ earlier: Int) -> Bool {
        earlier > 0
    }

    /// The collapse id a delivery's pushes carry when the sender set none: the notification's id
    /// (one delivery per device per notification), so a resend replaces the push on the device
    /// instead of adding to it. At most 64 bytes, as APNs requires.
    package static func collapseID(sender: String?, notificationID: String) -> String {
        if let sender { return sender }
        return String(decoding: notificationID.utf8.prefix(64), as: UTF8.self)
    }
}

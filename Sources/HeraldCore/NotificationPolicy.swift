// SPDX-License-Identifier: Apache-2.0

/// What both SQL drivers decide about a notification outside its claims and records: what it
/// keeps when accepted, whether a cancel did anything, how its pending count is read, when a
/// local-time delivery is due, and when an encrypted notification's plaintext may be forgotten.
/// Plain values in, decisions out.
///
/// An encrypted notification's plaintext goes once nothing of it is left to send: at once when
/// its audience is empty, when it is cancelled, when its audience is exhausted by an expansion,
/// and when a chunk of it ends; each time only if no delivery is pending and no chunk in flight
/// (the drivers' `forgetPlaintext` checks that in SQL).
package enum NotificationPolicy {
    /// How many of an app's newest notifications a device's delivery history looks through.
    package static let historyDepth = 1000

    /// The payload a notification is stored with: an encrypted one (with a placeholder) with
    /// nobody to send to keeps no plaintext at all.
    package static func storedPayload(_ spec: NotificationSpec, audienceSize: Int64) -> [UInt8] {
        spec.placeholder != nil && audienceSize == 0 ? [] : spec.payload
    }

    /// What a notification stores for `onUnknownOutcome`: nil (NULL) for the default, resend.
    package static func storedUnknownOutcome(_ spec: NotificationSpec) -> String? {
        spec.onUnknownOutcome == .default ? nil : spec.onUnknownOutcome.rawValue
    }

    /// Where a new notification's expansion starts: before the first device, or nowhere for an
    /// empty audience.
    package static func expandAfter(audienceSize: Int64) -> Int64? {
        audienceSize > 0 ? 0 : nil
    }

    /// Whether a cancel did anything: it stopped the expansion, failed pending deliveries, or
    /// marked a notification with chunks in flight (which finish; one whose lease runs out is
    /// recorded as cancelled). A cancelled notification's plaintext goes at once.
    package static func cancelled(stoppedExpansion: Bool, failedPending: Bool, chunksInFlight: Int64, alreadyCancelled: Bool) -> Bool {
        stoppedExpansion || failedPending || (chunksInFlight > 0 && !alreadyCancelled)
    }

    /// Whether an expansion that exhausted its audience (or not) forgets the plaintext of a
    /// notification, `encrypted` or not.
    package static func forgetsPlaintext(exhausted: Bool, encrypted: Bool) -> Bool {
        exhausted && encrypted
    }

    /// A notification's deliveries per state, from the rows it has (`created` of them): the
    /// audience members with no row yet (not expanded, or in a chunk in flight, whose
    /// deliveries get rows when recorded) count as pending.
    package static func counts(
        _ rows: [DeliveryState: Int], created: Int, summary: NotificationSummary, chunksInFlight: Int64
    ) -> [DeliveryState: Int] {
        var counts = rows
        if summary.expanding || chunksInFlight > 0 { counts[.pending, default: 0] += max(0, summary.audienceSize - created) }
        return counts
    }

    /// When a local-time delivery is due for a device in `timeZone` (nil: the server's): its
    /// local time, never before the notification's scheduled time.
    package static func localDue(_ localTime: LocalTime, timeZone: String?, scheduledAt: Int64) -> Int64 {
        max(scheduledAt, localTime.instant(timeZone: timeZone))
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Testing

/// What both drivers decide about a notification outside claims and records, on plain values.
@Suite struct NotificationPolicyTests {
    @Test("an encrypted notification with nobody to send to keeps no plaintext; any other keeps its payload")
    func storedPayload() {
        var spec = NotificationSpec(audience: .all, payload: Array("secret".utf8))
        #expect(NotificationPolicy.storedPayload(spec, audienceSize: 0) == Array("secret".utf8))
        spec.placeholder = Array("{}".utf8)
        #expect(NotificationPolicy.storedPayload(spec, audienceSize: 1) == Array("secret".utf8))
        #expect(NotificationPolicy.storedPayload(spec, audienceSize: 0) == [])
        #expect(NotificationPolicy.expandAfter(audienceSize: 3) == 0)
        #expect(NotificationPolicy.expandAfter(audienceSize: 0) == nil)
    }

    @Test("a cancel counts when it stopped something, or first marks a notification with chunks in flight")
    func cancel() {
        #expect(NotificationPolicy.cancelled(stoppedExpansion: true, failedPending: false, chunksInFlight: 0, alreadyCancelled: true))
        #expect(NotificationPolicy.cancelled(stoppedExpansion: false, failedPending: true, chunksInFlight: 0, alreadyCancelled: true))
        #expect(NotificationPolicy.cancelled(stoppedExpansion: false, failedPending: false, chunksInFlight: 2, alreadyCancelled: false))
        #expect(!NotificationPolicy.cancelled(stoppedExpansion: false, failedPending: false, chunksInFlight: 2, alreadyCancelled: true))
        #expect(!NotificationPolicy.cancelled(stoppedExpansion: false, failedPending: false, chunksInFlight: 0, alreadyCancelled: false))
    }

    @Test("the plaintext goes when an expansion exhausts an encrypted notification's audience, not before")
    func plaintext() {
        #expect(NotificationPolicy.forgetsPlaintext(exhausted: true, encrypted: true))
        #expect(!NotificationPolicy.forgetsPlaintext(exhausted: false, encrypted: true))
        #expect(!NotificationPolicy.forgetsPlaintext(exhausted: true, encrypted: false))
    }

    @Test("audience members without a row count as pending while expanding or with chunks in flight, never below zero")
    func counts() {
        func summary(expanding: Bool, audience: Int) -> NotificationSummary {
            NotificationSummary(id: "n", appID: "demo", createdAt: 0, scheduledAt: 0, audienceSize: audience, expanding: expanding, cancelledAt: nil)
        }
        let rows: [DeliveryState: Int] = [.sent: 3, .pending: 1]
        #expect(
            NotificationPolicy.counts(rows, created: 4, summary: summary(expanding: true, audience: 10), chunksInFlight: 0) == [
                .sent: 3, .pending: 7,
            ])
        #expect(
            NotificationPolicy.counts(rows, created: 4, summary: summary(expanding: false, audience: 10), chunksInFlight: 1) == [
                .sent: 3, .pending: 7,
            ])
        #expect(NotificationPolicy.counts(rows, created: 4, summary: summary(expanding: false, audience: 10), chunksInFlight: 0) == rows)
        // Devices registered since acceptance can make more rows than the audience counted.
        #expect(
            NotificationPolicy.counts([.sent: 5], created: 5, summary: summary(expanding: true, audience: 4), chunksInFlight: 0) == [
                .sent: 5, .pending: 0,
            ])
    }

    @Test("a local-time delivery is due at its device's own time, never before the notification's scheduled time")
    func localDue() throws {
        let nine = try #require(LocalTime("2026-11-24T09:00"))
        let utc = nine.instant(timeZone: nil)
        #expect(NotificationPolicy.localDue(nine, timeZone: nil, scheduledAt: 0) == utc)
        #expect(NotificationPolicy.localDue(nine, timeZone: "Europe/Berlin", scheduledAt: 0) == utc - 3_600_000)
        #expect(NotificationPolicy.localDue(nine, timeZone: "Europe/Berlin", scheduledAt: utc) == utc)
    }
}

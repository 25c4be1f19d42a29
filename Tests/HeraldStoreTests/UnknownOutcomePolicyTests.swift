// SPDX-License-Identifier: Apache-2.0
import HeraldCore
import Testing

/// The engine's decision on a push APNs may or may not have delivered, on plain values.
@Suite struct UnknownOutcomePolicyTests {
    @Test("resend: the first unknown outcome of a delivery is resent, a second is not; drop: never resent")
    func decide() {
        #expect(UnknownOutcomePolicy.decide(.resend, earlier: 0) == .resend)
        #expect(UnknownOutcomePolicy.decide(.resend, earlier: 1) == .fail(reason: "UnknownOutcome (after a resend)"))
        #expect(UnknownOutcomePolicy.decide(.resend, earlier: 5) == .fail(reason: "UnknownOutcome (after a resend)"))
        #expect(UnknownOutcomePolicy.decide(.drop, earlier: 0) == .fail(reason: "UnknownOutcome (not resent: onUnknownOutcome is drop)"))
        #expect(UnknownOutcomeAction.default == .resend)
    }

    @Test("a push without a sender's collapse id collapses on its notification's id (at most 64 bytes); a sender's is kept as is")
    func collapseID() {
        #expect(
            UnknownOutcomePolicy.collapseID(sender: nil, notificationID: "0f4c3a52-8d1e-4a57-9b7e-2f0c6d1e9a33")
                == "0f4c3a52-8d1e-4a57-9b7e-2f0c6d1e9a33")
        #expect(UnknownOutcomePolicy.collapseID(sender: "score", notificationID: "n") == "score")
        #expect(UnknownOutcomePolicy.collapseID(sender: nil, notificationID: String(repeating: "x", count: 100)).utf8.count == 64)
    }

    @Test("a record counts an unknown outcome only for a delivery whose outcome it applied")
    func recordPlan() {
        var uncertain = DeliveryResult(deliveryID: 1, outcome: .retry(status: nil, reason: "UnknownOutcome", retryAt: 5), latencyMilliseconds: 0)
        uncertain.outcomeUncertain = true
        let known = DeliveryResult(deliveryID: 2, outcome: .retry(status: 503, reason: "ServiceUnavailable", retryAt: 5), latencyMilliseconds: 0)
        var rows = RecordPlanTests.Rows()
        let plan = RecordPlan([uncertain, known], now: 0, creating: &rows)
        #expect(plan.uncertain == [1])
        #expect(plan.uncertain(applied: [1, 2]) == [1])
        #expect(plan.uncertain(applied: [2]).isEmpty, "fenced out: a newer claim answers for it")
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Testing

/// Throttles on plain values: slots per minute, and what a claim sends now and sets aside.
@Suite struct ThrottleTests {
    func delivery(_ id: Int64, _ notification: String, perMinute: Int?, slotted: Bool = false) -> ClaimedDelivery {
        var claimed = ClaimedDelivery(
            id: id, notificationID: notification, appID: "demo", deviceID: id, token: "t", route: .production, pushType: .alert,
            topic: "x", priority: nil, expiration: nil, collapseID: nil, payload: [], attempts: 1)
        claimed.throttlePerMinute = perMinute
        claimed.throttleSlotted = slotted
        return claimed
    }

    @Test("slots are 60 s / N apart, rounded up, so no minute holds more than N")
    func interval() {
        #expect(Throttle.interval(perMinute: 1) == 60_000)
        #expect(Throttle.interval(perMinute: 2500) == 24)
        #expect(Throttle.interval(perMinute: 7) == 8572, "60000/7 = 8571.4…, up")
        #expect(Throttle.interval(perMinute: 100_000) == 1)
    }

    @Test("a claim sends the deliveries whose slot has come and sets the others aside until theirs; a slotted one keeps its slot")
    func decide() {
        let batch = [
            self.delivery(1, "a", perMinute: 30), self.delivery(2, "a", perMinute: 30), self.delivery(3, "b", perMinute: nil),
            self.delivery(4, "a", perMinute: 30), self.delivery(5, "a", perMinute: 30, slotted: true), self.delivery(6, "c", perMinute: 60),
        ]
        #expect(Throttle.notifications(batch) == ["a", "c"])
        #expect(Throttle.notifications(batch, skipping: [5]) == ["a"])
        #expect(Throttle.notifications([self.delivery(1, "a", perMinute: nil)]).isEmpty, "no throttle, nothing to read")
        let now: Int64 = 1_000_000
        // "a" had its next free slot a second from now; "c" none yet.
        let decision = Throttle.decide(batch, skipping: [3], next: ["a": now + 1000], now: now)
        #expect(decision.aside == [0: now + 1000, 1: now + 3000])
        #expect(decision.next == ["a": now + 5000, "c": now + 1000])
        // A slot in the past is not kept: the next one is now, so a stalled notification does not burst.
        #expect(Throttle.decide([self.delivery(1, "a", perMinute: 60)], skipping: [], next: ["a": 5], now: now).next == ["a": now + 1000])
        var spec = NotificationSpec(audience: .all, payload: [])
        spec.adoptThrottle(100)
        #expect(spec.throttlePerMinute == 100)
        spec.throttleRequested = 0
        spec.adoptThrottle(100)
        #expect(spec.throttlePerMinute == nil, "0 on the send: none, not even the app's default")
        spec.throttleRequested = 5
        spec.adoptThrottle(nil)
        #expect(spec.throttlePerMinute == 5)
        #expect(QuietHours.apiState(.pending, reason: Throttle.reason) == "held")
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Unknown outcomes (a push written and unanswered) in the store contract, on every driver.
extension StoreContractTests {
    func uncertain(_ claimed: ClaimedDelivery, _ outcome: DeliveryResult.Outcome) -> DeliveryResult {
        var result = DeliveryResult(claimed, outcome: outcome, latencyMilliseconds: 1)
        result.outcomeUncertain = true
        return result
    }

    @Test(
        "a notification's onUnknownOutcome reaches its claimed deliveries; an unknown outcome is counted on its delivery, fenced like its outcome",
        arguments: Driver.enabled)
    func unknownOutcomes(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            for n in 1...2 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
            var dropping = NotificationSpec(audience: .all, payload: Array("{}".utf8))
            dropping.onUnknownOutcome = .drop
            _ = try await store.createNotification(
                appID: "demo", id: "r", bundleID: "com.example.app", NotificationSpec(audience: .all, payload: Array("{}".utf8)), now: 10)
            _ = try await store.createNotification(appID: "demo", id: "d", bundleID: "com.example.app", dropping, now: 10)
            let first = try await store.claimDeliveries(limit: 10, now: 10, leaseMilliseconds: 1000)
            #expect(first.count == 4)
            #expect(first.filter { $0.notificationID == "r" }.allSatisfy { $0.onUnknownOutcome == .resend && $0.unknownOutcomes == 0 })
            #expect(first.filter { $0.notificationID == "d" }.allSatisfy { $0.onUnknownOutcome == .drop && $0.unknownOutcomes == 0 })
            // A chunk's deliveries are created with their outcome, and count the unknown one.
            let recorded = try await store.record(
                first.map { claimed in
                    claimed.notificationID == "r"
                        ? self.uncertain(claimed, .retry(status: nil, reason: "UnknownOutcome", retryAt: 20))
                        : self.uncertain(claimed, .failed(status: nil, reason: "UnknownOutcome (not resent)", invalidate: false, timestamp: nil))
                },
                now: 15
            )
            #expect(recorded.applied == Set(first.map(\.id)))
            let resending = try #require(try await store.notification(appID: "demo", id: "r", deliveryLimit: 10))
            #expect(resending.deliveries.count == 2 && resending.deliveries.allSatisfy { $0.state == .pending && $0.unknownOutcomes == 1 })
            let dropped = try #require(try await store.notification(appID: "demo", id: "d", deliveryLimit: 10))
            #expect(dropped.deliveries.count == 2 && dropped.deliveries.allSatisfy { $0.state == .failed && $0.unknownOutcomes == 1 })
            #expect(
                try await store.deliveries(appID: "demo", token: try self.token(1).hex, limit: 10, beforeID: nil).allSatisfy {
                    $0.unknownOutcomes == 1
                })

            // The retry is claimed knowing its earlier unknown outcome.
            let again = try await store.claimDeliveries(limit: 10, now: 20, leaseMilliseconds: 1000)
            #expect(again.count == 2 && again.allSatisfy { $0.notificationID == "r" && $0.unknownOutcomes == 1 && $0.attempts == 2 })
            // A late answer to the first claim is fenced out: its unknown outcome does not count.
            var stale = self.uncertain(again[0], .retry(status: nil, reason: "UnknownOutcome", retryAt: 30))
            stale.attempt = 1
            #expect(try await store.record([stale], now: 25).applied.isEmpty)
            // An outcome known this time: the count stays.
            _ = try await store.record(again.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 30)
            let done = try #require(try await store.notification(appID: "demo", id: "r", deliveryLimit: 10))
            #expect(done.deliveries.allSatisfy { $0.state == .sent && $0.unknownOutcomes == 1 })
        }
    }
}

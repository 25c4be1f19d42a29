// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Attempts that are true: a delivery's `attempts` counts its sends, not how its audience was cut.
extension StoreContractTests {
    @Test("a broadcast claimed chunk by chunk by 4 workers at once records every delivery at attempt 1", arguments: Driver.enabled)
    func broadcastAttempts(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            for n in 1...500 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
            _ = try await store.createNotification(
                appID: "demo", id: "n", bundleID: "com.example.app", NotificationSpec(audience: .all, payload: Array("{}".utf8)), now: 10)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        // Until every device has its delivery: nothing is leased past `now`, so an
                        // empty claim with deliveries missing means another worker holds them.
                        while try await store.notification(appID: "demo", id: "n", deliveryLimit: 0)?.counts[.sent] != 500 {
                            let batch = try await store.claimDeliveries(limit: 40, now: 10, leaseMilliseconds: 60_000)
                            if batch.isEmpty {
                                await Task.yield()
                                continue
                            }
                            _ = try await store.record(batch.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 20)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let status = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 1000))
            #expect(status.counts == [.sent: 500])
            let histogram = Dictionary(grouping: status.deliveries, by: \.attempts).mapValues(\.count)
            #expect(histogram == [1: 500], "\(histogram)")
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Receipts on both drivers: per delivery received/opened/action, per notification the funnel,
/// a replay changing nothing, another app's delivery out of reach.
extension StoreContractTests {
    /// Three devices of "demo" sent one notification, recorded sent: the delivery ids.
    func sentBroadcast(_ store: any HeraldStore) async throws -> [Int64] {
        for n in 1...3 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
        _ = try await store.createNotification(
            appID: "demo", id: "n", bundleID: "com.example.app", NotificationSpec(audience: .all, payload: Array("{}".utf8)), now: 10)
        let batch = try await store.claimDeliveries(limit: 10, now: 10, leaseMilliseconds: 60_000)
        _ = try await store.record(batch.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 20)
        return batch.map(\.id).sorted()
    }

    @Test("receipts set received and opened once, count the funnel once, and reach only the app's own deliveries", arguments: Driver.enabled)
    func receipts(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            let ids = try await self.sentBroadcast(store)
            try #require(ids.count == 3)
            try await store.createApp(App(id: "other", bundleID: "com.example.other", createdAt: 1))
            let first = try await store.recordReceipts(
                appID: "demo",
                [
                    ReceiptReport(index: 0, deliveryID: ids[0], event: .received, at: 100),
                    ReceiptReport(index: 1, deliveryID: ids[1], event: .opened, action: "REPLY", at: 110),
                    ReceiptReport(index: 2, deliveryID: ids[0], event: .opened, at: 120),
                    ReceiptReport(index: 3, deliveryID: ids[0], event: .received, at: 130),
                    ReceiptReport(index: 4, deliveryID: 999_999, event: .received, at: 140),
                ], now: 200)
            #expect(first.applied.map(\.index) == [0, 1, 2])
            #expect(first.applied.allSatisfy { $0.notificationID == "n" && !$0.token.isEmpty })
            #expect(first.duplicates == [3], "a second received for the same delivery changes nothing")
            #expect(first.unknown == [4])
            #expect(try await store.receiptCounts(appID: "demo", notificationID: "n") == ReceiptCounts(received: 2, opened: 2))

            // A replay of the whole batch: nothing moves.
            let replay = try await store.recordReceipts(
                appID: "demo",
                [
                    ReceiptReport(index: 0, deliveryID: ids[0], event: .received, at: 900),
                    ReceiptReport(index: 1, deliveryID: ids[1], event: .opened, action: "ARCHIVE", at: 910),
                ], now: 1000)
            #expect(replay.applied.isEmpty && replay.duplicates == [0, 1])
            #expect(try await store.receiptCounts(appID: "demo", notificationID: "n") == ReceiptCounts(received: 2, opened: 2))

            // Another app cannot reach demo's deliveries, nor read its funnel.
            let stranger = try await store.recordReceipts(
                appID: "other", [ReceiptReport(index: 0, deliveryID: ids[2], event: .opened, at: 5)], now: 5)
            #expect(stranger.applied.isEmpty && stranger.unknown == [0])
            #expect(try await store.receiptCounts(appID: "other", notificationID: "n") == nil)

            let deliveries = try #require(try await store.notification(appID: "demo", id: "n", deliveryLimit: 10)).deliveries
            let byID = Dictionary(uniqueKeysWithValues: deliveries.map { ($0.id, $0) })
            #expect(byID[ids[0]]?.receivedAt == 100 && byID[ids[0]]?.openedAt == 120 && byID[ids[0]]?.action == nil)
            #expect(byID[ids[1]]?.receivedAt == 110 && byID[ids[1]]?.openedAt == 110 && byID[ids[1]]?.action == "REPLY", "an open implies received")
            #expect(byID[ids[2]]?.receivedAt == nil && byID[ids[2]]?.openedAt == nil)
        }
    }

    @Test("an app's receipts switch is stored, on by default", arguments: Driver.enabled)
    func receiptsSwitch(driver: Driver) async throws {
        try await driver.withStore { store async throws in
            #expect(try await store.app("demo")?.security.receipts == true)
            var security = try #require(try await store.app("demo")).security
            security.receipts = false
            #expect(try await store.setAppSecurity(appID: "demo", security))
            #expect(try await store.app("demo")?.security.receipts == false)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Testing

/// Frequency caps on plain values: the stored forms, whom a delivery counts against, and what a
/// claim admits, fails and defers.
@Suite struct FrequencyCapTests {
    @Test("caps parse and print; out-of-range limits and windows are refused")
    func forms() throws {
        let cap = try #require(FrequencyCap(limit: 3, windowSeconds: 86_400))
        #expect(cap.description == "3/86400" && FrequencyCap(cap.description) == cap)
        let perCategory = try #require(FrequencyCap(limit: 3, windowSeconds: 86_400, perCategory: true))
        #expect(FrequencyCap(perCategory.description) == perCategory)
        #expect(FrequencyCap(limit: 0, windowSeconds: 60) == nil && FrequencyCap(limit: 1001, windowSeconds: 60) == nil)
        #expect(FrequencyCap(limit: 1, windowSeconds: 59) == nil && FrequencyCap(limit: 1, windowSeconds: 2_592_001) == nil)
        let taken = NotificationCap(cap: perCategory, deferring: true, category: "news/sport")
        #expect(NotificationCap(taken.description) == taken && taken.category == "news/sport")
        #expect(NotificationCap(cap: cap, deferring: false, category: "news").category == "", "a cap per app ignores the category")
        #expect(NotificationCap("3/86400/later") == nil)
    }

    func delivery(_ device: Int64, _ pushType: PushType = .alert, cap: NotificationCap?) -> ClaimedDelivery {
        var claimed = ClaimedDelivery(
            id: device, notificationID: "n", appID: "demo", deviceID: device, token: "t", route: .production, pushType: pushType,
            topic: "x", priority: nil, expiration: nil, collapseID: nil, payload: [], attempts: 1)
        claimed.frequencyCap = cap
        return claimed
    }

    @Test("alerts count per user (a device without one by itself), per category when asked; other push types never")
    func keys() throws {
        let cap = try #require(FrequencyCap(limit: 3, windowSeconds: 86_400, perCategory: true))
        let batch = [
            self.delivery(1, cap: NotificationCap(cap: cap, deferring: false, category: "news")),
            self.delivery(2, cap: NotificationCap(cap: cap, deferring: false, category: "news")),
            self.delivery(3, .background, cap: NotificationCap(cap: cap, deferring: false, category: "news")),
            self.delivery(4, cap: nil),
        ]
        #expect(FrequencyCap.devices(batch) == [1, 2])
        #expect(FrequencyCap.devices([self.delivery(1, cap: nil)]).isEmpty, "no cap, nothing to read")
        let keys = FrequencyCap.keys(batch, users: [1: "ann"])
        #expect(
            keys == [
                .init(index: 0, key: .init(appID: "demo", subject: "u:ann", category: "news")),
                .init(index: 1, key: .init(appID: "demo", subject: "d:2", category: "news")),
            ])
        #expect(keys[0].key.lockKey != keys[1].key.lockKey)
    }

    @Test("a claim admits up to the limit in the rolling window, then fails or defers until the oldest alert leaves it")
    func decide() throws {
        let cap = try #require(FrequencyCap(limit: 2, windowSeconds: 3600))
        let fail = NotificationCap(cap: cap, deferring: false, category: nil)
        let wait = NotificationCap(cap: cap, deferring: true, category: nil)
        let batch = [self.delivery(1, cap: fail), self.delivery(2, cap: fail), self.delivery(3, cap: wait), self.delivery(4, cap: fail)]
        let ann = FrequencyCap.Key(appID: "demo", subject: "u:ann", category: "")
        let bob = FrequencyCap.Key(appID: "demo", subject: "u:bob", category: "")
        let keys = [ann, ann, ann, bob].enumerated().map { FrequencyCap.Capped(index: $0.offset, key: $0.element) }
        // Ann had one alert 10 minutes ago and one older than the window.
        let now: Int64 = 10_000_000
        let decision = FrequencyCap.decide(batch, keys: keys, history: [ann: [now - 600_000, now - 3_700_000]], now: now)
        #expect(decision.outcomes == [1: .capped, 2: .deferred(until: now - 600_000 + 3_600_000)])
        #expect(decision.history == [.init(key: ann, times: [now - 600_000, now]), .init(key: bob, times: [now])])
        #expect(FrequencyCap.inClaimOrder(keys) == [ann, bob], "each person once, by their first delivery")
        #expect(FrequencyCap.inClaimOrder([.init(index: 0, key: bob), .init(index: 1, key: ann), .init(index: 2, key: bob)]) == [bob, ann])
        #expect(FrequencyCap.decode(FrequencyCap.encode([1, 2, 3])) == [1, 2, 3])
        let merged = SetAside.merge(held: [0: 5], capped: decision.outcomes, now: now)
        #expect(merged[0] == SetAside(state: .pending, nextAttemptAt: 5, reason: QuietHours.reason))
        #expect(merged[1] == SetAside(state: .failed, nextAttemptAt: now, reason: FrequencyCap.reason))
        #expect(merged[2] == SetAside(state: .pending, nextAttemptAt: now + 3_000_000, reason: FrequencyCap.reason))
        #expect(QuietHours.apiState(.pending, reason: FrequencyCap.reason) == "held")
    }

    @Test("devices without a user are stored 64 to a row: read from it, and written back with the others of it (stale ones dropped)")
    func rowFulls() throws {
        let ann = FrequencyCap.Key(appID: "demo", subject: "u:ann", category: "")
        let d5 = FrequencyCap.Key(appID: "demo", subject: "d:5", category: "")
        let d63 = FrequencyCap.Key(appID: "demo", subject: "d:63", category: "")
        let d64 = FrequencyCap.Key(appID: "demo", subject: "d:64", category: "")
        let rowFull0 = FrequencyCap.Key(appID: "demo", subject: "b:0", category: "")
        let rowFull1 = FrequencyCap.Key(appID: "demo", subject: "b:1", category: "")
        #expect(FrequencyCap.row(of: ann) == ann && FrequencyCap.row(of: d5) == rowFull0 && FrequencyCap.row(of: d64) == rowFull1)
        #expect(FrequencyCap.rows(of: [d5, ann, d64, d63]) == [rowFull0, ann, rowFull1], "each row once, by its first person")
        let now: Int64 = 40 * 86_400_000
        // Device 2 of row-full 0 had its last alert 31 days ago (older than any window); device
        // 9's is recent; device 5 has an alert in the row too.
        let stored = [ann: "1000,2000", rowFull0: "2:\(now - 31 * 86_400_000);5:\(now - 60_000);9:\(now - 1000)"]
        #expect(
            FrequencyCap.history(stored: stored) == [
                ann: [1000, 2000], d5: [now - 60_000], .init(appID: "demo", subject: "d:2", category: ""): [now - 31 * 86_400_000],
                .init(appID: "demo", subject: "d:9", category: ""): [now - 1000],
            ])
        let written = FrequencyCap.written(
            [
                .init(key: d63, times: [now]), .init(key: ann, times: [2000, now]), .init(key: d5, times: [now - 60_000, now]),
                .init(key: d64, times: [now]),
            ],
            stored: stored, now: now)
        #expect(
            written == [
                .init(key: rowFull0, text: "5:\(now - 60_000),\(now);9:\(now - 1000);63:\(now)"),
                .init(key: ann, text: "2000,\(now)"),
                .init(key: rowFull1, text: "64:\(now)"),
            ])
    }
}

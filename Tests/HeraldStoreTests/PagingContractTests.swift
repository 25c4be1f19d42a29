// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import HeraldTesting
import Testing

/// Paging, on every driver: a walk page by page meets every row that existed when it began
/// exactly once, whatever shares a millisecond and whatever is inserted meanwhile.
@Suite(.heavy) struct PagingContractTests {
    func token(_ n: Int) throws -> DeviceToken {
        let hex = String(n, radix: 16)
        return try DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
    }

    func send(_ store: any HeraldStore, id: String, now: Int64, audience: Audience = .all) async throws -> CreatedNotification {
        try await store.createNotification(
            appID: "demo", id: id, bundleID: "com.example.app", NotificationSpec(audience: audience, payload: Array("{}".utf8)), now: now
        )
    }

    /// Every notification of the app, walked `limit` at a time from each page's last position;
    /// `between` runs after each page.
    func walk(
        _ store: any HeraldStore, limit: Int, before: Int64? = nil, between: (NotificationPosition) async throws -> Void = { _ in }
    ) async throws -> [NotificationSummary] {
        var seen: [NotificationSummary] = []
        var after: NotificationPosition?
        for _ in 0..<10_000 {
            let page = try await store.notifications(appID: "demo", limit: limit, before: before, after: after)
            seen += page
            guard let last = page.last, page.count == limit else { return seen }
            let position = NotificationPosition(createdAt: last.createdAt, id: last.id)
            after = position
            try await between(position)
        }
        Issue.record("the walk did not end")
        return seen
    }

    @Test("notifications created in the same millisecond are walked page by page, none skipped or repeated", arguments: Driver.enabled)
    func sameMillisecond(driver: Driver) async throws {
        try await driver.withStore { store in
            // 72 in one millisecond, between a few earlier and later ones.
            var ids: [String] = []
            for _ in 0..<72 { ids.append(try await self.send(store, id: UUIDText.random(), now: 1_000).id) }
            for n in 0..<3 { ids.append(try await self.send(store, id: "early-\(n)", now: 999).id) }
            for n in 0..<3 { ids.append(try await self.send(store, id: "late-\(n)", now: 1_001).id) }
            for limit in [1, 5, 7, 78, 500] {
                let walked = try await self.walk(store, limit: limit)
                #expect(walked.count == ids.count, "limit \(limit)")
                #expect(Set(walked.map(\.id)) == Set(ids), "limit \(limit)")
                let keys = walked.map { ($0.createdAt, $0.id) }
                #expect(zip(keys, keys.dropFirst()).allSatisfy { $0 > $1 }, "newest first, a total order (limit \(limit))")
            }
            // `before` still filters by time, and pages with a position too.
            let older = try await self.walk(store, limit: 4, before: 1_001)
            #expect(Set(older.map(\.id)) == Set(ids.filter { !$0.hasPrefix("late-") }))
        }
    }

    @Test("a walk meets every notification there before it, while others are inserted concurrently and between pages", arguments: Driver.enabled)
    func concurrentInserts(driver: Driver) async throws {
        try await driver.withStore { store in
            var existing: Set<String> = []
            for n in 0..<60 { existing.insert(try await self.send(store, id: "n-\(n / 10)-\(UUIDText.random())", now: 1_000 + Int64(n % 3)).id) }
            let walked = try await withThrowingTaskGroup(of: [String].self) { group in
                // Six writers inserting into the same milliseconds as the walk, and later ones.
                for writer in 0..<6 {
                    group.addTask {
                        for n in 0..<12 { _ = try await self.send(store, id: UUIDText.random(), now: 1_000 + Int64((writer + n) % 4)) }
                        return []
                    }
                }
                group.addTask {
                    // Between pages, new ones at the walk's very millisecond, with ids on both
                    // sides of its position.
                    try await self.walk(store, limit: 4) { position in
                        for prefix in ["0", "z", position.id] {
                            _ = try await self.send(store, id: prefix + "-" + UUIDText.random(), now: position.createdAt)
                        }
                    }.map(\.id)
                }
                var all: [String] = []
                for try await ids in group { all += ids }
                return all
            }
            #expect(walked.count == Set(walked).count, "nothing repeated")
            #expect(existing.subtracting(walked).isEmpty, "nothing that existed before the walk skipped: \(existing.subtracting(walked).count) were")
        }
    }

    @Test("devices are walked page by page in id order, with their filters, past any single page's size", arguments: Driver.enabled)
    func devices(driver: Driver) async throws {
        try await driver.withStore { store in
            var ids: [Int64] = []
            for n in 1...30 {
                ids.append(
                    try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n), tags: n % 3 == 0 ? ["third"] : []), now: 1)
                        .id)
            }
            func walk(_ query: DeviceQuery) async throws -> [Int64] {
                var query = query
                var seen: [Int64] = []
                for _ in 0..<1_000 {
                    let page = try await store.devices(appID: "demo", query).map(\.id)
                    seen += page
                    guard let last = page.last, page.count == query.limit else { return seen }
                    query.afterID = last
                }
                Issue.record("the walk did not end")
                return seen
            }
            #expect(try await walk(DeviceQuery(limit: 4)) == ids)
            #expect(try await walk(DeviceQuery(tag: "third", limit: 2)) == ids.enumerated().filter { ($0.offset + 1) % 3 == 0 }.map(\.element))
            #expect(try await store.devices(appID: "demo", DeviceQuery(limit: 1_000)).count == 30)
        }
    }

    @Test("a device's deliveries and a webhook's messages are walked page by page, newest first", arguments: Driver.enabled)
    func deliveriesAndMessages(driver: Driver) async throws {
        try await driver.withStore { store in
            let device = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1)), now: 1)
            for n in 0..<9 { _ = try await self.send(store, id: "n\(n)", now: 10) }
            var claimed: [ClaimedDelivery] = []
            for _ in 0..<20 {
                let batch = try await store.claimDeliveries(limit: 100, now: 20, leaseMilliseconds: 1_000)
                if batch.isEmpty { break }
                claimed += batch
            }
            #expect(claimed.count == 9 && claimed.allSatisfy { $0.deviceID == device.id })
            try await store.record(claimed.map { DeliveryResult($0, outcome: .sent(apnsID: nil), latencyMilliseconds: 1) }, now: 21)
            var deliveries: [DeliveryRecord] = []
            var beforeID: Int64?
            for _ in 0..<1_000 {
                let page = try await store.deliveries(appID: "demo", token: try self.token(1).hex, limit: 2, beforeID: beforeID)
                deliveries += page
                guard let last = page.last, page.count == 2 else { break }
                beforeID = last.id
            }
            #expect(deliveries.count == 9 && Set(deliveries.map(\.notificationID)).count == 9)
            #expect(zip(deliveries, deliveries.dropFirst()).allSatisfy { $0.id > $1.id })

            try await store.createWebhook(
                Webhook(id: "wh_a", appID: "demo", url: "https://example.com/a", sealedSecret: [1], types: [.failed], createdAt: 5)
            )
            try await store.enqueueWebhookMessages(
                (0..<7).map { WebhookMessage(webhookID: "wh_a", body: [0x7B, 0x7D], events: $0 + 1) }, now: 10, expiresAt: 10_000)
            var messages: [WebhookMessageRecord] = []
            beforeID = nil
            for _ in 0..<1_000 {
                let page = try await store.webhookMessages(webhookID: "wh_a", limit: 3, beforeID: beforeID)
                messages += page
                guard let last = page.last, page.count == 3 else { break }
                beforeID = last.id
            }
            #expect(messages.map(\.events) == [7, 6, 5, 4, 3, 2, 1])
        }
    }

    @Test("a token send counts the listed tokens that are unknown or inactive, each once", arguments: Driver.enabled)
    func tokenCounts(driver: Driver) async throws {
        try await driver.withStore { store in
            for n in 1...4 { _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(n)), now: 1) }
            // Device 4 invalidated by APNs; and token 1 in another app, where it is inactive
            // while it stays active in this one.
            try await store.createApp(App(id: "other", bundleID: "com.example.other", createdAt: 1))
            _ = try await store.register(appID: "other", DeviceRegistration(token: try self.token(1)), now: 1)
            _ = try await self.send(store, id: "probe", now: 3, audience: .tokens([try self.token(4).hex]))
            _ = try await store.createNotification(
                appID: "other", id: "other-probe", bundleID: "com.example.other",
                NotificationSpec(audience: .tokens([try self.token(1).hex]), payload: Array("{}".utf8)), now: 3)
            let claimed = try await store.claimDeliveries(limit: 10, now: 4, leaseMilliseconds: 1_000)
            try await store.record(
                claimed.map {
                    DeliveryResult(
                        $0, outcome: .failed(status: 410, reason: "Unregistered", invalidate: true, timestamp: nil), latencyMilliseconds: 1)
                },
                now: 5
            )
            let listed = try [1, 2, 4, 5, 6, 2, 6].map { try self.token($0).hex }
            let created = try await self.send(store, id: "n", now: 10, audience: .tokens(listed))
            #expect(created.deliveries == 2)
            #expect(created.unknownTokens == 2, "5 and 6, each once")
            #expect(created.inactiveTokens == 1)
            let elsewhere = try await store.createNotification(
                appID: "other", id: "o", bundleID: "com.example.other",
                NotificationSpec(audience: .tokens([try self.token(1).hex]), payload: Array("{}".utf8)), now: 10)
            #expect(elsewhere.deliveries == 0 && elsewhere.inactiveTokens == 1, "token 1 is inactive in the other app only")
            let everyone = try await self.send(store, id: "m", now: 10)
            #expect(everyone.unknownTokens == nil && everyone.inactiveTokens == nil, "only a token audience is counted")
            // A listed device the targeting leaves out (another environment) is neither delivered
            // to nor counted as unknown or inactive.
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(7), environment: .development), now: 11)
            var development = NotificationSpec(audience: .tokens(try [1, 7, 8, 4].map { try self.token($0).hex }), payload: Array("{}".utf8))
            development.environment = .development
            let filtered = try await store.createNotification(appID: "demo", id: "s", bundleID: "com.example.app", development, now: 12)
            #expect(filtered.deliveries == 1, "only device 7 is in development")
            #expect(filtered.unknownTokens == 1 && filtered.inactiveTokens == 1)
            let sent = try await store.claimDeliveries(limit: 10, now: 13, leaseMilliseconds: 1_000)
            #expect(sent.filter { $0.notificationID == "s" }.map(\.token) == [try self.token(7).hex])
            // Device 4 registered again is active again: delivered to, no longer counted inactive.
            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(4)), now: 14)
            let again = try await self.send(store, id: "r", now: 15, audience: .tokens(listed))
            #expect(again.deliveries == 3)
            #expect(again.unknownTokens == 2 && again.inactiveTokens == 0)
            // An empty list lists no token (the API refuses one; the store still counts it right).
            let none = try await self.send(store, id: "e", now: 16, audience: .tokens([]))
            #expect(none.deliveries == 0 && none.unknownTokens == 0 && none.inactiveTokens == 0)
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Testing

/// How both drivers record a batch of outcomes, on plain values: no database.
@Suite struct RecordPlanTests {
    /// The rows a plan creates, as (id, state, chunk).
    struct Rows: NewDeliveryRows {
        var rows: [(id: Int64, state: DeliveryState, attempts: Int, chunk: Int64?)] = []

        mutating func add(
            id: Int64, notificationID: String, deviceID: Int64, token: String, environment: String, pushType: String, topic: String,
            state: DeliveryState, attempts: Int, nextAttemptAt: Int64, apnsID: String?, status: Int?, reason: String?, latency: Int64?, chunk: Int64?
        ) {
            self.rows.append((id, state, attempts, chunk))
        }
    }

    /// Delivery `id` as claimed: from chunk `chunk` at attempt `attempts`, or an existing row.
    func claimed(_ id: Int64, chunk: Int64? = nil, attempts: Int = 1) -> ClaimedDelivery {
        ClaimedDelivery(
            id: id, notificationID: "n", appID: "demo", deviceID: id * 10, token: "t\(id)", route: .production, pushType: .alert,
            topic: "com.example", priority: nil, expiration: nil, collapseID: nil, payload: [], attempts: attempts, chunk: chunk
        )
    }

    @Test("a chunk's deliveries are created with their outcome; the others are written, accepted ones together, the rest in order")
    func grouping() {
        let results = [
            DeliveryResult(self.claimed(1, chunk: 7), outcome: .sent(apnsID: "a"), latencyMilliseconds: 3),
            DeliveryResult(self.claimed(2), outcome: .retry(status: 429, reason: "TooManyRequests", retryAt: 99), latencyMilliseconds: 4),
            DeliveryResult(self.claimed(3), outcome: .sent(apnsID: nil), latencyMilliseconds: 5),
            DeliveryResult(
                self.claimed(4, chunk: 7), outcome: .retry(status: 500, reason: "InternalServerError", retryAt: 99), latencyMilliseconds: 6),
            DeliveryResult(
                self.claimed(5, chunk: 8), outcome: .failed(status: 400, reason: "BadTopic", invalidate: false, timestamp: nil),
                latencyMilliseconds: 7),
            DeliveryResult(
                self.claimed(6), outcome: .failed(status: 400, reason: "BadDeviceToken", invalidate: true, timestamp: nil), latencyMilliseconds: 8),
            DeliveryResult(deliveryID: 9, outcome: .sent(apnsID: "b"), latencyMilliseconds: 9),
        ]
        var rows = Rows()
        let plan = RecordPlan(results, now: 1000, creating: &rows)
        #expect(rows.rows.map(\.id) == [1, 4, 5])
        #expect(rows.rows.map(\.state) == [.sent, .pending, .failed])
        #expect(plan.createsRows)
        #expect(plan.retriedChunkDeliveries == [4])
        #expect(plan.sent.map(\.deliveryID) == [3, 9])
        #expect(plan.sent.map(\.attempt) == [1, nil])
        #expect(plan.sent.map(\.apnsID) == [nil, "b"])
        #expect(plan.singles.map(\.deliveryID) == [2, 6])
        #expect(plan.singles.map(\.updatesRow) == [true, true])
    }

    @Test("each chunk loses the deliveries whose rows were created, at the attempt answered; chunks in id order")
    func chunkEnds() {
        let results = [
            DeliveryResult(self.claimed(1, chunk: 9, attempts: 2), outcome: .sent(apnsID: nil), latencyMilliseconds: 1),
            DeliveryResult(self.claimed(2, chunk: 3), outcome: .sent(apnsID: nil), latencyMilliseconds: 1),
            DeliveryResult(self.claimed(3, chunk: 9, attempts: 2), outcome: .sent(apnsID: nil), latencyMilliseconds: 1),
        ]
        var rows = Rows()
        let plan = RecordPlan(results, now: 1000, creating: &rows)
        #expect(
            plan.chunkEnds(created: [1, 2, 3]) == [
                RecordPlan.ChunkEnd(chunk: 3, attempt: 1, created: 1), RecordPlan.ChunkEnd(chunk: 9, attempt: 2, created: 2),
            ]
        )
        // A row fenced out or skipped was not created: its chunk keeps it.
        #expect(
            plan.chunkEnds(created: [3]) == [
                RecordPlan.ChunkEnd(chunk: 3, attempt: 1, created: 0), RecordPlan.ChunkEnd(chunk: 9, attempt: 2, created: 1),
            ]
        )
        #expect(rows.rows.map(\.attempts) == [2, 1, 2])
    }

    @Test("nothing of a chunk: no rows, no chunk ends")
    func noChunk() {
        var rows = Rows()
        let plan = RecordPlan([DeliveryResult(deliveryID: 1, outcome: .sent(apnsID: nil), latencyMilliseconds: 1)], now: 1, creating: &rows)
        #expect(!plan.createsRows)
        #expect(plan.chunkEnds(created: [1]).isEmpty)
        #expect(plan.retriedChunkDeliveries.isEmpty)
    }

    @Test("a chunk delivery's failure that invalidates its device is kept for the device alone; only an applied outcome invalidates")
    func invalidation() throws {
        let results = [
            DeliveryResult(
                self.claimed(1, chunk: 7), outcome: .failed(status: 410, reason: "Unregistered", invalidate: true, timestamp: 5),
                latencyMilliseconds: 1),
            DeliveryResult(
                self.claimed(2), outcome: .failed(status: 410, reason: "Unregistered", invalidate: true, timestamp: 5), latencyMilliseconds: 1),
            DeliveryResult(
                self.claimed(3), outcome: .failed(status: 400, reason: "BadTopic", invalidate: false, timestamp: nil), latencyMilliseconds: 1),
            DeliveryResult(self.claimed(4), outcome: .retry(status: nil, reason: "timeout", retryAt: 9), latencyMilliseconds: 1),
        ]
        var rows = Rows()
        let plan = RecordPlan(results, now: 1000, creating: &rows)
        #expect(plan.singles.map(\.deliveryID) == [1, 2, 3, 4])
        #expect(plan.singles.map(\.updatesRow) == [false, true, true, true])
        let applied: Set<Int64> = [1, 3, 4]
        #expect(plan.singles.map { RecordPlan.invalidates($0, applied: applied) } == [true, false, false, false])
    }
}

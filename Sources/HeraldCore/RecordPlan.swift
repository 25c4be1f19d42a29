// SPDX-License-Identifier: Apache-2.0

/// How a batch of outcomes is recorded, for both SQL drivers: which rows are created, which
/// accepted deliveries are written in one statement, which outcomes are written one by one and
/// in what order, when a chunk is done, and which failures deactivate their device. Plain values
/// in, decisions out; the drivers hold the SQL, and run it in this order:
///
/// 1. the rows ``NewDeliveryRows/addCreated(_:now:)`` added (a chunk's deliveries, created with
///    their outcome, fenced by their chunk's attempt); then ``retriedChunkDeliveries`` of a
///    notification cancelled meanwhile are failed; then ``chunkEnds``;
/// 2. ``sent``, in one statement;
/// 3. ``singles``, in the order of the results, each fenced by its attempt;
/// 4. ``uncertain``: of those applied, each counts one more unknown outcome.
package struct RecordPlan: Sendable, Hashable {
    /// A delivery APNs accepted, recorded with the others in one statement.
    package struct Sent: Sendable, Hashable {
        package var deliveryID: Int64
        package var apnsID: String?
        package var latencyMilliseconds: Int64
        /// The claim it answers; nil: unfenced.
        package var attempt: Int?
    }

    /// An outcome written on its own: a retry, or a failure (which may deactivate its device).
    package struct Single: Sendable, Hashable {
        package var deliveryID: Int64
        package var outcome: DeliveryResult.Outcome
        package var latencyMilliseconds: Int64
        /// The claim it answers; nil: unfenced.
        package var attempt: Int?
        /// False for a chunk's delivery, whose row step 1 created with this outcome already.
        package var updatesRow: Bool
    }

    /// A chunk some of whose deliveries the batch created: it is done if its claim is still
    /// attempt `attempt` and `recorded` covers its size (with what earlier attempts recorded).
    package struct ChunkEnd: Sendable, Hashable {
        package var chunk: Int64
        package var attempt: Int
        package var recorded: Int

        package init(chunk: Int64, attempt: Int, recorded: Int) {
            self.chunk = chunk
            self.attempt = attempt
            self.recorded = recorded
        }
    }

    /// Whether step 1 creates any rows.
    package private(set) var createsRows: Bool
    /// Chunk deliveries told to retry: created pending, unless their notification was
    /// cancelled meanwhile.
    package private(set) var retriedChunkDeliveries: [Int64]
    /// In chunk id order (the order PostgreSQL locks them in).
    package private(set) var chunkEnds: [ChunkEnd]
    package private(set) var sent: [Sent]
    package private(set) var singles: [Single]
    /// Deliveries whose send had an unknown outcome (``DeliveryResult/outcomeUncertain``): those
    /// whose outcome was applied count one more.
    package private(set) var uncertain: [Int64]

    /// Plans the recording of `results` at `now`, adding to `created` the rows it creates.
    package init(_ results: [DeliveryResult], now: Int64, creating created: inout some NewDeliveryRows) {
        let chunks = created.addCreated(results, now: now)
        self.createsRows = !chunks.isEmpty
        self.chunkEnds = chunks.map { ChunkEnd(chunk: $0.key, attempt: $0.value.attempt, recorded: $0.value.count) }.sorted { $0.chunk < $1.chunk }
        self.retriedChunkDeliveries = results.retriedChunkDeliveries
        self.sent = []
        self.singles = []
        self.uncertain = results.compactMap { $0.outcomeUncertain ? $0.deliveryID : nil }
        for result in results {
            let isCreated = result.created != nil
            switch result.outcome {
            case .sent(let apnsID):
                guard !isCreated else { continue }
                self.sent.append(
                    Sent(deliveryID: result.deliveryID, apnsID: apnsID, latencyMilliseconds: result.latencyMilliseconds, attempt: result.attempt))
            case .retry:
                guard !isCreated else { continue }
                self.singles.append(Single(result, updatesRow: true))
            case .failed(_, _, let invalidate, _):
                // A created failure has its row; it is here only for its device.
                guard !isCreated || invalidate else { continue }
                self.singles.append(Single(result, updatesRow: !isCreated))
            }
        }
    }

    /// Whether `single`'s failure deactivates its device, its outcome written or not
    /// (`applied`): fenced out, a newer claim answers for the delivery, and its device.
    /// The deliveries of ``uncertain`` whose outcome was `applied` (not fenced out).
    package func uncertain(applied: Set<Int64>) -> [Int64] {
        self.uncertain.filter(applied.contains)
    }

    package static func invalidates(_ single: Single, applied: Set<Int64>) -> Bool {
        guard case .failed(_, _, true, _) = single.outcome else { return false }
        return applied.contains(single.deliveryID)
    }
}

extension RecordPlan.Single {
    init(_ result: DeliveryResult, updatesRow: Bool) {
        self.init(
            deliveryID: result.deliveryID, outcome: result.outcome, latencyMilliseconds: result.latencyMilliseconds, attempt: result.attempt,
            updatesRow: updatesRow
        )
    }
}

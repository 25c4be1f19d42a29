// SPDX-License-Identifier: Apache-2.0

/// How a batch of outcomes is recorded, for both SQL drivers: which rows are created, which
/// accepted deliveries are written in one statement, which outcomes are written one by one and
/// in what order, when a chunk is done, and which failures deactivate their device. Plain values
/// in, decisions out; the drivers hold the SQL, and run it in this order:
///
/// 1. the rows ``NewDeliveryRows/addCreated(_:now:)`` added (a chunk's deliveries, created with
///    their outcome, fenced by their chunk's attempt); then ``retriedChunkDeliveries`` of a
///    notification cancelled meanwhile are failed; then ``chunkEnds(created:)``, from the ids
///    step 1 created;
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

    /// A chunk some of whose deliveries the batch created, at attempt `attempt`: `created` of
    /// them have their rows now, and leave the chunk. A chunk's size counts its deliveries still
    /// without a row (at its current attempt), so the chunk is done when that reaches 0, whether
    /// its deliveries were recorded in one call or in several (the engine records a claim's
    /// whole batch at once; the store does not count on it). A chunk claimed again since is
    /// left to its newer claim.
    package struct ChunkEnd: Sendable, Hashable {
        package var chunk: Int64
        package var attempt: Int
        package var created: Int

        package init(chunk: Int64, attempt: Int, created: Int) {
            self.chunk = chunk
            self.attempt = attempt
            self.created = created
        }
    }

    /// Whether step 1 creates any rows.
    package private(set) var createsRows: Bool
    /// Chunk deliveries told to retry: created pending, unless their notification was
    /// cancelled meanwhile.
    package private(set) var retriedChunkDeliveries: [Int64]
    /// Each chunk of the rows step 1 may create, with the attempt answered, and each of those
    /// rows' chunk.
    private var chunks: [Int64: Int]
    private var chunkOfRow: [Int64: Int64]
    package private(set) var sent: [Sent]
    package private(set) var singles: [Single]
    /// Deliveries whose send had an unknown outcome (``DeliveryResult/outcomeUncertain``): those
    /// whose outcome was applied count one more.
    package private(set) var uncertain: [Int64]

    /// Plans the recording of `results` at `now`, adding to `created` the rows it creates.
    package init(_ results: [DeliveryResult], now: Int64, creating created: inout some NewDeliveryRows) {
        (self.chunks, self.chunkOfRow) = created.addCreated(results, now: now)
        self.createsRows = !self.chunks.isEmpty
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

    /// What each chunk of step 1 loses, given the ids step 1 `created` (rows fenced out or
    /// skipped are not among them); in chunk id order (the order PostgreSQL locks them in).
    package func chunkEnds(created: Set<Int64>) -> [ChunkEnd] {
        var counts: [Int64: Int] = [:]
        for id in created { if let chunk = self.chunkOfRow[id] { counts[chunk, default: 0] += 1 } }
        return self.chunks.map { ChunkEnd(chunk: $0.key, attempt: $0.value, created: counts[$0.key] ?? 0) }.sorted { $0.chunk < $1.chunk }
    }

    /// The deliveries of ``uncertain`` whose outcome was `applied` (not fenced out).
    package func uncertain(applied: Set<Int64>) -> [Int64] {
        self.uncertain.filter(applied.contains)
    }

    /// Whether `single`'s failure deactivates its device, its outcome written or not
    /// (`applied`): fenced out, a newer claim answers for the delivery, and its device.
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

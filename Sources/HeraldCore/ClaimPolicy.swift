// SPDX-License-Identifier: Apache-2.0

/// How one claim of at most `limit` deliveries is filled, for both SQL drivers: the order of its
/// steps and the room each has, how far an audience chunk goes, and what becomes of a chunk whose
/// lease ran out. Plain values in, decisions out; the drivers hold the SQL.
///
/// A claim is a small state machine: the driver asks ``nextStep(claimed:)`` what to do, does it,
/// and asks again with how many deliveries it now holds, until it gets nil.
package struct ClaimPolicy: Sendable, Hashable {
    /// What a claim does next.
    package enum Step: Sendable, Hashable {
        /// Claim up to `room` deliveries that exist and are due.
        case claimDue(room: Int)
        /// Claim chunks again whose lease ran out, then expand due notifications' audiences.
        case expand
    }

    private enum State: Sendable, Hashable {
        case start
        case claimedRetries
        case expanded
        case done
    }

    /// The most deliveries the claim hands out.
    package let limit: Int
    private var state: State = .start

    package init(limit: Int) {
        self.limit = limit
    }

    /// The next step once `claimed` deliveries are claimed; nil when the claim is done.
    ///
    /// First the deliveries that exist and are due, half the batch at most (at least one), so a
    /// backlog of retries cannot starve new notifications; then chunks and new audiences; then
    /// due deliveries again, in whatever room is left.
    package mutating func nextStep(claimed: Int) -> Step? {
        switch self.state {
        case .start:
            self.state = .claimedRetries
            return .claimDue(room: max(1, self.limit / 2))
        case .claimedRetries:
            guard self.hasRoom(claimed: claimed) else { return self.finish() }
            self.state = .expanded
            return .expand
        case .expanded:
            guard self.hasRoom(claimed: claimed) else { return self.finish() }
            self.state = .done
            return .claimDue(room: self.room(claimed: claimed))
        case .done:
            return nil
        }
    }

    /// The most batches one claim takes in a row when delivery policies set every delivery of
    /// each aside (held by quiet hours, throttled, over a frequency cap). Such a batch says nothing
    /// of what else is due: handed back empty, it read as "nothing due", and the engine's worker
    /// waited a poll interval (a claim loop stopped) with deliveries still due behind it.
    package static let setAsideRounds = 64

    /// Claims batches with `batch` until one keeps a delivery or none was claimed (nothing due),
    /// at most ``setAsideRounds`` of them. `batch` answers how many deliveries it claimed and
    /// which of them the policies kept. Every delivery set aside leaves the due ones (failed, or
    /// pending until a time after the claim's), so each batch claims ones no earlier batch did.
    package static func claimPastSetAside(
        _ batch: () async throws -> (claimed: Int, kept: [ClaimedDelivery])
    ) async throws -> [ClaimedDelivery] {
        for _ in 0..<Self.setAsideRounds {
            let (claimed, kept) = try await batch()
            if !kept.isEmpty || claimed == 0 { return kept }
        }
        // Still all set aside: what is left is due, and the caller's next claim takes it.
        return []
    }

    private mutating func finish() -> Step? {
        self.state = .done
        return nil
    }

    /// Whether a batch holding `claimed` deliveries has room for more.
    package func hasRoom(claimed: Int) -> Bool {
        claimed < self.limit
    }

    /// How many more deliveries a batch holding `claimed` may take: the size of the next
    /// audience chunk, or of a chunk claimed again.
    package func room(claimed: Int) -> Int {
        self.limit - claimed
    }

    // MARK: Expanding audiences

    /// Whether to expand another chunk, with `claimed` deliveries in the batch and `expanded`
    /// audience members expanded by this claim so far (a local-time notification's are created
    /// pending, outside the batch: this bounds the work of one claim all the same).
    package func mayExpand(claimed: Int, expanded: Int) -> Bool {
        self.hasRoom(claimed: claimed) && expanded < self.limit
    }

    /// Where a notification's expansion goes on after a chunk that asked for `asked` devices
    /// found `found`, the last of them `last`: after it, or nil when the audience is exhausted
    /// (fewer found than asked for).
    package static func expandAfter(found: Int, asked: Int, last: Int64) -> Int64? {
        Self.isExhausted(found: found, asked: asked) ? nil : last
    }

    /// Whether a chunk that asked for `asked` devices and found `found` was the audience's last.
    package static func isExhausted(found: Int, asked: Int) -> Bool {
        found < asked
    }

    // MARK: Chunks whose lease ran out

    /// What becomes of a chunk whose lease ran out.
    package enum Reclaim: Sendable, Hashable {
        /// Nothing of it is left to send: the chunk ends (and an encrypted notification may lose
        /// its plaintext). With `recordCancelled`, the devices found are first recorded as failed
        /// ("Cancelled"), never sent.
        case end(recordCancelled: Bool)
        /// Its devices through `through` are claimed as attempt `attempts` of the chunk. With
        /// `split`, those after `through` up to the chunk's old end become a chunk of their own,
        /// due now, at the chunk's previous attempt.
        case claim(through: Int64, attempts: Int, split: Bool)
    }

    /// How many devices to look for in a chunk claimed again: the room left, or all of them
    /// for a cancelled notification (they are recorded, not sent).
    package func reclaimLimit(claimed: Int, cancelled: Bool) -> Int {
        cancelled ? Int(Int32.max) : self.room(claimed: claimed)
    }

    /// The fate of a chunk at attempt `attempts`, ending at device `through`, claimed again
    /// when the batch held `claimed`: `found` of its devices have no delivery yet (nil when its
    /// notification is gone or its audience cannot be read), the last of them `lastFound`.
    package func reclaim(found: Int?, lastFound: Int64?, through: Int64, attempts: Int, cancelled: Bool, claimed: Int) -> Reclaim {
        guard let found else { return .end(recordCancelled: false) }
        if cancelled || found == 0 { return .end(recordCancelled: found > 0) }
        // More than there is room for: the rest becomes a chunk of its own.
        let end = found < self.room(claimed: claimed) ? through : (lastFound ?? through)
        return .claim(through: end, attempts: attempts + 1, split: end < through)
    }

    /// The attempt of a chunk when first claimed.
    package static let firstAttempt = 1

    // MARK: Encrypted notifications

    /// The devices whose public key the claimed deliveries need (those of encrypted
    /// notifications, and every Web Push subscription: its keys and endpoint, ``WebSubscription``),
    /// read as they are now.
    package static func sealedDevices(_ claimed: [ClaimedDelivery]) -> [Int64] {
        claimed.compactMap { Self.needsKey($0) ? $0.deviceID : nil }
    }

    /// Gives each claimed delivery that needs it its device's key from `keys` (none if the
    /// device has none now).
    package static func attach(_ keys: [Int64: DevicePublicKey], to claimed: inout [ClaimedDelivery]) {
        for index in claimed.indices where Self.needsKey(claimed[index]) {
            claimed[index].publicKey = keys[claimed[index].deviceID]
        }
    }

    private static func needsKey(_ delivery: ClaimedDelivery) -> Bool {
        delivery.placeholder != nil || delivery.route == .webpush
    }
}

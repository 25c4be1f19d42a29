// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore
import Testing

/// The claim policy both drivers follow, on plain values: no database.
@Suite struct ClaimPolicyTests {
    /// The steps a claim of `limit` takes when each step leaves the batch holding the next of
    /// `claimedAfter` (how many deliveries it holds after that step).
    func steps(limit: Int, claimedAfter: [Int]) -> [ClaimPolicy.Step] {
        var policy = ClaimPolicy(limit: limit)
        var steps: [ClaimPolicy.Step] = []
        var claimed = 0
        while let step = policy.nextStep(claimed: claimed) {
            steps.append(step)
            claimed = claimedAfter[steps.count - 1]
        }
        return steps
    }

    @Test("retries get half the batch, then chunks and new audiences, then due deliveries in the room left")
    func stepsWithRoom() {
        #expect(self.steps(limit: 100, claimedAfter: [50, 70, 100]) == [.claimDue(room: 50), .expand, .claimDue(room: 30)])
        #expect(self.steps(limit: 100, claimedAfter: [3, 3, 3]) == [.claimDue(room: 50), .expand, .claimDue(room: 97)])
    }

    @Test("a batch that is full stops: after the retries, or after expanding")
    func stepsWhenFull() {
        #expect(self.steps(limit: 100, claimedAfter: [100]) == [.claimDue(room: 50)])
        #expect(self.steps(limit: 100, claimedAfter: [50, 100]) == [.claimDue(room: 50), .expand])
    }

    @Test("a batch of one still claims a retry first; the policy never asks again once done")
    func stepsOfOne() {
        #expect(self.steps(limit: 1, claimedAfter: [0, 0, 0]) == [.claimDue(room: 1), .expand, .claimDue(room: 1)])
        var policy = ClaimPolicy(limit: 10)
        while policy.nextStep(claimed: 10) != nil {}
        #expect(policy.nextStep(claimed: 0) == nil)
    }

    @Test("an audience chunk is the room left; expansion stops when the batch is full or the claim has expanded a batch's worth")
    func expansionRoom() {
        let policy = ClaimPolicy(limit: 100)
        #expect(policy.room(claimed: 40) == 60)
        #expect(policy.mayExpand(claimed: 40, expanded: 40))
        #expect(!policy.mayExpand(claimed: 100, expanded: 0))
        // Local-time notifications are created pending, outside the batch: bounded all the same.
        #expect(!policy.mayExpand(claimed: 0, expanded: 100))
    }

    @Test("an expansion that finds fewer devices than asked for exhausts the audience")
    func expansionEnd() {
        #expect(ClaimPolicy.expandAfter(found: 60, asked: 60, last: 1234) == 1234)
        #expect(ClaimPolicy.expandAfter(found: 59, asked: 60, last: 1234) == nil)
        #expect(ClaimPolicy.expandAfter(found: 0, asked: 60, last: 7) == nil)
        #expect(!ClaimPolicy.isExhausted(found: 60, asked: 60))
        #expect(ClaimPolicy.isExhausted(found: 0, asked: 60))
    }

    @Test("a chunk claimed again after its lease: claimed whole, split when there is less room, ended when gone, empty or cancelled")
    func reclaim() {
        let policy = ClaimPolicy(limit: 100)
        // Room for all of it: the same chunk, its next attempt.
        #expect(
            policy.reclaim(found: 30, lastFound: 80, through: 90, attempts: 1, cancelled: false, claimed: 50)
                == .claim(through: 90, attempts: 2, split: false)
        )
        // As many found as there is room for: claimed through the last found, the rest split off.
        #expect(
            policy.reclaim(found: 50, lastFound: 80, through: 90, attempts: 2, cancelled: false, claimed: 50)
                == .claim(through: 80, attempts: 3, split: true)
        )
        // …unless the last found is the chunk's own end.
        #expect(
            policy.reclaim(found: 50, lastFound: 90, through: 90, attempts: 2, cancelled: false, claimed: 50)
                == .claim(through: 90, attempts: 3, split: false)
        )
        #expect(policy.reclaim(found: 0, lastFound: nil, through: 90, attempts: 1, cancelled: false, claimed: 0) == .end(recordCancelled: false))
        #expect(policy.reclaim(found: nil, lastFound: nil, through: 90, attempts: 1, cancelled: false, claimed: 0) == .end(recordCancelled: false))
        #expect(policy.reclaim(found: 5, lastFound: 80, through: 90, attempts: 1, cancelled: true, claimed: 0) == .end(recordCancelled: true))
        #expect(policy.reclaim(found: 0, lastFound: nil, through: 90, attempts: 1, cancelled: true, claimed: 0) == .end(recordCancelled: false))
    }

    @Test("a cancelled notification's chunk is read whole (it is recorded, not sent); another's up to the room left")
    func reclaimLimit() {
        let policy = ClaimPolicy(limit: 100)
        #expect(policy.reclaimLimit(claimed: 30, cancelled: false) == 70)
        #expect(policy.reclaimLimit(claimed: 30, cancelled: true) == Int(Int32.max))
    }

    @Test("only an encrypted notification's deliveries get their device's key, nil when the device has none now")
    func publicKeys() {
        func claimed(_ id: Int64, device: Int64, sealed: Bool) -> ClaimedDelivery {
            ClaimedDelivery(
                id: id, notificationID: "n", appID: "demo", deviceID: device, token: "t", route: .production, pushType: .alert,
                topic: "com.example",
                priority: nil, expiration: nil, collapseID: nil, payload: [], attempts: 1, placeholder: sealed ? Array("{}".utf8) : nil
            )
        }
        var batch = [claimed(1, device: 10, sealed: true), claimed(2, device: 20, sealed: false), claimed(3, device: 30, sealed: true)]
        #expect(ClaimPolicy.sealedDevices(batch) == [10, 30])
        let key = DevicePublicKey(type: "x25519", key: [1, 2, 3])
        ClaimPolicy.attach([10: key, 20: key], to: &batch)
        #expect(batch.map(\.publicKey) == [key, nil, nil])
    }
}

// SPDX-License-Identifier: Apache-2.0
// The rate limiter's table of buckets under a flood of new addresses (Benchmarks/bounded-table.sh):
// BoundedTable (Sources/HeraldCore) against the sweep it replaced, measured in the same run. A
// flood of 20,000 new buckets a second, each full again a minute later (a register key's
// per-address limit, 60/1, one token taken); 600,000 buckets into a table of 100,000. Prints,
// per round, each one's mean time per new bucket and its longest single insertion (the stall of
// an event loop holding the lock), after the table first filled.
import Dispatch

struct Entry {
    var tokens: Double
    var at: Int64
}

@inline(never) func idle(_ entry: Entry, now: Int64) -> Bool { Double(now - entry.at) / 1000 + entry.tokens >= 60 }

let capacity = 100_000
let total = 600_000
let names = (0..<total).map { "a\($0)" }

/// Runs `insert` for each new bucket: (mean ns, worst ns) over the insertions after the first 150,000.
func measure(_ insert: (Int, Int64) -> Void) -> (mean: Double, worst: UInt64) {
    var worst: UInt64 = 0
    var sum: UInt64 = 0
    for index in 0..<total {
        let now = Int64(index) / 20
        let start = DispatchTime.now().uptimeNanoseconds
        insert(index, now)
        let took = DispatchTime.now().uptimeNanoseconds - start
        if index >= 150_000 {
            worst = max(worst, took)
            sum += took
        }
    }
    return (Double(sum) / Double(total - 150_000), worst)
}

for round in 1...3 {
    // The sweep: once full, every bucket looked at, the full ones dropped, then arbitrary ones down to three quarters.
    var buckets: [String: Entry] = [:]
    let sweep = measure { index, now in
        if buckets.count >= capacity {
            buckets = buckets.filter { !idle($0.value, now: now) }
            if buckets.count > capacity * 3 / 4 {
                for id in buckets.keys.prefix(buckets.count - capacity * 3 / 4) { buckets[id] = nil }
            }
        }
        buckets[names[index]] = Entry(tokens: 59, at: now)
    }
    var table = BoundedTable<Entry>(capacity: capacity)
    let bounded = measure { index, now in
        table.update(names[index], make: { Entry(tokens: 59, at: now) }, forgettable: { idle($0, now: now) }, pinned: { _ in false }) { _ in }
    }
    print(
        "RESULT round=\(round) sweep_mean_ns=\(Int(sweep.mean)) sweep_worst_ms=\(Double(sweep.worst) / 1e6)"
            + " table_mean_ns=\(Int(bounded.mean)) table_worst_ms=\(Double(bounded.worst) / 1e6)"
            + " mean_ratio=\(bounded.mean / sweep.mean) worst_ratio=\(Double(bounded.worst) / Double(sweep.worst))")
}

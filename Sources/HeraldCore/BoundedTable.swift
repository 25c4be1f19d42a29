// SPDX-License-Identifier: Apache-2.0
import DequeModule

/// Entries by name, at most `capacity` of them, room made a few entries at a time. A new entry
/// past the capacity looks at up to ``step`` entries from the front of the table's order (first
/// the oldest; entries looked at and kept go to the back): it forgets the first that
/// `forgettable` says loses nothing, or if none of them can go so, the first of them that is not
/// `pinned`. So each insertion does a bounded amount of work, where a sweep of the whole table
/// (as the rate limiters made) stalls its caller — an event loop, under a lock — once in so
/// many insertions. Only when every entry looked at is pinned does the table hold more than its
/// capacity; each later insertion then forgets up to two, so it comes back down.
package struct BoundedTable<Entry> {
    private var entries: [String: Entry] = [:]
    /// Each entry's name once; the front is looked at first.
    private var order = Deque<String>()
    package let capacity: Int

    /// Entries looked at per room made, at most.
    package static var step: Int { 8 }

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    package var count: Int { self.entries.count }

    package var values: Dictionary<String, Entry>.Values { self.entries.values }

    package subscript(name: String) -> Entry? { self.entries[name] }

    /// `body` on the entry `name`, if there is one.
    @discardableResult
    package mutating func modify<Result>(_ name: String, _ body: (inout Entry) -> Result) -> Result? {
        guard let index = self.entries.index(forKey: name) else { return nil }
        return body(&self.entries.values[index])
    }

    /// `body` on the entry `name`; one made by `make` (room made for it first) when there is none.
    package mutating func update<Result>(
        _ name: String, make: () -> Entry, forgettable: (Entry) -> Bool, pinned: (Entry) -> Bool, _ body: (inout Entry) -> Result
    ) -> Result {
        if let result = self.modify(name, body) { return result }
        // Room once at the capacity; a second time while above it.
        for _ in 0..<2 where self.entries.count >= self.capacity {
            guard self.makeRoom(forgettable: forgettable, pinned: pinned) else { break }
        }
        var entry = make()
        let result = body(&entry)
        self.entries[name] = entry
        self.order.append(name)
        return result
    }

    /// Forgets one entry among the next ``step`` in order; false when all of those are pinned.
    private mutating func makeRoom(forgettable: (Entry) -> Bool, pinned: (Entry) -> Bool) -> Bool {
        // The first of those looked at that may go if none is forgettable: its place among them.
        var fallback: Int?
        var looked: [String] = []
        defer { self.order.append(contentsOf: looked) }
        while looked.count < Self.step, let name = self.order.popFirst() {
            guard let index = self.entries.index(forKey: name) else { continue }
            if forgettable(self.entries.values[index]) {
                self.entries.remove(at: index)
                return true
            }
            if fallback == nil, !pinned(self.entries.values[index]) { fallback = looked.count }
            looked.append(name)
        }
        guard let fallback else { return false }
        self.entries[looked.remove(at: fallback)] = nil
        return true
    }
}

// SPDX-License-Identifier: Apache-2.0

/// Entries by name, at most `capacity` of them (more only while the oldest are all pinned), room
/// made a few entries at a time. A new entry past the capacity looks at up to ``step`` of the
/// oldest: it forgets the first that `forgettable` says loses nothing, and gives the others a
/// second turn at the back; if none of them could go, it forgets the oldest of them that is not
/// `pinned`. So each insertion does a bounded amount of work, where a sweep of the whole table
/// (as the rate limiters made) stalls its caller — an event loop, under a lock — once in so
/// many insertions.
package struct BoundedTable<Entry> {
    private var entries: [String: Entry] = [:]
    /// Each entry's name once, oldest first from `head` (the names before it are gone).
    private var order: [String] = []
    private var head = 0
    package let capacity: Int

    /// Entries looked at per insertion past the capacity, at most.
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
        if self.entries.count >= self.capacity { self.makeRoom(forgettable: forgettable, pinned: pinned) }
        var entry = make()
        let result = body(&entry)
        self.entries[name] = entry
        self.order.append(name)
        return result
    }

    private mutating func makeRoom(forgettable: (Entry) -> Bool, pinned: (Entry) -> Bool) {
        // The oldest that may go if none is forgettable: its place among those looked at.
        var fallback: Int?
        var looked: [String] = []
        while looked.count < Self.step, self.head < self.order.count {
            let name = self.order[self.head]
            self.head += 1
            guard let index = self.entries.index(forKey: name) else { continue }
            let entry = self.entries.values[index]
            if forgettable(entry) {
                self.entries.remove(at: index)
                self.order += looked
                self.compact()
                return
            }
            if fallback == nil, !pinned(entry) { fallback = looked.count }
            looked.append(name)
        }
        if let fallback {
            self.entries[looked.remove(at: fallback)] = nil
        }
        self.order += looked
        self.compact()
    }

    /// Drops the names before `head` once they are half the array (each name moved at most once per pass).
    private mutating func compact() {
        guard self.head >= 64, self.head * 2 >= self.order.count else { return }
        self.order.removeFirst(self.head)
        self.head = 0
    }
}

import CouchCore
import CouchStore

/// A group of a reduce query as the tree hands it over: the JSON of the first key met in it
/// (in the query's direction) and what its value reduces from, the stored reductions of the
/// nodes it covers whole and the rows of the nodes a bound or another group cuts.
struct ReductionGroup {
    let keyJSON: [UInt8]
    var partials: [PartialReduction] = []
    var rows: [ReductionRow] = []
}

extension ReductionTree {
    /// Hands `body` each group of the rows at positions in `[lower, upper)`, in order
    /// (descending: from the top), until it answers false. `groupLevel`: nil groups by whole
    /// key (`group=true`), 0 makes one group, N the first N values of array keys.
    ///
    /// From the root down, a node inside the range whose first and last rows are of one group
    /// is taken whole; any other is opened (a leaf: its rows are read). So a query reads the
    /// nodes along the range's two ends and each group's two ends, O(log n) each, whatever
    /// the number of rows it covers. Run it in one read transaction with the rows it reads.
    func fold(_ connection: SQLiteConnection, lower: [UInt8], upper: [UInt8]?, descending: Bool, groupLevel: Int?,
              body: (ReductionGroup) throws(CouchError) -> Bool) throws(CouchError) {
        var current: (identity: [UInt8], group: ReductionGroup)?

        /// What names the group of a row, from its stored key (or its position, which starts with it).
        func identity(_ key: [UInt8]) -> ArraySlice<UInt8> {
            if groupLevel == 0 { return [] }
            let start = partitioned ? SortKeyElements.end(of: key, from: 0) ?? 0 : 0
            let end = SortKeyElements.end(of: key, from: start) ?? key.count
            return SortKeyElements.group(of: key[start..<end], level: groupLevel)
        }

        /// Adds to the group `identity` names (`keyJSON` gives its key when it starts one);
        /// false once `body` wants no more groups.
        func add(_ identity: ArraySlice<UInt8>, keyJSON: () throws(CouchError) -> [UInt8], partial: PartialReduction?,
                 row: ReductionRow?) throws(CouchError) -> Bool {
            if current == nil || current!.identity[...] != identity {
                if let done = current, !(try body(done.group)) {
                    current = nil
                    return false
                }
                current = (Array(identity), ReductionGroup(keyJSON: try keyJSON()))
            }
            if let partial { current!.group.partials.append(partial) }
            if let row { current!.group.rows.append(row) }
            return true
        }

        func inRange(_ position: [UInt8]) -> Bool {
            !position.lexicographicallyPrecedes(lower) && (upper.map { position.lexicographicallyPrecedes($0) } ?? true)
        }

        /// Visits `nodes` of `level`, consecutive, the last one's run ending at `end`.
        func visit(_ level: Int, _ nodes: [ReductionNode], end: [UInt8]?) throws(CouchError) -> Bool {
            for index in descending ? Array(nodes.indices.reversed()) : Array(nodes.indices) {
                let node = nodes[index]
                guard let first = node.first, let last = node.last, let partial = node.partial else { continue }
                if last.lexicographicallyPrecedes(lower) { continue }
                if let upper, !first.lexicographicallyPrecedes(upper) { continue }
                let inside = inRange(first) && inRange(last)
                if inside {
                    let group = identity(first)
                    if identity(last) == group {
                        let key = { () throws(CouchError) in try self.key(connection, level: level, low: node.low, last: descending) }
                        guard try add(group, keyJSON: key, partial: partial, row: nil) else { return false }
                        continue
                    }
                }
                let runEnd = index + 1 < nodes.count ? nodes[index + 1].low : end
                if level == 0 {
                    var rows = try self.rows(connection, from: node.low, to: runEnd)
                    if descending { rows.reverse() }
                    // A leaf inside the range is opened for its groups: no row needs its position.
                    for stored in rows where inside || inRange(stored.position) {
                        guard try add(identity(stored.key), keyJSON: { stored.row.keyJSON }, partial: nil, row: stored.row) else {
                            return false
                        }
                    }
                } else {
                    let children = try self.children(connection, level: level - 1, from: node.low, to: runEnd, withKeys: false)
                    guard try visit(level - 1, children, end: runEnd) else { return false }
                }
            }
            return true
        }

        guard let top = try connection.scalarInt("SELECT max(level) FROM reductions WHERE view = ?", [.int(view)]) else { return }
        guard try visit(top, try children(connection, level: top, from: [], to: nil, withKeys: false), end: nil) else { return }
        if let done = current { _ = try body(done.group) }
    }
}

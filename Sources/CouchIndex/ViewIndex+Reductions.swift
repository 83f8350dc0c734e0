import CouchCore
import CouchStore

/// The rows a batch deleted and inserted, by view, as positions: what the views' stored
/// reductions must follow (only views that have them are recorded).
struct RowChanges {
    let trees: [ReductionTree]
    private(set) var removed: [Int: [[UInt8]]] = [:]
    private(set) var added: [Int: [[UInt8]]] = [:]
    /// Rows added less rows removed, by view, whether or not the view reduces (`total_rows`).
    private(set) var rowCountChanges: [Int: Int] = [:]

    init(trees: [ReductionTree]) { self.trees = trees }

    var isTracking: Bool { !trees.isEmpty }

    private func tracks(_ view: Int) -> Bool { trees.contains { $0.view == view } }

    mutating func remove(view: Int, key: [UInt8], docID: String, dup: Int) {
        rowCountChanges[view, default: 0] -= 1
        guard tracks(view) else { return }
        removed[view, default: []].append(RowPosition.encode(key: key, docID: docID, dup: dup))
    }

    /// A row removed from a view that does not reduce (its position is not needed).
    mutating func remove(view: Int) {
        rowCountChanges[view, default: 0] -= 1
    }

    mutating func add(view: Int, key: [UInt8], docID: String, dup: Int) {
        rowCountChanges[view, default: 0] += 1
        guard tracks(view) else { return }
        added[view, default: []].append(RowPosition.encode(key: key, docID: docID, dup: dup))
    }
}

extension ViewIndex {
    /// The views that reduce, by position.
    var reducingViews: [(view: Int, reduction: ViewReduction)] {
        definition.reductions.enumerated().compactMap { view, reduction in reduction.map { (view, $0) } }
    }

    func trees(_ seed: UInt64) -> [ReductionTree] {
        reducingViews.map { ReductionTree(view: $0.view, reduction: $0.reduction, partitioned: definition.partitioned, seed: seed) }
    }

    /// The seed `meta` records for built reductions (`"1 <seed>"`: format 1).
    static func seed(_ text: String?) -> UInt64? {
        guard let parts = text?.split(separator: " "), parts.count == 2, parts[0] == "1" else { return nil }
        return UInt64(parts[1])
    }

    // MARK: Writing (with `updateLock`, in the writer's transaction)

    /// Deletes a document's rows, noting where they were for the views that reduce.
    func deleteRows(of id: String, into changes: inout RowChanges) throws(CouchError) {
        do {
            guard changes.isTracking else {
                try writer.query("DELETE FROM rows WHERE doc_id = ? RETURNING view", [.text(id)]) { changes.remove(view: $0.int(0)) }
                return
            }
            try writer.query("DELETE FROM rows WHERE doc_id = ? RETURNING view, key, dup", [.text(id)]) { row in
                changes.remove(view: row.int(0), key: row.blob(1), docID: id, dup: row.int(2))
            }
        } catch {
            throw error as? CouchError ?? CouchError.internalError("index write failed: \(error)")
        }
    }

    /// Brings the stored reductions in line with a batch's rows. A failure that is not the
    /// reduce function's own (a worker that could not run) drops them all instead, so the
    /// rows are still indexed; a reduce query builds them again.
    func updateReductions(_ changes: RowChanges) throws(CouchError) {
        do {
            for tree in changes.trees {
                try tree.update(writer, removed: changes.removed[tree.view] ?? [], added: changes.added[tree.view] ?? [])
            }
        } catch {
            Self.logger.warning("stored reductions of \(path) dropped: \(error.reason)")
            try invalidateReductions()
        }
    }

    /// Drops every stored reduction (in the caller's transaction).
    func invalidateReductions() throws(CouchError) {
        try writer.run("DELETE FROM reductions")
        try writer.run("DELETE FROM meta WHERE name = 'reductions'")
        reductionSeed = nil
    }

    /// Builds every view's stored reductions from its rows, in one transaction.
    func rebuildReductions() throws(CouchError) {
        let seed = UInt64.random(in: 0...UInt64.max)
        try transaction {
            try writer.run("DELETE FROM reductions")
            for tree in trees(seed) { try tree.rebuild(writer) }
            try setMeta("reductions", "1 \(seed)")
        }
        reductionSeed = seed
        reductionBuildFailed = false
    }

    /// The most rows any reducing view holds (its root's count).
    func reducedRows() throws(CouchError) -> Int {
        try writer.scalarInt("SELECT max(count) FROM reductions WHERE level = (SELECT max(level) FROM reductions)") ?? 0
    }

    // MARK: Reduce queries

    /// A reduce query's rows: for each range in turn (a `keys` query has one per key), the
    /// groups of its rows (`groupLevel`: nil for `group=true`, 0 for none, N for
    /// `group_level=N`) with their keys and values, past `skip` groups, at most `limit`.
    /// Combines stored reductions (built first if they are not); a function's failure on the
    /// rows a group covers is thrown.
    public func reduce(view: Int, ranges: [ViewRange], groupLevel: Int?, skip: Int,
                       limit: Int) throws(CouchError) -> [ReducedRow] {
        guard view < definition.reductions.count, let reduction = definition.reductions[view] else {
            throw CouchError.internalError("view \(view) does not reduce")
        }
        // Nothing indexed yet (`update=false` on a new index): no rows, and no reason to write
        // an empty build into the file (CouchDB's `_info` sees it unchanged).
        if updateSequence == 0 { return [] }
        for _ in 0..<2 {
            if let answer = try readReduction(view: view, reduction: reduction, ranges: ranges, groupLevel: groupLevel,
                                              skip: skip, limit: limit) {
                return answer
            }
            updateLock.lock()
            defer { updateLock.unlock() }
            if reductionSeed == nil { try rebuildReductions() }
        }
        throw CouchError.internalError("stored reductions of \(path) cannot be read")
    }

    /// The answer, read in one transaction; nil while the reductions are not built.
    private func readReduction(view: Int, reduction: ViewReduction, ranges: [ViewRange], groupLevel: Int?,
                               skip: Int, limit: Int) throws(CouchError) -> [ReducedRow]? {
        try withReader { connection in
            try connection.run("BEGIN")
            defer { try? connection.run("COMMIT") }
            var seedText: String?
            try connection.query("SELECT value FROM meta WHERE name = 'reductions'") { seedText = $0.text(0) }
            guard let seed = Self.seed(seedText) else { return nil }
            let tree = ReductionTree(view: view, reduction: reduction, partitioned: definition.partitioned, seed: seed)
            var answer: [ReducedRow] = []
            var pending: [ReductionGroup] = []
            var skipped = 0
            for range in ranges where answer.count + pending.count < limit {
                let (lower, upper) = RowPosition.bounds(range, collation: definition.collation(view))
                if let upper, !lower.lexicographicallyPrecedes(upper) { continue }
                try tree.fold(connection, lower: lower, upper: upper, descending: range.descending,
                              groupLevel: groupLevel) { group throws(CouchError) in
                    if skipped < skip {
                        skipped += 1
                        return true
                    }
                    pending.append(group)
                    if pending.count >= ReductionTree.batchSize {
                        answer += try Self.finish(pending, reduction: reduction, groupLevel: groupLevel)
                        pending.removeAll()
                    }
                    return answer.count + pending.count < limit
                }
            }
            return answer + (try Self.finish(pending, reduction: reduction, groupLevel: groupLevel))
        }
    }

    /// Each group's key and value: its rows reduced, then everything combined, a few calls
    /// into the workers for all the groups when the function is JavaScript.
    private static func finish(_ groups: [ReductionGroup], reduction: ViewReduction,
                               groupLevel: Int?) throws(CouchError) -> [ReducedRow] {
        var groups = groups
        let withRows = groups.indices.filter { !groups[$0].rows.isEmpty }
        for (index, partial) in zip(withRows, try reduction.reduce(withRows.map { groups[$0].rows })) {
            groups[index].partials.append(partial)
        }
        var answer: [ReducedRow] = []
        for (group, partial) in zip(groups, try reduction.combine(groups.map(\.partials))) {
            if case .failure(let error) = partial, error.customName == ViewReduction.overflowName {
                answer.append(.overflow(reason: error.reason))
            } else {
                answer.append(.group(key: groupKey(group.keyJSON, level: groupLevel), value: try reduction.finish(partial)))
            }
        }
        return answer
    }

    /// A group's key as CouchDB answers it: null at level 0, an array key's first N values at
    /// level N, else the key.
    private static func groupKey(_ keyJSON: [UInt8], level: Int?) -> JSONValue {
        if level == 0 { return .null }
        let key = (try? JSONValue.parse(keyJSON)) ?? .null
        if let level, case .array(let items) = key, items.count > level { return .array(Array(items.prefix(level))) }
        return key
    }
}

/// A row of a reduce query: a group's key and value, or CouchDB's row for a group whose
/// JavaScript reduce outgrew `reduce_limit` (`{"key":null,"error":"reduce_overflow_error","reason":...}`).
public enum ReducedRow: Sendable {
    case group(key: JSONValue, value: JSONValue)
    case overflow(reason: String)
}

import CouchCore
import CouchStore

/// The stored reductions of one view, kept in the index file beside its rows so that a reduce
/// query combines O(log n) of them instead of reducing every row it covers (CouchDB keeps
/// them in its B-tree's inner nodes).
///
/// A node of level 0 covers a run of consecutive rows; a node of level L+1 a run of
/// consecutive nodes of level L. Each is stored as `reductions(view, level, low, count,
/// first, last, first_key, last_key, reduction, failure)`: `low` is where its run starts (a
/// `RowPosition`; empty for the first node of a level), so a node covers the positions from
/// its `low` to the next node's; `first`/`last` are the positions of its first and last row and
/// `first_key`/`last_key` their keys' JSON; `reduction` (or `failure`) is what the view's
/// reduce function makes of its rows.
///
/// Where runs start is decided by the rows themselves, not by history: a row starts a node at
/// every level below `starts(position)`, a keyed hash of its position (one row in 8 starts a
/// leaf, one in 64 a level-1 node...). So the tree is a function of the rows, a change of
/// rows changes only the nodes that hold them (and their ancestors), and no split or merge has
/// to be decided: a row that starts nodes creates them when it comes and removes them when it
/// goes. The seed keeps clients from choosing IDs that make one huge node. The top level is
/// the first with one node.
struct ReductionTree {
    let view: Int
    let reduction: ViewReduction
    let partitioned: Bool
    let seed: UInt64
    /// Bits of a position's hash per level: with 3, nodes hold 8 rows or children on average.
    /// A query or an update reads about `2^bits × levels` nodes and rows per edge it has, the
    /// index holds about one node per `2^bits - 1` rows: 8 reads the fewest for sizes that
    /// matter (a million rows: 7 levels, ~55 reads per edge against ~130 with 32).
    var bitsPerLevel = 3

    static let maximumLevel = 12
    /// Nodes reduced per call (JavaScript reduces: per call into a worker).
    static let batchSize = 256

    static let schema = """
        CREATE TABLE IF NOT EXISTS reductions (view INTEGER NOT NULL, level INTEGER NOT NULL, low BLOB NOT NULL,
            count INTEGER NOT NULL, first BLOB, last BLOB, first_key BLOB, last_key BLOB, reduction BLOB, failure TEXT,
            PRIMARY KEY (view, level, low)) WITHOUT ROWID;
        """

    /// How many levels a node starting at `position` has: one at every level below this.
    func starts(_ position: [UInt8]) -> Int {
        // FNV-1a, seeded, then MurmurHash3's finalizer to spread the low bits.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ seed
        for byte in position { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash ^= hash >> 33
        hash = hash &* 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        hash = hash &* 0xc4ce_b9fe_1a85_ec53
        hash ^= hash >> 33
        return min(hash.trailingZeroBitCount / bitsPerLevel, Self.maximumLevel)
    }

    // MARK: Building

    /// Builds the tree from the view's rows, level by level.
    func rebuild(_ connection: SQLiteConnection) throws(CouchError) {
        try connection.run("DELETE FROM reductions WHERE view = ?", [.int(view)])
        var builder = LevelBuilder(tree: self, connection: connection, level: 0)
        try scan {
            try connection.query("SELECT key, doc_id, dup, key_json, value FROM rows WHERE view = ? ORDER BY key, doc_id, dup",
                                 [.int(view)]) { row in
                let position = RowPosition.encode(key: row.blob(0), docID: row.text(1), dup: row.int(2))
                try builder.add(position: position, keyJSON: row.blob(3), row: ReductionRow(keyJSON: row.blob(3),
                                docID: row.text(1), valueJSON: row.blob(4)))
            }
        }
        var nodes = try builder.finish()
        var level = 0
        while nodes > 1, level < Self.maximumLevel {
            builder = LevelBuilder(tree: self, connection: connection, level: level + 1)
            try scan {
                try connection.query(Self.selectNodes(withKeys: true) + " AND level = ? ORDER BY low",
                                     [.int(view), .int(level)]) { row in
                    try builder.add(child: Self.node(row, withKeys: true))
                }
            }
            nodes = try builder.finish()
            level += 1
        }
    }

    /// Runs a scan whose row closure throws untyped errors (the SQLite API's) as `CouchError`.
    private func scan(_ body: () throws -> Void) throws(CouchError) {
        do {
            try body()
        } catch {
            throw error as? CouchError ?? CouchError.internalError("reduction build failed: \(error)")
        }
    }

    /// Nodes of one level as they are built from what they cover, in order.
    private struct LevelBuilder {
        let tree: ReductionTree
        let connection: SQLiteConnection
        let level: Int
        private var current: Pending
        private var done: [Pending] = []
        private(set) var written = 0

        init(tree: ReductionTree, connection: SQLiteConnection, level: Int) {
            self.tree = tree
            self.connection = connection
            self.level = level
            current = Pending(node: ReductionNode(low: []))
        }

        mutating func add(position: [UInt8], keyJSON: [UInt8], row: ReductionRow) throws(CouchError) {
            if tree.starts(position) > 0 { try startNode(at: position) }
            current.node.include(position: position, keyJSON: keyJSON)
            current.rows.append(row)
        }

        mutating func add(child: ReductionNode) throws(CouchError) {
            if !child.low.isEmpty, tree.starts(child.low) > level { try startNode(at: child.low) }
            current.include(child)
        }

        private mutating func startNode(at low: [UInt8]) throws(CouchError) {
            done.append(current)
            current = Pending(node: ReductionNode(low: low))
            if done.count >= ReductionTree.batchSize { try flush() }
        }

        /// Writes what is left; answers how many nodes the level has.
        mutating func finish() throws(CouchError) -> Int {
            done.append(current)
            try flush()
            return written
        }

        private mutating func flush() throws(CouchError) {
            try tree.reduce(&done, level: level)
            for pending in done { try tree.write(pending.node, level: level, connection) }
            written += done.count
            done.removeAll(keepingCapacity: true)
        }
    }

    /// A node being computed: its rows (level 0) or its children's reductions (above).
    struct Pending {
        var node: ReductionNode
        var rows: [ReductionRow] = []
        var partials: [PartialReduction] = []

        mutating func include(_ child: ReductionNode) {
            guard child.count > 0, let first = child.first, let last = child.last else { return }
            if node.first == nil {
                node.first = first
                node.firstKey = child.firstKey
            }
            node.last = last
            node.lastKey = child.lastKey
            node.count += child.count
            if let partial = child.partial { partials.append(partial) }
        }
    }

    /// Computes the reductions of nodes whose rows or children are gathered, in batches.
    private func reduce(_ pending: inout [Pending], level: Int) throws(CouchError) {
        let filled = pending.indices.filter { pending[$0].node.count > 0 }
        let partials = level == 0
            ? try reduction.reduce(filled.map { pending[$0].rows })
            : try reduction.combine(filled.map { pending[$0].partials })
        for (index, partial) in zip(filled, partials) { pending[index].node.partial = partial }
    }

    // MARK: Following changes

    /// Brings the tree in line with a batch of row changes, made in the same transaction:
    /// `removed` are positions of rows deleted, `added` of rows inserted after the deletions (a
    /// position in both was deleted, then written again). Only nodes holding them, and the
    /// ancestors of those, are computed again.
    func update(_ connection: SQLiteConnection, removed: [[UInt8]], added: [[UInt8]]) throws(CouchError) {
        let added = Set(added)
        let gone = Set(removed).subtracting(added)
        var dirty = added.union(removed)
        guard !dirty.isEmpty else { return }
        var level = 0
        while true {
            var touched = Set<[UInt8]>()
            // Nodes that rows start come and go with them; a new node takes the end of the one before it.
            for position in gone where starts(position) > level {
                try connection.run("DELETE FROM reductions WHERE view = ? AND level = ? AND low = ?",
                                   [.int(view), .int(level), .blob(position)])
            }
            for position in added where starts(position) > level {
                try connection.run("INSERT OR IGNORE INTO reductions (view, level, low, count) VALUES (?, ?, ?, 0)",
                                   [.int(view), .int(level), .blob(position)])
                if connection.changes > 0, let before = try low(connection, level, before: position) { touched.insert(before) }
            }
            try connection.run("INSERT OR IGNORE INTO reductions (view, level, low, count) VALUES (?, ?, x'', 0)",
                               [.int(view), .int(level)])
            for position in dirty { touched.insert(try low(connection, level, containing: position)) }
            let lows = touched.sorted { $0.lexicographicallyPrecedes($1) }
            try recompute(connection, level: level, lows: lows)
            let more = try connection.scalarInt("SELECT 1 FROM reductions WHERE view = ? AND level = ? AND low > x'' LIMIT 1",
                                                [.int(view), .int(level)]) != nil
            if !more || level == Self.maximumLevel {
                try connection.run("DELETE FROM reductions WHERE view = ? AND level > ?", [.int(view), .int(level)])
                return
            }
            dirty = Set(lows).union(gone.filter { starts($0) > level })
            level += 1
        }
    }

    /// The start of the node of `level` that holds `position`.
    private func low(_ connection: SQLiteConnection, _ level: Int, containing position: [UInt8]) throws(CouchError) -> [UInt8] {
        var low: [UInt8] = []
        try run(connection, "SELECT low FROM reductions WHERE view = ? AND level = ? AND low <= ? ORDER BY low DESC LIMIT 1",
                [.int(view), .int(level), .blob(position)]) { low = $0.blob(0) }
        return low
    }

    /// The start of the node of `level` before the one starting at `position`.
    private func low(_ connection: SQLiteConnection, _ level: Int, before position: [UInt8]) throws(CouchError) -> [UInt8]? {
        var low: [UInt8]?
        try run(connection, "SELECT low FROM reductions WHERE view = ? AND level = ? AND low < ? ORDER BY low DESC LIMIT 1",
                [.int(view), .int(level), .blob(position)]) { low = $0.blob(0) }
        return low
    }

    /// Computes the nodes of `level` starting at `lows` again from their rows or children.
    private func recompute(_ connection: SQLiteConnection, level: Int, lows: [[UInt8]]) throws(CouchError) {
        var start = 0
        while start < lows.count {
            var pending: [Pending] = []
            for low in lows[start..<min(lows.count, start + Self.batchSize)] {
                var entry = Pending(node: ReductionNode(low: low))
                var end: [UInt8]?
                try run(connection, "SELECT low FROM reductions WHERE view = ? AND level = ? AND low > ? ORDER BY low LIMIT 1",
                        [.int(view), .int(level), .blob(low)]) { end = $0.blob(0) }
                if level == 0 {
                    for stored in try rows(connection, from: low, to: end) {
                        entry.node.include(position: stored.position, keyJSON: stored.row.keyJSON)
                        entry.rows.append(stored.row)
                    }
                } else {
                    for child in try children(connection, level: level - 1, from: low, to: end) { entry.include(child) }
                }
                pending.append(entry)
            }
            start += pending.count
            try reduce(&pending, level: level)
            for entry in pending { try write(entry.node, level: level, connection) }
        }
    }

    // MARK: Reading and writing nodes

    /// A node's columns; `first` is NULL when it is `low` (for every node but the first of a
    /// level, whose `low` is empty: a node starts at its first row).
    static func selectNodes(withKeys: Bool) -> String {
        "SELECT low, count, first, last, reduction, failure" + (withKeys ? ", first_key, last_key" : "")
            + " FROM reductions WHERE view = ?"
    }

    /// The statements that read a level's nodes from a `low` on (to an end, or to the level's
    /// end), with or without their keys: built once, not per call.
    private static let childrenStatements: [String] = [false, true].flatMap { withKeys in
        [false, true].map { bounded in
            selectNodes(withKeys: withKeys) + " AND level = ? AND low >= ?" + (bounded ? " AND low < ?" : "") + " ORDER BY low"
        }
    }

    /// The statements that read the rows of a run, by which bounds it has (from, to).
    private static let rowStatements: [String] = [false, true].flatMap { from in
        [false, true].map { to in
            "SELECT key, doc_id, dup, key_json, value FROM rows WHERE view = ?" + (from ? " AND (key, doc_id, dup) >= (?, ?, ?)" : "")
                + (to ? " AND (key, doc_id, dup) < (?, ?, ?)" : "") + " ORDER BY key, doc_id, dup"
        }
    }

    static func node(_ row: SQLiteStatement, withKeys: Bool) -> ReductionNode {
        var node = ReductionNode(low: row.blob(0))
        node.count = row.int(1)
        if node.count > 0 {
            node.first = row.isNull(2) ? node.low : row.blob(2)
            node.last = row.blob(3)
            node.partial = row.isNull(5) ? .value(row.blob(4)) : .failure(Self.failure(row.text(5)))
            if withKeys {
                node.firstKey = row.blob(6)
                node.lastKey = row.blob(7)
            }
        }
        return node
    }

    private func write(_ node: ReductionNode, level: Int, _ connection: SQLiteConnection) throws(CouchError) {
        var reduction: SQLiteValue = .null
        var failure: SQLiteValue = .null
        switch node.partial {
        case .value(let bytes)?: reduction = .blob(bytes)
        case .failure(let error)?: failure = .text(Self.failureText(error))
        case nil: break
        }
        let first: SQLiteValue = node.first.map { $0 == node.low ? .null : .blob($0) } ?? .null
        try connection.run("""
            INSERT OR REPLACE INTO reductions (view, level, low, count, first, last, first_key, last_key, reduction, failure)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.int(view), .int(level), .blob(node.low), .int(node.count), first,
                  node.last.map(SQLiteValue.blob) ?? .null, node.firstKey.map(SQLiteValue.blob) ?? .null,
                  node.lastKey.map(SQLiteValue.blob) ?? .null, reduction, failure])
    }

    /// The nodes of `level` whose `low` lies in `[from, to)` (nil: no end), in order; their
    /// first and last keys' JSON when `withKeys`.
    func children(_ connection: SQLiteConnection, level: Int, from low: [UInt8], to end: [UInt8]?,
                  withKeys: Bool = true) throws(CouchError) -> [ReductionNode] {
        var nodes: [ReductionNode] = []
        var arguments: [SQLiteValue] = [.int(view), .int(level), .blob(low)]
        if let end { arguments.append(.blob(end)) }
        let sql = Self.childrenStatements[(withKeys ? 2 : 0) + (end == nil ? 0 : 1)]
        try run(connection, sql, arguments) { nodes.append(Self.node($0, withKeys: withKeys)) }
        return nodes
    }

    /// The JSON of the first (or last) key of the node of `level` starting at `low`.
    func key(_ connection: SQLiteConnection, level: Int, low: [UInt8], last: Bool) throws(CouchError) -> [UInt8] {
        var key: [UInt8] = []
        let sql = last ? "SELECT last_key FROM reductions WHERE view = ? AND level = ? AND low = ?"
            : "SELECT first_key FROM reductions WHERE view = ? AND level = ? AND low = ?"
        try run(connection, sql, [.int(view), .int(level), .blob(low)]) { key = $0.blob(0) }
        return key
    }

    /// A row read for a node: its stored key, dup and what its reduction needs.
    struct StoredRow {
        let key: [UInt8]
        let dup: Int
        let row: ReductionRow
        var position: [UInt8] { RowPosition.encode(key: key, docID: row.docID, dup: dup) }
    }

    /// The rows whose positions lie in `[from, to)` (nil: no end), in order.
    func rows(_ connection: SQLiteConnection, from low: [UInt8], to end: [UInt8]?) throws(CouchError) -> [StoredRow] {
        var arguments: [SQLiteValue] = [.int(view)]
        for bound in [low, end ?? []] where !bound.isEmpty {
            guard let parts = RowPosition.decode(bound, partitioned: partitioned) else {
                throw CouchError.internalError("unreadable stored reduction bound")
            }
            arguments += [.blob(parts.key), .text(parts.docID), .int(parts.dup)]
        }
        var rows: [StoredRow] = []
        let sql = Self.rowStatements[(low.isEmpty ? 0 : 2) + ((end ?? []).isEmpty ? 0 : 1)]
        try run(connection, sql, arguments) { row in
            rows.append(StoredRow(key: row.blob(0), dup: row.int(2),
                                  row: ReductionRow(keyJSON: row.blob(3), docID: row.text(1), valueJSON: row.blob(4))))
        }
        return rows
    }

    func run(_ connection: SQLiteConnection, _ sql: String, _ arguments: [SQLiteValue],
             row body: (SQLiteStatement) -> Void) throws(CouchError) {
        do {
            try connection.query(sql, arguments, row: body)
        } catch {
            throw error as? CouchError ?? CouchError.internalError("reduction read failed: \(error)")
        }
    }

    // MARK: Stored failures

    static func failureText(_ error: CouchError) -> String {
        JSONValue.object(JSONObject([
            (key: "kind", value: JSONValue(error.kind.rawValue)),
            (key: "name", value: error.customName.map { JSONValue($0) } ?? .null),
            (key: "reason", value: JSONValue(error.reason)),
        ])).serializedString()
    }

    static func failure(_ text: String) -> CouchError {
        let json = (try? JSONValue.parse(Array(text.utf8))) ?? .null
        let kind = json["kind"]?.stringValue.flatMap(CouchError.Kind.init(rawValue:)) ?? .unknownError
        let reason = json["reason"]?.stringValue ?? ""
        if let name = json["name"]?.stringValue { return CouchError.named(name, reason, status: kind) }
        return CouchError(kind, reason)
    }
}

/// One stored reduction: the run it covers and what it reduces to (nil while empty: the first
/// node of a level may hold no row).
struct ReductionNode {
    var low: [UInt8]
    var count = 0
    var first: [UInt8]?
    var last: [UInt8]?
    var firstKey: [UInt8]?
    var lastKey: [UInt8]?
    var partial: PartialReduction?

    init(low: [UInt8]) { self.low = low }

    mutating func include(position: [UInt8], keyJSON: [UInt8]) {
        if first == nil {
            first = position
            firstKey = keyJSON
        }
        last = position
        lastKey = keyJSON
        count += 1
    }
}

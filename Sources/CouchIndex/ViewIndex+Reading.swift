import CouchCore
import CouchStore

/// A row of a view: its document, key and value as JSON text (as emitted), and where it
/// stands (to page after it).
public struct ViewRow: Sendable {
    public let id: DocumentID
    public let keyJSON: [UInt8]
    public let valueJSON: [UInt8]
    public let position: ViewPosition

    public var key: JSONValue { (try? JSONValue.parse(keyJSON)) ?? .null }
    public var value: JSONValue { (try? JSONValue.parse(valueJSON)) ?? .null }
}

/// A row's place in its view's order; `rows(after:)` continues past it.
public struct ViewPosition: Sendable {
    /// The row's key as its view's collation encodes it (equal keys, equal bytes).
    public let sortKey: [UInt8]
    let docID: String
    let dup: Int
}

extension ViewIndex {
    /// Rows of `view` within `range`, in its direction, past `after` (a previous page's last
    /// row), skipping `skip`, at most `limit`.
    public func rows(view: Int, range: ViewRange, after: ViewPosition? = nil, skip: Int = 0,
                     limit: Int) throws(CouchError) -> [ViewRow] {
        guard limit > 0 else { return [] }
        var (conditions, arguments) = Self.conditions(view: view, range: range, collation: definition.collation(view))
        if let after {
            conditions.append(range.descending ? "(key, doc_id, dup) < (?, ?, ?)" : "(key, doc_id, dup) > (?, ?, ?)")
            arguments += [.blob(after.sortKey), .text(after.docID), .int(after.dup)]
        }
        let order = range.descending ? "DESC" : "ASC"
        let sql = "SELECT key, doc_id, dup, key_json, value FROM rows WHERE \(conditions.joined(separator: " AND "))"
            + " ORDER BY key \(order), doc_id \(order), dup \(order) LIMIT ? OFFSET ?"
        arguments += [.int(limit), .int(max(0, skip))]
        return try withReader { connection in
            var rows: [ViewRow] = []
            try connection.query(sql, arguments) { row in
                let id = row.text(1)
                rows.append(ViewRow(id: DocumentID(id), keyJSON: row.blob(3), valueJSON: row.blob(4),
                                    position: ViewPosition(sortKey: row.blob(0), docID: id, dup: row.int(2))))
            }
            return rows
        }
    }

    /// How many rows of `view` lie within `range`.
    public func count(view: Int, range: ViewRange) throws(CouchError) -> Int {
        let (conditions, arguments) = Self.conditions(view: view, range: range, collation: definition.collation(view))
        return try withReader {
            try $0.scalarInt("SELECT count(*) FROM rows WHERE \(conditions.joined(separator: " AND "))", arguments) ?? 0
        }
    }

    /// How many rows of `view` come before `range` in its direction (CouchDB's `offset`). Outside
    /// a partition, counted from the nearest count remembered for the same rows on the near side
    /// of the start (a client paging on with `startkey`, `startkey_docid` and `skip=1`, as
    /// CouchDB's documentation pages).
    public func offset(view: Int, range: ViewRange) throws(CouchError) -> Int {
        guard let start = range.startKey else { return 0 }
        let prefix = range.partition.map(ViewRange.partitionPrefix) ?? []
        let key = prefix + definition.collation(view).sortKey(start)
        guard prefix.isEmpty else {
            var condition = range.descending ? "key > ?" : "key < ?"
            var arguments: [SQLiteValue] = [.int(view), .blob(key)]
            if let id = range.startDocID {
                condition = range.descending ? "(key, doc_id) > (?, ?)" : "(key, doc_id) < (?, ?)"
                arguments.append(.text(id))
            }
            condition += " AND key >= ? AND key < ?"
            arguments += [.blob(prefix), .blob(ViewRange.successor(of: prefix))]
            return try withReader {
                try $0.scalarInt("SELECT count(*) FROM rows WHERE view = ? AND \(condition)", arguments) ?? 0
            }
        }
        // Ascending, no `startkey_docid` starts before the key's first ID, as "" does.
        let bound = ViewRowBound(key: key, docID: range.descending ? range.startDocID : range.startDocID ?? "")
        let remembered = rememberedOffsets(view: view, descending: range.descending)
        return try withReader { connection in
            func count(_ conditions: [(String, [SQLiteValue])]) throws -> Int {
                let sql = "SELECT count(*) FROM rows WHERE view = ?" + conditions.map { " AND " + $0.0 }.joined()
                return try connection.scalarInt(sql, [.int(view)] + conditions.flatMap(\.1)) ?? 0
            }
            // The state and the counts read in one snapshot.
            try connection.run("BEGIN")
            defer { try? connection.run("COMMIT") }
            let state = try Self.rowsState(connection)
            let offset: Int
            switch (range.descending, remembered.nearest(to: bound, descending: range.descending, in: state)) {
            case (false, let nearest?):
                offset = nearest.count + (try count([nearest.position.condition(">="), bound.condition("<")]))
            case (true, let nearest?):
                offset = nearest.count + (try count([bound.condition(">"), nearest.position.condition("<=")]))
            case (let descending, nil):
                offset = try count([bound.condition(descending ? ">" : "<")])
            }
            remembered.remember(.init(position: bound, count: offset), in: state, size: bound.size)
            return offset
        }
    }

    /// `offset`'s counts remembered for `view` listed in one direction.
    private func rememberedOffsets(view: Int, descending: Bool) -> RememberedCounts<ViewRowBound> {
        stateLock.withLock {
            let slot = view * 2 + (descending ? 1 : 0)
            if let counts = offsetCounts[slot] { return counts }
            let counts = RememberedCounts<ViewRowBound>()
            offsetCounts[slot] = counts
            return counts
        }
    }

    /// The sequence and purge the rows are indexed up to, as this connection's snapshot sees them.
    static func rowsState(_ connection: SQLiteConnection) throws -> RowsState {
        var values: [String: Int] = [:]
        try connection.query("SELECT name, value FROM meta WHERE name IN ('update_seq', 'purge_seq')") {
            values[$0.text(0)] = Int($0.text(1)) ?? 0
        }
        return RowsState(sequence: values["update_seq"] ?? 0, purges: values["purge_seq"] ?? 0)
    }

    /// SQL conditions selecting `range` of `view` (each a B-tree bound on the primary key).
    static func conditions(view: Int, range: ViewRange, collation: ViewCollation) -> ([String], [SQLiteValue]) {
        var conditions = ["view = ?"]
        var arguments: [SQLiteValue] = [.int(view)]
        // A partition's rows: the range of keys its prefix leads, each bound inside it.
        let prefix = range.partition.map(ViewRange.partitionPrefix) ?? []
        if !prefix.isEmpty {
            conditions.append("key >= ? AND key < ?")
            arguments += [.blob(prefix), .blob(ViewRange.successor(of: prefix))]
        }
        func bound(_ key: JSONValue?, _ id: String?, _ keyOnly: String, _ withID: String) {
            guard let key else { return }
            arguments.append(.blob(prefix + collation.sortKey(key)))
            if let id {
                conditions.append(withID)
                arguments.append(.text(id))
            } else {
                conditions.append(keyOnly)
            }
        }
        if range.descending {
            bound(range.startKey, range.startDocID, "key <= ?", "(key, doc_id) <= (?, ?)")
            if range.inclusiveEnd {
                bound(range.endKey, range.endDocID, "key >= ?", "(key, doc_id) >= (?, ?)")
            } else {
                bound(range.endKey, range.endDocID, "key > ?", "(key, doc_id) > (?, ?)")
            }
        } else {
            bound(range.startKey, range.startDocID, "key >= ?", "(key, doc_id) >= (?, ?)")
            if range.inclusiveEnd {
                bound(range.endKey, range.endDocID, "key <= ?", "(key, doc_id) <= (?, ?)")
            } else {
                bound(range.endKey, range.endDocID, "key < ?", "(key, doc_id) < (?, ?)")
            }
        }
        if let low = range.lowSortKey {
            conditions.append("key >= ?")
            arguments.append(.blob(prefix + low))
        }
        if let high = range.highSortKey {
            conditions.append("key <= ?")
            arguments.append(.blob(prefix + high))
        }
        if let after = range.after {
            conditions.append(range.descending ? "(key, doc_id) < (?, ?)" : "(key, doc_id) > (?, ?)")
            arguments += [.blob(prefix + after.sortKey), .text(after.docID)]
        }
        return (conditions, arguments)
    }
}

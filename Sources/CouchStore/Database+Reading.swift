import CouchCore

extension Database {
    /// The document's row, or nil if it never existed.
    public func record(_ id: DocumentID) throws -> DocumentRecord? {
        try readers.withConnection { try Self.record(id, connection: $0) }
    }

    static func record(_ id: DocumentID, connection: SQLiteConnection) throws -> DocumentRecord? {
        var record: DocumentRecord?
        try connection.query(
            "SELECT sequence, deleted, winning_rev, revision_tree FROM documents WHERE doc_id = ?", [.text(id.rawValue)]
        ) { row in
            record = DocumentRecord(id: id, sequence: row.int(0), tree: try decodeTree(row.blob(3)),
                                    winner: try parseRevision(row, column: 2), isDeleted: row.int(1) != 0)
        }
        return record
    }

    /// A revision of a document with its tree; the winner when `revision` is nil.
    /// Throws CouchDB's `not_found` with reason `missing` or `deleted`.
    public func document(_ id: DocumentID, revision: RevisionID? = nil) throws -> DocumentSnapshot {
        try readers.withConnection { connection in
            // The current revision lives in the document's row: one statement.
            if let current = try Self.currentSnapshot(id, connection: connection),
               revision == nil || revision == current.record.winner {
                if revision == nil, current.record.isDeleted { throw CouchError.notFound("deleted") }
                return current
            }
            return try Self.snapshot(id, revision: revision, connection: connection)
        }
    }

    static func currentSnapshot(_ id: DocumentID, connection: SQLiteConnection) throws -> DocumentSnapshot? {
        var snapshot: DocumentSnapshot?
        try connection.query(
            "SELECT sequence, deleted, winning_rev, revision_tree, body, attachments FROM documents WHERE doc_id = ?",
            [.text(id.rawValue)]
        ) { row in
            let tree = try decodeTree(row.blob(3))
            let winner = try parseRevision(row, column: 2)
            let record = DocumentRecord(id: id, sequence: row.int(0), tree: tree, winner: winner, isDeleted: row.int(1) != 0)
            let revision = StoredRevision(id: id, revision: winner, isDeleted: record.isDeleted, body: row.blob(4),
                                          attachments: AttachmentInfo.decode(row.blob(5)))
            snapshot = DocumentSnapshot(record: record, revision: revision)
        }
        return snapshot
    }

    /// The revisions `choose` picks from a document's tree, read consistently with that tree
    /// (`open_revs`, `_bulk_get`, the replicator, dumps): nil when the document never existed;
    /// a nil body where a picked revision is unknown or its body is gone. The winner alone (what
    /// a replicator usually asks for) costs one statement, as a plain GET does.
    public func revisions(_ id: DocumentID, choosing choose: (RevisionTree) -> [RevisionID]) throws
        -> (record: DocumentRecord, revisions: [RevisionID], bodies: [StoredRevision?])? {
        try readers.withConnection { try Self.revisions(id, choosing: choose, connection: $0) }
    }

    /// `revisions` on a reader connection (inside its read transaction).
    static func revisions(_ id: DocumentID, choosing choose: (RevisionTree) -> [RevisionID], connection: SQLiteConnection)
        throws -> (record: DocumentRecord, revisions: [RevisionID], bodies: [StoredRevision?])? {
        guard let current = try currentSnapshot(id, connection: connection) else { return nil }
        let revisions = choose(current.record.tree)
        if revisions.allSatisfy({ $0 == current.record.winner }) {
            return (current.record, revisions, revisions.map { _ in current.revision })
        }
        let record = current.record
        let bodies = try revisions.map { revision -> StoredRevision? in
            if revision == record.winner { return current.revision }
            guard let node = record.tree.node(revision), node.hasBody else { return nil }
            return try Self.revisionBody(record, revision, connection: connection)
        }
        return (record, revisions, bodies)
    }

    /// Runs `body` with a `BatchReader`: documents read one after another on one connection,
    /// whose snapshot is renewed every few hundred. The reader must not outlive `body`.
    public func readingInBatches<T>(_ body: (BatchReader) throws -> T) throws -> T {
        try readers.withReader { try body(BatchReader(pool: readers, reader: $0)) }
    }

    static func snapshot(_ id: DocumentID, revision: RevisionID?, connection: SQLiteConnection) throws -> DocumentSnapshot {
        guard let record = try record(id, connection: connection) else { throw CouchError.notFound("missing") }
        if let revision {
            guard let stored = try revisionBody(record, revision, connection: connection) else {
                throw CouchError.notFound("missing")
            }
            return DocumentSnapshot(record: record, revision: stored)
        }
        if record.isDeleted { throw CouchError.notFound("deleted") }
        guard let stored = try revisionBody(record, record.winner, connection: connection) else {
            throw CouchError.notFound("missing")
        }
        return DocumentSnapshot(record: record, revision: stored)
    }

    static func revisionBody(_ record: DocumentRecord, _ revision: RevisionID,
                             connection: SQLiteConnection) throws -> StoredRevision? {
        guard let node = record.tree.node(revision) else { return nil }
        var content: (body: [UInt8], attachments: [UInt8])?
        if revision == record.winner {
            try connection.query("SELECT body, attachments FROM documents WHERE doc_id = ?", [.text(record.id.rawValue)]) {
                content = ($0.blob(0), $0.blob(1))
            }
        } else {
            try connection.query(
                "SELECT r.body, r.attachments FROM revision_bodies r JOIN documents d ON d.doc_key = r.doc_key WHERE d.doc_id = ? AND r.rev_id = ?",
                [.text(record.id.rawValue), .text(revision.description)]
            ) { content = ($0.blob(0), $0.blob(1)) }
        }
        guard let content else { return nil }
        return StoredRevision(id: record.id, revision: revision, isDeleted: node.isDeleted, body: content.body,
                              attachments: AttachmentInfo.decode(content.attachments))
    }

    /// Rows of the changes index after `query.since`, one per document at its latest sequence.
    public func changes(_ query: ChangesQuery) throws -> [ChangeRow] {
        let sql = Self.changesSQL(query)
        return try readers.withConnection { connection in
            var rows: [ChangeRow] = []
            try connection.query(sql, [.int(query.since)]) { row in
                rows.append(try Self.changeRow(row, query, includeBody: query.includeBodies))
            }
            return rows
        }
    }

    /// `changes`, each row handed to `visit` as the statement reads it, its stored bytes borrowed
    /// from the statement (valid only during the call) rather than copied. `visit` runs with a
    /// read connection held and must not read the database itself.
    public func forEachChange(_ query: ChangesQuery, _ visit: (ListedDocument) throws -> Void) throws {
        let sql = Self.changesSQL(query)
        try readers.withConnection { connection in
            try connection.query(sql, [.int(query.since)]) { row in
                try ListedDocument.visit(row, includeTree: query.includeTree, visit)
            }
        }
    }

    /// The columns of `ListedDocument`, as `allDocumentsSQL` selects them too.
    private static func changesSQL(_ query: ChangesQuery) -> String {
        let columns = "doc_id, winning_rev, deleted, sequence"
            + (query.includeTree ? ", revision_tree" : ", NULL")
            + (query.includeBodies ? ", body, attachments" : ", NULL, NULL")
        let order = query.descending ? "DESC" : "ASC"
        let limit = query.limit.map { " LIMIT \(max(0, $0))" } ?? ""
        return "SELECT \(columns) FROM documents WHERE sequence > ? ORDER BY sequence \(order)\(limit)"
    }

    private static func changeRow(_ row: SQLiteStatement, _ query: ChangesQuery, includeBody: Bool) throws -> ChangeRow {
        ChangeRow(
            sequence: row.int(3), id: DocumentID(row.text(0)), winner: try parseRevision(row, column: 1),
            isDeleted: row.int(2) != 0,
            tree: query.includeTree ? try decodeTree(row.blob(4)) : nil,
            body: includeBody ? row.blob(5) : nil,
            attachments: query.includeBodies ? AttachmentInfo.decode(row.blob(6)) : [])
    }

    /// How many documents changed after `sequence`. Counted from the nearest count remembered
    /// for the same rows when fewer sequences lie between the two than after `sequence`.
    public func pendingChanges(after sequence: Int) throws -> Int {
        // No sequence is below 0: a caller's lower one counts every change (and keeps the
        // distances below from overflowing).
        let sequence = max(sequence, 0)
        return try readers.withConnection { connection in
            let state = try Self.rowsState(connection)
            guard sequence < state.sequence else { return 0 }
            let nearest = pendingCounts.counts(in: state).min { abs($0.position - sequence) < abs($1.position - sequence) }
            let count: Int
            if let nearest, abs(nearest.position - sequence) < state.sequence - sequence {
                let between = try connection.scalarInt(
                    "SELECT count(*) FROM documents WHERE sequence > ? AND sequence <= ?",
                    [.int(min(nearest.position, sequence)), .int(max(nearest.position, sequence))]) ?? 0
                count = sequence > nearest.position ? nearest.count - between : nearest.count + between
            } else {
                count = try connection.scalarInt("SELECT count(*) FROM documents WHERE sequence > ?", [.int(sequence)]) ?? 0
            }
            pendingCounts.remember(.init(position: sequence, count: count), in: state)
            return count
        }
    }

    /// The rows' highest sequence and the purges made, as this connection's snapshot sees them.
    private static func rowsState(_ connection: SQLiteConnection) throws -> RowsState {
        var state = RowsState(sequence: 0, purges: 0)
        try connection.query(
            "SELECT (SELECT max(sequence) FROM documents), (SELECT value FROM metadata WHERE key = 'purge_seq')"
        ) { row in
            state = .init(sequence: row.int(0), purges: Int(row.isNull(1) ? "0" : row.text(1)) ?? 0)
        }
        return state
    }

    /// Live documents in ID order within the query's key range, after `query.after` when
    /// paging through a long listing.
    public func allDocuments(_ query: AllDocumentsQuery) throws -> [AllDocumentsRow] {
        let (sql, arguments) = Self.allDocumentsSQL(query)
        return try readers.withConnection { connection in
            var rows: [AllDocumentsRow] = []
            try connection.query(sql, arguments) { row in
                try ListedDocument.visit(row, includeTree: query.includeTree) {
                    rows.append($0.row(includingBody: query.includeBodies))
                }
            }
            return rows
        }
    }

    /// `allDocuments`, each row handed to `visit` as the statement reads it, its stored bytes
    /// borrowed from the statement (valid only during the call) rather than copied: a listing
    /// writes them into its response with one copy. `visit` runs with a read connection held and
    /// must not read the database itself.
    public func forEachDocument(_ query: AllDocumentsQuery, _ visit: (ListedDocument) throws -> Void) throws {
        let (sql, arguments) = Self.allDocumentsSQL(query)
        try readers.withConnection { connection in
            try connection.query(sql, arguments) { row in
                try ListedDocument.visit(row, includeTree: query.includeTree, visit)
            }
        }
    }

    private static func allDocumentsSQL(_ query: AllDocumentsQuery) -> (String, [SQLiteValue]) {
        var conditions = ["deleted = 0"]
        var arguments: [SQLiteValue] = []
        let (low, high) = query.descending ? (query.endKey, query.startKey) : (query.startKey, query.endKey)
        if let low {
            let inclusive = query.descending ? query.inclusiveEnd : true
            conditions.append(inclusive ? "doc_id >= ?" : "doc_id > ?")
            arguments.append(.text(low))
        }
        if let high {
            let inclusive = query.descending ? true : query.inclusiveEnd
            conditions.append(inclusive ? "doc_id <= ?" : "doc_id < ?")
            arguments.append(.text(high))
        }
        if let after = query.after {
            conditions.append(query.descending ? "doc_id < ?" : "doc_id > ?")
            arguments.append(.text(after))
        }
        if let within = query.within {
            conditions.append("doc_id >= ? AND doc_id < ?")
            arguments += [.text(within.low), .text(within.high)]
        }
        let columns = "doc_id, winning_rev, deleted, sequence"
            + (query.includeTree ? ", revision_tree" : ", NULL")
            + (query.includeBodies ? ", body, attachments" : ", NULL, NULL")
        let order = query.descending ? "DESC" : "ASC"
        let sql = "SELECT \(columns) FROM documents WHERE \(conditions.joined(separator: " AND ")) ORDER BY doc_id \(order) LIMIT ? OFFSET ?"
        arguments.append(.int(query.limit ?? -1))
        arguments.append(.int(query.skip))
        return (sql, arguments)
    }

    /// `_all_docs`' `total_rows` and `offset`: live documents, and how many precede the
    /// range start in the requested order (plus `skip`).
    public func allDocumentsPosition(_ query: AllDocumentsQuery) throws -> (offset: Int, total: Int) {
        try readers.withConnection { connection in
            var range = ""
            var bounds: [SQLiteValue] = []
            if let within = query.within {
                range = " AND doc_id >= ? AND doc_id < ?"
                bounds = [.text(within.low), .text(within.high)]
            }
            // Live documents matching `condition`: the IDs counted in their index, less the
            // deleted ones (`deleted_ids`), neither count reading the table.
            func live(_ condition: String, _ arguments: [SQLiteValue]) throws -> Int {
                let all = try connection.scalarInt("SELECT count(*) FROM documents WHERE \(condition)", arguments) ?? 0
                let deleted = try connection.scalarInt(
                    "SELECT count(*) FROM documents WHERE deleted = 1 AND \(condition)", arguments) ?? 0
                return all - deleted
            }
            let total = query.within == nil ? try Self.documentCounts(connection).live : try live("1\(range)", bounds)
            // Live documents before `start` in the listing's order. Without a partition's range,
            // counted from the nearest count remembered for the same rows on the near side of
            // `start` (a client paging on with `startkey` and `skip=1`, as PouchDB does).
            func preceding(_ start: String) throws -> Int {
                let comparison = query.descending ? "doc_id > ?" : "doc_id < ?"
                guard query.within == nil else { return try live(comparison + range, [.text(start)] + bounds) }
                let state = try Self.rowsState(connection)
                let key = OrderedID(start)
                let remembered = query.descending ? descendingOffsets : ascendingOffsets
                let count: Int
                if let nearest = remembered.nearest(to: key, descending: query.descending, in: state) {
                    let known = nearest.position.text
                    let between = query.descending
                        ? try live("doc_id > ? AND doc_id <= ?", [.text(start), .text(known)])
                        : try live("doc_id >= ? AND doc_id < ?", [.text(known), .text(start)])
                    count = nearest.count + between
                } else {
                    count = try live(comparison, [.text(start)])
                }
                remembered.remember(.init(position: key, count: count), in: state, size: start.utf8.count)
                return count
            }
            var offset = query.skip
            if let start = query.startKey {
                let preceding = try preceding(start)
                // `skip` is the client's number: saturate rather than trap near Int.max.
                let (sum, overflow) = offset.addingReportingOverflow(preceding)
                offset = overflow ? Int.max : sum
            }
            return (min(offset, total), total)
        }
    }

    /// Rows for the given IDs, deleted documents included (nil for IDs never seen).
    public func documents(ids: [DocumentID], includeBodies: Bool, includeTree: Bool) throws -> [AllDocumentsRow?] {
        var rows: [AllDocumentsRow?] = []
        rows.reserveCapacity(ids.count)
        try forEachDocument(ids: ids, includeBodies: includeBodies, includeTree: includeTree) {
            rows.append($0?.row(includingBody: includeBodies))
        }
        return rows
    }

    /// `documents(ids:)`, each document handed to `visit` in the order of `ids` as the statement
    /// reads it (nil for an ID never seen), its stored bytes borrowed as `forEachDocument`'s are.
    /// `visit` runs with a read connection held and must not read the database itself.
    public func forEachDocument(ids: [DocumentID], includeBodies: Bool, includeTree: Bool,
                                _ visit: (ListedDocument?) throws -> Void) throws {
        let columns = "doc_id, winning_rev, deleted, sequence"
            + (includeTree ? ", revision_tree" : ", NULL")
            + (includeBodies ? ", body, attachments" : ", NULL, NULL")
        try readers.withConnection { connection in
            // Looked up once, not by its text for every ID (which hashed the text each time).
            let statement = try connection.statement("SELECT \(columns) FROM documents WHERE doc_id = ?")
            // A request may name millions: it stops when its client hangs up.
            let cancellation = RequestCancellation.current
            for (index, id) in ids.enumerated() {
                if index % 256 == 0 { try cancellation?.check() }
                defer { statement.reset() }
                try statement.bind([.text(id.rawValue)])
                if try statement.step() {
                    try ListedDocument.visit(statement, includeTree: includeTree) { try visit($0) }
                } else {
                    try visit(nil)
                }
            }
        }
    }

    public func localDocument(_ id: DocumentID) throws -> LocalDocument {
        try readers.withConnection { connection in
            var document: LocalDocument?
            try connection.query("SELECT revision, body FROM local_documents WHERE doc_id = ?", [.text(id.rawValue)]) { row in
                document = LocalDocument(id: id, revision: row.int(0), body: row.blob(1))
            }
            guard let document else { throw CouchError.notFound("missing") }
            return document
        }
    }
}

/// A document of a listing or a feed as its statement holds it, valid only during the visit of
/// `forEachDocument` or `forEachChange`: the stored bytes a listing can write as they are, and the
/// row parsed from them (`row()`, `change()`) for what needs more. Parsing each row's ID and
/// revision into values only to write them back cost about a tenth of an `_all_docs` row.
public struct ListedDocument {
    fileprivate let statement: SQLiteStatement
    fileprivate let includeTree: Bool
    /// The ID as stored: the UTF-8 of a `String`, so valid.
    public let id: UnsafeRawBufferPointer
    /// The winning revision as stored: its `description` when it was written.
    public let revision: UnsafeRawBufferPointer
    /// The winning revision's body (empty for a listing without bodies).
    public let body: UnsafeRawBufferPointer

    /// Hands `visit` the statement's current row: columns `doc_id, winning_rev, deleted, sequence,
    /// revision_tree, body, attachments` (NULL for those not read).
    fileprivate static func visit(_ statement: SQLiteStatement, includeTree: Bool,
                                  _ visit: (ListedDocument) throws -> Void) throws {
        try statement.withBlob(0) { id in
            try statement.withBlob(1) { revision in
                try statement.withBlob(5) { body in
                    try visit(ListedDocument(statement: statement, includeTree: includeTree, id: id,
                                             revision: revision, body: body))
                }
            }
        }
    }

    public var isDeleted: Bool { statement.int(2) != 0 }
    public var sequence: Int { statement.int(3) }
    public var hasAttachments: Bool { statement.byteCount(6) > 0 }

    /// The row, with a copy of its body or without (borrow `body`).
    public func row(includingBody: Bool = false) -> AllDocumentsRow {
        AllDocumentsRow(
            id: DocumentID(String(decoding: id, as: UTF8.self)),
            winner: RevisionID(utf8: revision) ?? RevisionID(generation: 0, digest: "0"),
            isDeleted: statement.int(2) != 0, sequence: statement.int(3),
            tree: includeTree ? (try? decodeTree(statement.blob(4))) : nil, body: includingBody ? Array(body) : nil,
            attachments: AttachmentInfo.decode(statement.blob(6)))
    }

    /// The change, without its body (borrow `body`).
    public func change() throws -> ChangeRow {
        guard let winner = RevisionID(utf8: revision) else { throw CouchError.internalError("corrupt revision id") }
        return ChangeRow(
            sequence: sequence, id: DocumentID(String(decoding: id, as: UTF8.self)), winner: winner,
            isDeleted: isDeleted, tree: includeTree ? try decodeTree(statement.blob(4)) : nil, body: nil,
            attachments: AttachmentInfo.decode(statement.blob(6)))
    }
}

func decodeTree(_ bytes: [UInt8]) throws(CouchError) -> RevisionTree {
    do {
        return try RevisionTree(encoded: bytes)
    } catch {
        SQLiteConnection.logger.error("corrupt revision tree")
        throw CouchError.internalError("corrupt revision tree")
    }
}

/// A stored revision ID, read from the column's bytes.
func parseRevision(_ row: SQLiteStatement, column: Int32) throws(CouchError) -> RevisionID {
    guard let revision = row.withBlob(column, { RevisionID(utf8: $0) }) else {
        throw CouchError.internalError("corrupt revision id")
    }
    return revision
}

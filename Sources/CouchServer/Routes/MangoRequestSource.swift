import CouchCore
import CouchMango
import CouchStore

/// The documents `_find` reads, as the requesting user may see them: rendered as CouchDB
/// renders them (`_id`, `_rev`, attachment stubs, `_conflicts` when asked) under the user's
/// `DocumentReadRule` (`_users` reduced to one's own document for non-admins, replication
/// documents without others' credentials), so selectors match only what the user may read.
struct MangoRequestSource: MangoDocumentSource {
    let database: Database
    let render: DocumentRenderOptions
    /// A partition query's partition: only its documents are read (their ID range).
    let partition: String?

    init(_ context: RouteContext, database: Database, conflicts: Bool, partition: String? = nil) throws {
        self.database = database
        self.partition = partition
        var render = DocumentRenderOptions(reader: try context.documentReadRule(for: database))
        render.conflicts = conflicts
        self.render = render
    }

    var updateSequence: Int { database.updateSequence }

    func scan(start: String?, end: String?, after: String?, descending: Bool, limit: Int) throws
        -> (documents: [MangoDocument], rowsRead: Int, lastID: String?) {
        try RequestCancellation.checkCurrent()
        var query = AllDocumentsQuery()
        query.startKey = start
        query.endKey = end
        query.after = after
        query.descending = descending
        query.limit = limit
        query.includeBodies = true
        query.includeTree = render.conflicts
        query.within = partition.map(DocumentID.partitionRange)
        let rows = try database.allDocuments(query)
        let documents = try rows.compactMap(document)
        // A reader who may not see every document is told of the rows it sees, no more:
        // counts of the others would tell which exist.
        return (documents, render.reader.isRestricted ? documents.count : rows.count, rows.last?.id.rawValue)
    }

    func documents(_ ids: [String]) throws -> [MangoDocument?] {
        try RequestCancellation.checkCurrent()
        return try database.documents(ids: ids.map(DocumentID.init), includeBodies: true, includeTree: render.conflicts)
            .map { row in try row.flatMap(document) }
            .map { document in partition == nil || document?.id.hasPrefix(partition! + ":") == true ? document : nil }
    }

    private func document(_ row: AllDocumentsRow) throws -> MangoDocument? {
        guard !row.isDeleted, !row.id.isDesign else { return nil }
        let revision = StoredRevision(id: row.id, revision: row.winner, isDeleted: false, body: row.body ?? [],
                                      attachments: row.attachments)
        let record = row.tree.map { DocumentRecord(id: row.id, sequence: row.sequence, tree: $0, winner: row.winner, isDeleted: false) }
        let bytes: [UInt8]
        do {
            bytes = try DocumentJSON.render(revision, record: record, options: render)
        } catch let error as CouchError where error.kind == .notFound {
            return nil  // a document the reader may not see
        }
        return MangoDocument(id: row.id.rawValue, json: try JSONValue.parse(bytes))
    }
}

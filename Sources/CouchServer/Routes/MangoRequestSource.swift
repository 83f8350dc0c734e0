import CouchCore
import CouchMango
import CouchStore

/// The documents `_find` reads, as the requesting user may see them: rendered as CouchDB
/// renders them (`_id`, `_rev`, attachment stubs, `_conflicts` when asked), `_users`
/// reduced to one's own document for non-admins, `_replicator` without others' credentials.
struct MangoRequestSource: MangoDocumentSource {
    let database: Database
    let user: UserContext
    let isAdmin: Bool
    let conflicts: Bool
    /// A partition query's partition: only its documents are read (their ID range).
    let partition: String?

    init(_ context: RouteContext, database: Database, conflicts: Bool, partition: String? = nil) throws {
        self.database = database
        self.partition = partition
        user = context.user
        let access = try context.databaseAccessForWrites()
        isAdmin = context.user.isServerAdmin || access.isAdmin
        self.conflicts = conflicts
    }

    var updateSequence: Int { database.updateSequence }

    func scan(start: String?, end: String?, after: String?, descending: Bool, limit: Int) throws
        -> (documents: [MangoDocument], rowsRead: Int, lastID: String?) {
        var query = AllDocumentsQuery()
        query.startKey = start
        query.endKey = end
        query.after = after
        query.descending = descending
        query.limit = limit
        query.includeBodies = true
        query.includeTree = conflicts
        query.within = partition.map(DocumentID.partitionRange)
        let rows = try database.allDocuments(query)
        return (try rows.compactMap(document), rows.count, rows.last?.id.rawValue)
    }

    func documents(_ ids: [String]) throws -> [MangoDocument?] {
        try database.documents(ids: ids.map(DocumentID.init), includeBodies: true, includeTree: conflicts)
            .map { row in try row.flatMap(document) }
            .map { document in partition == nil || document?.id.hasPrefix(partition! + ":") == true ? document : nil }
    }

    private func document(_ row: AllDocumentsRow) throws -> MangoDocument? {
        guard !row.isDeleted, !row.id.isDesign else { return nil }
        var revision = StoredRevision(id: row.id, revision: row.winner, isDeleted: false, body: row.body ?? [],
                                      attachments: row.attachments)
        if database.name == UsersDatabase.name {
            guard (try? UsersDatabase.checkRead(row.id, user: user, isAdmin: isAdmin)) != nil else { return nil }
        } else if database.name.isReplicator {
            revision = ReplicatorDatabaseRules.readable(revision, user: user, isAdmin: isAdmin)
        }
        var options = DocumentRenderOptions()
        options.conflicts = conflicts
        let record = row.tree.map { DocumentRecord(id: row.id, sequence: row.sequence, tree: $0, winner: row.winner, isDeleted: false) }
        let bytes = try DocumentJSON.render(revision, record: record, options: options)
        return MangoDocument(id: row.id.rawValue, json: try JSONValue.parse(bytes))
    }
}

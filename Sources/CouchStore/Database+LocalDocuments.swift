import CouchCore

/// `_local_docs`: the local documents (never replicated) listed in ID order, with
/// `_all_docs`' key range, paging and direction.
extension Database {
    public func localDocuments(_ query: AllDocumentsQuery) throws -> [LocalDocument] {
        var conditions = ["1"]
        var arguments: [SQLiteValue] = []
        let (low, high) = query.descending ? (query.endKey, query.startKey) : (query.startKey, query.endKey)
        if let low {
            conditions.append(query.descending && !query.inclusiveEnd ? "doc_id > ?" : "doc_id >= ?")
            arguments.append(.text(low))
        }
        if let high {
            conditions.append(!query.descending && !query.inclusiveEnd ? "doc_id < ?" : "doc_id <= ?")
            arguments.append(.text(high))
        }
        let order = query.descending ? "DESC" : "ASC"
        let sql = "SELECT doc_id, revision, \(query.includeBodies ? "body" : "NULL") FROM local_documents WHERE "
            + conditions.joined(separator: " AND ") + " ORDER BY doc_id \(order) LIMIT ? OFFSET ?"
        arguments += [.int(query.limit ?? -1), .int(query.skip)]
        return try readers.withConnection { connection in
            var documents: [LocalDocument] = []
            try connection.query(sql, arguments) { row in
                documents.append(LocalDocument(id: DocumentID(row.text(0)), revision: row.int(1),
                                               body: query.includeBodies ? row.blob(2) : []))
            }
            return documents
        }
    }

    /// The local documents with these IDs, nil where there is none.
    public func localDocuments(ids: [DocumentID]) throws -> [LocalDocument?] {
        try ids.map { id in
            do {
                return try localDocument(id)
            } catch let error as CouchError where error.kind == .notFound {
                return nil
            }
        }
    }
}

import CouchCore

/// The store's database as the function runtime reads it (design documents, `req.info`).
extension Database: FunctionDatabase {
    public func designDocuments() throws(CouchError) -> [(id: DocumentID, revision: RevisionID, body: [UInt8])] {
        var query = AllDocumentsQuery()
        query.startKey = DocumentID.designPrefix
        query.endKey = "_design0"
        query.includeBodies = true
        do {
            return try allDocuments(query).compactMap { row in row.body.map { (row.id, row.winner, $0) } }
        } catch let error as CouchError {
            throw error
        } catch {
            throw CouchError.internalError("cannot read design documents")
        }
    }

    public func readError(_ id: DocumentID) -> CouchError {
        do {
            _ = try document(id)
        } catch let error as CouchError {
            return error
        } catch {}
        return CouchError.notFound("missing")
    }
}

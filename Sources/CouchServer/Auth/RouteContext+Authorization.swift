import CouchCore
import CouchStore

/// The write side of the authorization policy, for handlers. A request's route was
/// authorized before its handler ran; the documents a handler is about to write (whose
/// IDs may only be known from the body) pass here on their way to the store.
extension RouteContext {
    /// The user's standing in the route's database.
    func databaseAccessForWrites() throws -> DatabaseAccess {
        if let databaseAccess { return databaseAccess }
        return try server.accessControl.access(for: user, to: endpoint)
    }

    /// What the user may see of `database`'s documents (the security object is read only
    /// for the system databases, whose rules depend on it).
    func documentReadRule(for database: Database) throws -> DocumentReadRule {
        let isUsersDatabase = server.accessControl.isUsersDatabase(database.name)
        guard isUsersDatabase || database.name.isReplicator else { return .whole }
        let isAdmin = try user.isServerAdmin || databaseAccessForWrites().isAdmin
        return DocumentReadRule(database: database.name, isUsersDatabase: isUsersDatabase, user: user, isAdmin: isAdmin)
    }

    /// A document about to be written: within `max_document_size`, a design document only
    /// by a database admin, a `_users` document by CouchDB's rules and with its password
    /// hashed. Throws the refusal.
    public func authorizedEdit(_ edit: DocumentEdit, in database: Database, newEdits: Bool = true) throws -> DocumentEdit {
        try checkDocumentSizes([edit])
        return try AuthorizationPolicy.checkWrite(edit, in: database, user: user, access: try databaseAccessForWrites(),
                                                  accessControl: server.accessControl, newEdits: newEdits)
    }

    /// The documents of a `_bulk_docs`: each authorized on its own, so a refused one gets its
    /// error as its result and the others are written. An oversized document refuses the
    /// whole request, as CouchDB does.
    public func authorizedEdits(_ edits: [DocumentEdit], in database: Database,
                                newEdits: Bool) throws -> [Result<DocumentEdit, CouchError>] {
        try checkDocumentSizes(edits)
        let access = try databaseAccessForWrites()
        let accessControl = server.accessControl
        return edits.map { edit in
            do {
                return .success(try AuthorizationPolicy.checkWrite(edit, in: database, user: user, access: access,
                                                                   accessControl: accessControl, newEdits: newEdits))
            } catch let error as CouchError {
                return .failure(error)
            } catch {
                return .failure(CouchError(.unknownError, String(describing: error)))
            }
        }
    }

    /// CouchDB's `max_document_size`: 413 `document_too_large` naming the document. Only
    /// a request body larger than the limit can hold such a document, so documents from
    /// smaller ones are not measured (streamed `multipart/related` bodies always are).
    private func checkDocumentSizes(_ edits: [DocumentEdit]) throws(CouchError) {
        // Depth: a document nesting d levels takes at least 2d bytes, so small bodies are not walked.
        if request.body.count > 2 * JSONDepth.maximumDocument || request.bodySink != nil {
            for edit in edits where edit.bodyNests(deeperThan: JSONDepth.maximumDocument) {
                throw CouchError(.badRequest, JSONDepth.documentReason)
            }
        }
        let limit = server.accessControl.maximumDocumentSize
        guard request.body.count > limit || request.bodySink != nil else { return }
        for edit in edits where edit.bodyBytes.count > limit {
            throw CouchError(.documentTooLarge, edit.id?.rawValue ?? "")
        }
    }
}

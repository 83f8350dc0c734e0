import CouchCore
import CouchStore

/// `/db/_local/id`: checkpoints and other documents that never replicate.
enum LocalDocumentRoutes {
    static func getLocalDocument(_ context: RouteContext) throws -> HTTPResponse {
        let document = try context.database().localDocument(try context.documentID)
        return .json(200, bytes: DocumentJSON.renderLocal(document))
    }

    static func putLocalDocument(_ context: RouteContext) throws -> HTTPResponse {
        let id = try context.documentID
        var edit = try DocumentEdit(json: try context.jsonBody(), isLocal: true)
        edit.id = id
        // A local document has no revision tree: `_revisions` is ignored, only `_rev` counts.
        edit.revisionField = try DocumentRoutes.reconcileRevision(body: edit.revisionField, context)
        edit.revision = edit.revisionField
        edit.history = nil
        let revision = try context.database().update(edit)
        return .json(201, bytes: DocumentJSON.writeResult(id: id, revision: revision))
    }

    static func deleteLocalDocument(_ context: RouteContext) throws -> HTTPResponse {
        let id = try context.documentID
        let edit = DocumentEdit(id: id, revision: try context.revisionOption(), isDeleted: true)
        let revision = try context.database().update(edit)
        return .json(200, bytes: DocumentJSON.writeResult(id: id, revision: revision))
    }
}

import CouchCore
import CouchStore

/// `/db/docid` (including `_design/` documents) and `POST /db`.
enum DocumentRoutes {
    static func getDocument(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        let id = try context.documentID
        if context.request.queryValue("open_revs") != nil {
            return try OpenRevisionsResponse.make(context, database: database, id: id)
        }
        let options = try DocumentRenderOptions(context)
        let snapshot = try database.document(id, revision: try context.revisionOption())
        let etag = "\"\(snapshot.revision.revision)\""
        if context.request.header("if-none-match") == etag {
            return HTTPResponse(status: 304, headers: [("ETag", etag)])
        }
        return .json(200, bytes: DocumentJSON.render(snapshot.revision, record: snapshot.record, options: options),
                     headers: [("ETag", etag)])
    }

    static func putDocument(_ context: RouteContext) throws -> HTTPResponse {
        let id = try context.documentID
        var edit = try DocumentEdit(json: try context.jsonBody())
        edit.id = id
        edit.revision = try reconcileRevision(body: edit.revision, request: try context.revisionOption())
        let newEdits = try context.boolOption("new_edits", default: true)
        let revision = try context.database().bulkUpdate([edit], newEdits: newEdits)[0].get()
        return written(context, id: id, revision: revision)
    }

    static func postDocument(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        var edit = try DocumentEdit(json: try context.jsonBody())
        let id = edit.id ?? DocumentID(Digest.randomHex(bytes: 16))
        edit.id = id
        let revision = try context.database().update(edit)
        return written(context, id: id, revision: revision)
    }

    static func deleteDocument(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        let id = try context.documentID
        // CouchDB answers 404 (missing or deleted) before it looks at the revision.
        _ = try database.document(id)
        let edit = DocumentEdit(id: id, revision: try context.revisionOption(), isDeleted: true)
        let revision = try database.update(edit)
        return .json(200, DocumentJSON.writeResult(id: id, revision: revision),
                     headers: [("ETag", "\"\(revision)\"")])
    }

    static func copyDocument(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        let source = try database.document(try context.documentID, revision: try context.revisionOption())
        guard let destination = context.request.header("destination") else {
            throw CouchError.badRequest("Destination header is mandatory for COPY.")
        }
        let parts = destination.split(separator: "?", maxSplits: 1)
        guard let rawID = parts.first.flatMap({ PercentDecoding.decode($0, plusIsSpace: false) }) else {
            throw CouchError.badRequest("Invalid Destination header")
        }
        var destinationRevision: RevisionID?
        if parts.count == 2 {
            guard parts[1].hasPrefix("rev="), let revision = RevisionID(String(parts[1].dropFirst(4))) else {
                throw CouchError.badRequest("Invalid rev format")
            }
            destinationRevision = revision
        }
        let targetID = try DocumentID.validated(rawID)
        guard case .object(let body) = try JSONValue.parse(source.revision.body) else {
            throw CouchError.internalError("stored body is not an object")
        }
        let edit = DocumentEdit(id: targetID, revision: destinationRevision, body: body)
        let revision = try database.update(edit)
        return .json(201, DocumentJSON.writeResult(id: targetID, revision: revision),
                     headers: [("ETag", "\"\(revision)\"")])
    }

    /// `_rev` may come in the body, `?rev=` or `If-Match`; when two disagree CouchDB refuses.
    static func reconcileRevision(body: RevisionID?, request: RevisionID?) throws(CouchError) -> RevisionID? {
        if let body, let request, body != request {
            throw CouchError.badRequest("Document rev from request body and query string have different values")
        }
        return body ?? request
    }

    static func written(_ context: RouteContext, id: DocumentID, revision: RevisionID) -> HTTPResponse {
        let accepted = context.request.queryValue("batch") == "ok"
        return .json(accepted ? 202 : 201, DocumentJSON.writeResult(id: id, revision: revision),
                     headers: [("ETag", "\"\(revision)\""),
                               ("Location", "/\(context.endpoint.databaseName?.rawValue ?? "")/\(id.rawValue)")])
    }
}

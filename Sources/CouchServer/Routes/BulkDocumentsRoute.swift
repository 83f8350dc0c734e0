import CouchCore
import CouchStore

/// `POST /db/_bulk_docs`: many documents in one commit, each with its own result.
enum BulkDocumentsRoute {
    static func postBulkDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        guard let docsValue = body["docs"] else {
            throw CouchError.badRequest("POST body must include `docs` parameter.")
        }
        guard let docs = docsValue.arrayValue else { throw CouchError.badRequest("`docs` parameter must be an array.") }
        var newEdits = true
        if let value = body["new_edits"] {
            guard let flag = value.boolValue else { throw CouchError.badRequest("`new_edits` parameter must be a boolean.") }
            newEdits = flag
        }
        let edits = try docs.map { json throws -> DocumentEdit in
            var edit = try DocumentEdit(json: json)
            if edit.id == nil, newEdits { edit.id = DocumentID(context.server.uuids.next()) }
            // CouchDB refuses the whole request (`chttpd_db:validate_revs`).
            if !newEdits, edit.revision == nil, edit.id?.isLocal != true {
                throw CouchError.badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
            }
            return edit
        }
        // Each document passes the authorization policy's write check; a refused one
        // gets its error as its result and is not written.
        let database = try context.database()
        for edit in edits { try database.validatePartitioned(edit.id) }
        let authorized = try context.authorizedEdits(edits, in: database, newEdits: newEdits)
        let accepted = authorized.compactMap { try? $0.get() }
        // `all_or_nothing`: one failure and nothing is written; CouchDB answers 417 with the failures.
        let allOrNothing = newEdits && body["all_or_nothing"]?.boolValue == true
        var aborted = allOrNothing && accepted.count < authorized.count
        var outcomes: [WriteResult] = []
        if !aborted, !accepted.isEmpty {
            do {
                outcomes = try database.bulkUpdate(accepted, newEdits: newEdits, allOrNothing: allOrNothing, as: context.user)
            } catch let failure as AllOrNothingAborted {
                outcomes = failure.results
                aborted = true
            }
        }
        var written = outcomes.makeIterator()
        let results = authorized.map { result -> WriteResult in
            switch result {
            // Not written because another failed first: not a failure of its own.
            case .success: written.next() ?? (aborted ? .success(RevisionID(generation: 0, digest: "0"))
                                              : .failure(CouchError.internalError("missing write result")))
            case .failure(let error): .failure(error)
            }
        }
        if aborted {
            let failures = zip(edits, results).compactMap { edit, result -> JSONValue? in
                guard case .failure(let error) = result else { return nil }
                return ["id": JSONValue(edit.id?.rawValue ?? ""), "rev": edit.revision.map { JSONValue($0.description) } ?? .null,
                        "error": JSONValue(error.error), "reason": JSONValue(error.reason)]
            }
            return .json(417, .array(failures))
        }
        var output: [JSONValue] = []
        for (edit, result) in zip(edits, results) {
            let id = JSONValue(edit.id?.rawValue ?? "")
            switch result {
            case .success(let revision):
                // With new_edits=false CouchDB lists only the failures.
                if newEdits { output.append(["ok": true, "id": id, "rev": JSONValue(revision.description)]) }
            case .failure(let error):
                var entry: JSONObject = ["id": id]
                if let revision = edit.revision, !newEdits { entry["rev"] = JSONValue(revision.description) }
                entry["error"] = JSONValue(error.error)
                entry["reason"] = JSONValue(error.reason)
                output.append(.object(entry))
            }
        }
        return .json(context.quorumStatus(201, bodyW: body["w"]), .array(output))
    }
}

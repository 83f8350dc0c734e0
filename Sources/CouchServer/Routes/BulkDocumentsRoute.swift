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
        // CouchDB 3 answers `all_or_nothing` with 417 for every document, writing none (its
        // clustered `fabric_doc_update` cannot make a write atomic across shards).
        if newEdits, body["all_or_nothing"]?.boolValue == true {
            return .json(417, .array(edits.map { edit in
                ["id": JSONValue(edit.id?.rawValue ?? ""), "rev": JSONValue(edit.revision?.description ?? "0-"),
                 "error": "not_implemented", "reason": "all_or_nothing is not supported"]
            }))
        }
        // Each document passes the authorization policy's write check; a refused one
        // gets its error as its result and is not written.
        let database = try context.database()
        for edit in edits { try database.validatePartitioned(edit.id) }
        let authorized = try context.authorizedEdits(edits, in: database, newEdits: newEdits)
        let accepted = authorized.compactMap { try? $0.get() }
        let outcomes = accepted.isEmpty ? [] : try database.bulkUpdate(accepted, newEdits: newEdits, as: context.user)
        var written = outcomes.makeIterator()
        let results = authorized.map { result -> WriteResult in
            switch result {
            case .success: written.next() ?? .failure(CouchError.internalError("missing write result"))
            case .failure(let error): .failure(error)
            }
        }
        // Written as bytes, a result at a time: a `JSONValue` per document cost more than its write.
        var output: [UInt8] = [UInt8(ascii: "[")]
        output.reserveCapacity(results.count * 80 + 2)
        var listed = 0
        for (edit, result) in zip(edits, results) {
            // With new_edits=false CouchDB lists only the failures.
            if case .success = result, !newEdits { continue }
            if listed > 0 { output.append(UInt8(ascii: ",")) }
            listed += 1
            switch result {
            case .success(let revision):
                DocumentJSON.appendWriteResult(id: edit.id ?? DocumentID(""), revision: revision, to: &output)
            case .failure(let error):
                var entry: JSONObject = ["id": JSONValue(edit.id?.rawValue ?? "")]
                if let revision = edit.revision, !newEdits { entry["rev"] = JSONValue(revision.description) }
                entry["error"] = JSONValue(error.error)
                entry["reason"] = JSONValue(error.reason)
                JSONValue.object(entry).write(to: &output)
            }
        }
        output.append(contentsOf: "]\n".utf8)
        return .json(context.quorumStatus(201, bodyW: body["w"]), bytes: output)
    }
}

import CouchCore
import CouchStore

/// `POST /db/_bulk_docs`: many documents in one commit, each with its own result.
enum BulkDocumentsRoute {
    /// What a request asks: its documents read as edits, and its options.
    private struct Request {
        var edits: [DocumentEdit]
        var newEdits: Bool
        var allOrNothing: Bool
        var w: JSONValue?
    }

    static func postBulkDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let request = try cursorRequest(context) ?? parsedRequest(context)
        let (edits, newEdits) = (request.edits, request.newEdits)
        // CouchDB 3 answers `all_or_nothing` with 417 for every document, writing none (its
        // clustered `fabric_doc_update` cannot make a write atomic across shards).
        if newEdits, request.allOrNothing {
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
        return .json(context.quorumStatus(201, bodyW: request.w), bytes: output)
    }

    private static func parsedRequest(_ context: RouteContext) throws -> Request {
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
            try checked(DocumentEdit(json: json), newEdits: newEdits, context)
        }
        return Request(edits: edits, newEdits: newEdits, allOrNothing: body["all_or_nothing"]?.boolValue == true,
                       w: body["w"])
    }

    /// The request read by a cursor, without parsing its documents' bodies, which are stored as
    /// the bytes they came in when those are canonical (`DocumentEdit.CanonicalDocument`): building
    /// each body's value and writing it again was a third of a target's work in a replication.
    /// Nil for anything unusual (invalid JSON, a member twice, a `new_edits` that is not a
    /// boolean), which `parsedRequest` reads and answers as before.
    private static func cursorRequest(_ context: RouteContext) throws -> Request? {
        let bytes = context.request.body[...]
        var documents: [Sent]?
        var newEdits: JSONValue?
        var allOrNothing: JSONValue?
        var w: JSONValue?
        let read: Void? = try? JSONCursor.read(bytes, maximumDepth: JSONDepth.maximumParsed) { cursor throws(JSONParseError) in
            var seen: Set<String> = []
            try cursor.enterObject()
            while let key = try cursor.nextMember() {
                guard seen.insert(key).inserted else { throw JSONParseError(offset: cursor.position, message: "twice") }
                switch key {
                case "docs": documents = try readDocuments(&cursor)
                case "new_edits": newEdits = try cursor.readValue()
                case "all_or_nothing": allOrNothing = try cursor.readValue()
                case "w": w = try cursor.readValue()
                default: _ = try cursor.skipValue()
                }
            }
        }
        guard read != nil, let documents else { return nil }
        let flag = newEdits.map { $0.boolValue } ?? true
        guard let flag else { return nil }
        let edits = try documents.map { document throws -> DocumentEdit in
            let edit = try document.canonical?.edit() ?? DocumentEdit(json: try parse(bytes[document.range]))
            return try checked(edit, newEdits: flag, context)
        }
        return Request(edits: edits, newEdits: flag, allOrNothing: allOrNothing?.boolValue == true, w: w)
    }

    /// A document as the request sent it: found canonical while its JSON was checked, or to be
    /// parsed from its range.
    private typealias Sent = (canonical: DocumentEdit.CanonicalDocument?, range: Range<Int>)

    /// The `docs` array, each document read as a canonical one in the same pass that checks it.
    private static func readDocuments(_ cursor: inout JSONCursor) throws(JSONParseError) -> [Sent] {
        var documents: [Sent] = []
        try cursor.enterArray()
        while try cursor.nextElement() {
            var canonical: DocumentEdit.CanonicalDocument?
            let range = try cursor.passValue { buffer, start in
                guard let (document, end) = DocumentEdit.CanonicalDocument.scan(buffer, from: start) else { return nil }
                canonical = document
                return end
            }
            documents.append((canonical, range))
        }
        return documents
    }

    private static func parse(_ document: ArraySlice<UInt8>) throws(CouchError) -> JSONValue {
        do { return try JSONValue.parse(document) } catch { throw CouchError.badRequest("invalid UTF-8 JSON") }
    }

    /// A document's edit as the request may have it: a new document gets an ID; CouchDB refuses
    /// the whole request (`chttpd_db:validate_revs`) for a replicated one without a revision.
    private static func checked(_ edit: DocumentEdit, newEdits: Bool, _ context: RouteContext) throws -> DocumentEdit {
        var edit = edit
        if edit.id == nil, newEdits { edit.id = DocumentID(context.server.uuids.next()) }
        if !newEdits, edit.revision == nil, edit.id?.isLocal != true {
            throw CouchError.badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
        }
        return edit
    }
}

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
        let options = try DocumentRenderOptions(context, database: database)
        var snapshot = try database.document(id, revision: try context.revisionOption())
        // `?rev=R&latest=true`: the leaf descending from R that CouchDB's order prefers.
        if let requested = try context.revisionOption(), try context.boolOption("latest") {
            let descendants = Set(snapshot.record.tree.leaves(descendingFrom: requested).map(\.revision))
            if let leaf = snapshot.record.tree.leaves.first(where: { descendants.contains($0.revision) }),
               leaf.revision != requested {
                snapshot = try database.document(id, revision: leaf.revision)
            }
        }
        // The revision names the body only when no option adds what else the tree or the
        // attachments hold (`_conflicts`, `_revs_info`, ...): then no ETag, so no cache serves
        // an answer made stale by a new conflict. CouchDB sends none when it adds metadata.
        let etagHeaders: [(name: String, value: String)]
        if Self.bodyDependsOnlyOnRevision(context) {
            let etag = "\"\(snapshot.revision.revision)\""
            if context.etagMatches(etag) {
                return HTTPResponse(status: 304, headers: [("ETag", etag)])
            }
            etagHeaders = [("ETag", etag)]
        } else {
            etagHeaders = []
        }
        if context.request.acceptsMultipart("related"),
           let multipart = try MultipartDocument.related(snapshot.revision, record: snapshot.record, options: options) {
            var response = multipart.response(subtype: "related")
            response.headers.append(contentsOf: etagHeaders)
            return response
        }
        return .json(200, bytes: try DocumentJSON.render(snapshot.revision, record: snapshot.record, options: options),
                     headers: etagHeaders)
    }

    private static let treeDependentOptions = ["conflicts", "deleted_conflicts", "meta", "revs_info", "local_seq",
                                               "attachments", "atts_since", "latest", "open_revs"]

    private static func bodyDependsOnlyOnRevision(_ context: RouteContext) -> Bool {
        !treeDependentOptions.contains { name in
            guard let value = context.request.queryValue(name) else { return false }
            return name == "atts_since" || name == "open_revs" || value.lowercased() == "true"
        }
    }

    static func putDocument(_ context: RouteContext) throws -> HTTPResponse {
        let id = try context.documentID
        let database = try context.database()
        var following: [String: StagedBlob] = [:]
        var edit: DocumentEdit
        if let upload = context.request.bodySink as? MultipartUploadSink {
            let received = try upload.finish()
            let json = try parseDocument(received.document)
            following = try matchFollowingParts(json, parts: received.parts, database: database)
            edit = try DocumentEdit(json: json)
        } else {
            edit = try context.documentEditBody()
        }
        edit.id = id
        try database.validatePartitioned(id)
        edit.revision = try reconcileRevision(body: edit.revision, context)
        let newEdits = try context.boolOption("new_edits", default: true)
        edit = try context.authorizedEdit(edit, in: database, newEdits: newEdits)
        let write = { [edit] in try database.bulkUpdate([edit], newEdits: newEdits, following: following, as: context.user)[0].get() }
        if let queued = try context.batchWrite(id: id, write) { return queued }
        return written(context, id: id, revision: try write())
    }

    private static func parseDocument(_ bytes: [UInt8]) throws(CouchError) -> JSONValue {
        do {
            return try JSONValue.parse(bytes)
        } catch {
            throw CouchError.badRequest("invalid UTF-8 JSON in the multipart document part")
        }
    }

    /// Pairs the attachments marked `follows` with the uploaded parts: by the part's file
    /// name when it has one, otherwise in the order the attachments appear, and stores them
    /// (compressible types unencoded compressed). Parts left over are dropped.
    private static func matchFollowingParts(_ json: JSONValue, parts: [(filename: String?, writer: BlobWriter)],
                                            database: Database) throws -> [String: StagedBlob] {
        var remaining = parts
        var matched: [String: BlobWriter] = [:]
        let following = (json["_attachments"]?.objectValue ?? JSONObject()).filter { $0.value["follows"]?.boolValue == true }
        for (name, _) in following {
            let index = remaining.firstIndex { $0.filename == name } ?? remaining.firstIndex { $0.filename == nil }
                ?? remaining.indices.first
            guard let index else {
                throw CouchError.badRequest("Missing attachment body for \(name) in the multipart request")
            }
            matched[name] = remaining.remove(at: index).writer
        }
        var staged: [String: StagedBlob] = [:]
        do {
            for (name, meta) in following {
                guard let writer = matched[name] else { continue }
                let compressing = database.attachments.compresses(contentType: meta["content_type"]?.stringValue,
                                                                  encoding: meta["encoding"]?.stringValue)
                staged[name] = try database.attachments.commit(writer, compressing: compressing)
            }
        } catch {
            database.discardStaged(Array(staged.values))
            throw error
        }
        return staged
    }

    static func postDocument(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        var edit = try context.documentEditBody()
        let id = edit.id ?? DocumentID(context.server.uuids.next())
        edit.id = id
        let database = try context.database()
        try database.validatePartitioned(id)
        edit = try context.authorizedEdit(edit, in: database)
        let write = { [edit] in try database.update(edit, as: context.user) }
        if let queued = try context.batchWrite(id: id, write) { return queued }
        return written(context, id: id, revision: try write())
    }

    static func deleteDocument(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        let id = try context.documentID
        // CouchDB answers 404 (missing or deleted) before it looks at the revision.
        _ = try database.document(id)
        let edit = try context.authorizedEdit(DocumentEdit(id: id, revision: try context.revisionOption(), isDeleted: true),
                                              in: database)
        let revision = try database.update(edit, as: context.user)
        return .json(context.quorumStatus(200), bytes: DocumentJSON.writeResult(id: id, revision: revision),
                     headers: [("ETag", "\"\(revision)\"")])
    }

    static func copyDocument(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        var source = try database.document(try context.documentID, revision: try context.revisionOption())
        // What is copied is what the user may read (a replication document's credentials stay behind).
        source = DocumentSnapshot(record: source.record,
                                  revision: try context.documentReadRule(for: database).readable(source.revision))
        guard let destination = context.request.header("destination") else {
            throw CouchError.badRequest("Destination header is mandatory for COPY.")
        }
        // CouchDB's parse_copy_destination_header: a relative ID, then `?rev=N-x`; the ID
        // before `?` may be empty (and is then refused as an ID).
        if destination.hasPrefix("http://") || destination.hasPrefix("https://") {
            throw CouchError.badRequest("Destination URL must be relative.")
        }
        let parts = destination.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let rawID = parts.first.flatMap({ PercentDecoding.decode($0, plusIsSpace: false) }) else {
            throw CouchError.badRequest("Invalid Destination header")
        }
        var destinationRevision: RevisionID?
        if parts.count == 2 {
            let query = parts[1].split(separator: "=", omittingEmptySubsequences: false)
            guard query.count == 2, let revision = RevisionID(String(query[1])) else {
                throw CouchError.badRequest("Invalid rev format")
            }
            destinationRevision = revision
        }
        let targetID = try DocumentID.validated(rawID)
        try database.validatePartitioned(targetID)
        guard case .object(let body) = try JSONValue.parse(source.revision.body) else {
            throw CouchError.internalError("stored body is not an object")
        }
        let edit = try context.authorizedEdit(DocumentEdit(id: targetID, revision: destinationRevision, body: body),
                                              in: database)
        let revision = try database.update(edit, keeping: source.revision.attachments, as: context.user)
        return .json(context.quorumStatus(201), bytes: DocumentJSON.writeResult(id: targetID, revision: revision),
                     headers: [location(context, id: targetID), ("ETag", "\"\(revision)\"")])
    }

    /// `_rev` may come in the body, `?rev=` or `If-Match`; when two disagree CouchDB refuses,
    /// naming them as `chttpd_db:couch_doc_from_req` does: the body's is compared with the
    /// query's, then with `If-Match`; without one in the body, the query's with `If-Match`.
    static func reconcileRevision(body: RevisionID?, _ context: RouteContext) throws(CouchError) -> RevisionID? {
        guard let body else { return try context.revisionOption() }
        if let query = try context.revisionOption(ignoringIfMatch: true), query != body {
            throw CouchError.badRequest("Document rev from request body and query string have different values")
        }
        if let etag = try context.ifMatchRevision(), etag != body {
            throw CouchError.badRequest("Document rev and etag have different values")
        }
        return body
    }

    static func location(_ context: RouteContext, id: DocumentID) -> (name: String, value: String) {
        ("Location", context.endpoint.databaseName.map { context.absoluteURL(database: $0, id: id) } ?? "/")
    }

    static func written(_ context: RouteContext, id: DocumentID, revision: RevisionID) -> HTTPResponse {
        .json(context.quorumStatus(201), bytes: DocumentJSON.writeResult(id: id, revision: revision),
              headers: [("ETag", "\"\(revision)\""), location(context, id: id)])
    }
}

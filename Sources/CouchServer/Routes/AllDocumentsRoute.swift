import CouchCore
import CouchStore

/// `/db/_all_docs`, `/db/_design_docs`, `/db/_local_docs` and `/db/_partition/{p}/_all_docs`,
/// GET and POST. A POST body's members are options as the query string's are (`keys`,
/// `limit`, ...), the query string winning, as CouchDB's `parse_body_and_query`.
enum AllDocumentsRoute {
    /// Which documents a listing covers.
    enum Namespace {
        case all, design, local
        /// One partition's documents (`/db/_partition/{p}/_all_docs`).
        case partition(String)
    }

    static func getAllDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, namespace: .all)
    }

    static func postAllDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(try withBodyOptions(context), namespace: .all)
    }

    static func getDesignDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, namespace: .design)
    }

    static func postDesignDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(try withBodyOptions(context), namespace: .design)
    }

    static func getLocalDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, namespace: .local)
    }

    static func postLocalDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(try withBodyOptions(context), namespace: .local)
    }

    /// The request with the POST body's members before the query string's parameters, so that
    /// every option is read one way and the query string wins.
    static func withBodyOptions(_ context: RouteContext) throws -> RouteContext {
        try context.requireJSONContentType()
        guard !context.request.body.isEmpty else { return context }
        let body = try context.jsonObjectBody()
        if let keys = body["keys"], keys.arrayValue == nil {
            throw CouchError.badRequest("`keys` body member must be an array.")
        }
        let request = context.request
        let merged = HTTPRequest(method: request.method, path: request.path,
                                 query: body.map { ($0.key, $0.value.serializedString()) } + request.query,
                                 headers: request.headers, body: request.body, bodySink: request.bodySink)
        return RouteContext(server: context.server, request: merged, endpoint: context.endpoint, user: context.user,
                            databaseAccess: context.databaseAccess)
    }

    static func respond(_ context: RouteContext, namespace: Namespace) throws -> HTTPResponse {
        let database = try context.database()
        let keys = try context.jsonOption("keys")
        let includeDocs = try context.boolOption("include_docs")
        var render = DocumentRenderOptions(reader: try context.documentReadRule(for: database))
        render.conflicts = try context.boolOption("conflicts")
        render.attachments = try AttachmentRenderOptions(context, database: database)
        var query = AllDocumentsQuery()
        query.descending = try context.boolOption("descending")
        query.inclusiveEnd = try context.boolOption("inclusive_end", default: true)
        query.limit = try context.nonNegativeIntOption("limit")
        query.skip = try context.nonNegativeIntOption("skip") ?? 0
        query.includeBodies = includeDocs
        query.includeTree = includeDocs && render.conflicts
        if let key = try stringKey(context, "key") {
            query.startKey = key
            query.endKey = key
            query.inclusiveEnd = true
        } else {
            query.startKey = try stringKey(context, "startkey") ?? stringKey(context, "start_key")
            query.endKey = try stringKey(context, "endkey") ?? stringKey(context, "end_key")
        }
        // As CouchDB's `couch_mrview_util:validate_args`: `keys` excludes every other range.
        if keys != nil, ["key", "startkey", "start_key", "endkey", "end_key"].contains(where: { context.request.queryValue($0) != nil }) {
            throw CouchError(.queryParseError, "`keys` is incompatible with `key`, `start_key` and `end_key`")
        }
        switch namespace {
        case .all, .local:
            break
        case .design:
            query.within = ("_design/", "_design0")
        case .partition(let partition):
            query.within = DocumentID.partitionRange(partition)
            // CouchDB's `[query_server_config] partition_query_limit`: the default and the most.
            let most = context.server.configuration.partitionQueryLimit
            if let limit = query.limit, limit > most {
                throw CouchError(.queryParseError, "Limit is too large, must not exceed \(most)")
            }
            query.limit = query.limit ?? most
        }
        let updateSequence = try context.boolOption("update_seq") ? database.updateSequence : nil
        if case .local = namespace {
            return try localDocuments(database, query: query, keys: keys, includeDocs: includeDocs,
                                      updateSequence: updateSequence)
        }
        guard let keys else {
            let pages = AllDocumentsPages(database: database, query: query, includeDocs: includeDocs, render: render,
                                          updateSequence: updateSequence)
            return HTTPResponse(status: 200, headers: [("Content-Type", HTTPResponse.jsonContentType)],
                                body: .stream(ListingStream(pages, owner: database.name.rawValue)))
        }
        guard var keyList = keys.arrayValue else { throw CouchError.badRequest("`keys` must be an array") }
        // `_design_docs` lists design documents only: CouchDB leaves other keys out, unanswered.
        if case .design = namespace {
            keyList = keyList.filter { $0.stringValue?.hasBytePrefix("_design/") == true }
        }
        // A key outside the listed partition names no document of it.
        let ids = keyList.map { key -> DocumentID in
            let id = key.stringValue ?? ""
            if let within = query.within, case .partition = namespace, !id.hasPrefix(within.low) {
                return DocumentID("")
            }
            return DocumentID(id)
        }
        let found = try database.documents(ids: ids, includeBodies: includeDocs, includeTree: query.includeTree)
        var listed = Array(zip(keyList, found)).map { key, row in RowOutput(key: key, row: row) }
        if query.descending { listed.reverse() }
        let rows = Array(listed.dropFirst(query.skip).prefix(query.limit ?? Int.max))
        var counting = query
        counting.startKey = nil
        var output = AllDocumentsPages.prelude(total: try database.allDocumentsPosition(counting).total, offset: nil,
                                                updateSequence: updateSequence)
        for (index, row) in rows.enumerated() {
            output.append(contentsOf: index == 0 ? "\n".utf8 : ",\n".utf8)
            try row.write(to: &output, includeDocs: includeDocs, render: render)
        }
        output.append(contentsOf: AllDocumentsPages.epilogue)
        return .json(200, bytes: output)
    }

    /// `_local_docs`: as `_all_docs`, with `total_rows` and `offset` null as CouchDB has them.
    private static func localDocuments(_ database: Database, query: AllDocumentsQuery, keys: JSONValue?, includeDocs: Bool,
                                       updateSequence: Int?) throws -> HTTPResponse {
        var rows: [(key: JSONValue, document: LocalDocument?)]
        if let keys {
            guard let keyList = keys.arrayValue else { throw CouchError.badRequest("`keys` must be an array") }
            var listed = Array(zip(keyList, try database.localDocuments(ids: keyList.map { DocumentID($0.stringValue ?? "") })))
                .map { (key: $0.0, document: $0.1) }
            if query.descending { listed.reverse() }
            rows = Array(listed.dropFirst(query.skip).prefix(query.limit ?? Int.max))
        } else {
            rows = try database.localDocuments(query).map { (key: JSONValue($0.id.rawValue), document: $0) }
        }
        var text = #"{"total_rows":null,"offset":null"#
        if let updateSequence { text += #","update_seq":\#(UpdateSequence(updateSequence).json.serializedString())"# }
        var output = Array((text + #","rows":["#).utf8)
        for (index, row) in rows.enumerated() {
            output.append(contentsOf: index == 0 ? "\n".utf8 : ",\n".utf8)
            guard let document = row.document else {
                output.append(literal: #"{"key":"#)
                row.key.write(to: &output)
                output.append(literal: #","error":"not_found"}"#)
                continue
            }
            output.append(literal: #"{"id":"#)
            JSONWriter.appendString(document.id.rawValue, to: &output)
            output.append(literal: #","key":"#)
            JSONWriter.appendString(document.id.rawValue, to: &output)
            output.append(literal: #","value":{"rev":"#)
            JSONWriter.appendString(document.revisionID.description, to: &output)
            output.append(UInt8(ascii: "}"))
            if includeDocs {
                output.append(literal: #","doc":"#)
                output.append(contentsOf: DocumentJSON.renderLocal(document))
            }
            output.append(UInt8(ascii: "}"))
        }
        output.append(contentsOf: AllDocumentsPages.epilogue)
        return .json(200, bytes: output)
    }

    private static func stringKey(_ context: RouteContext, _ name: String) throws -> String? {
        guard let value = try context.jsonOption(name) else { return nil }
        guard let key = value.stringValue else {
            throw CouchError(.queryParseError, "`\(name)` must be a JSON string for _all_docs")
        }
        return key
    }

    struct RowOutput {
        /// The row's key: nil for a listing, whose key is the document's ID.
        let key: JSONValue?
        let row: AllDocumentsRow?

        /// `body`: the stored body when borrowed from the statement (`row.body` is then nil).
        func write(to output: inout [UInt8], includeDocs: Bool, render: DocumentRenderOptions,
                   body borrowed: UnsafeRawBufferPointer? = nil) throws {
            guard let row else {
                output.append(literal: #"{"key":"#)
                (key ?? .null).write(to: &output)
                output.append(literal: #","error":"not_found"}"#)
                return
            }
            output.append(literal: #"{"id":"#)
            JSONWriter.appendString(row.id.rawValue, to: &output)
            output.append(literal: #","key":"#)
            if let key { key.write(to: &output) } else { JSONWriter.appendString(row.id.rawValue, to: &output) }
            output.append(literal: #","value":{"rev":"#)
            row.winner.appendJSON(to: &output)
            if row.isDeleted { output.append(literal: #","deleted":true"#) }
            output.append(UInt8(ascii: "}"))
            if includeDocs {
                output.append(literal: #","doc":"#)
                if row.isDeleted {
                    output.append(literal: "null")
                } else {
                    let revision = StoredRevision(id: row.id, revision: row.winner, isDeleted: false, body: row.body ?? [],
                                                  attachments: row.attachments)
                    let record = row.tree.map {
                        DocumentRecord(id: row.id, sequence: row.sequence, tree: $0, winner: row.winner, isDeleted: false)
                    }
                    try DocumentJSON.renderListed(revision, borrowedBody: borrowed, record: record, options: render, into: &output)
                }
            }
            output.append(UInt8(ascii: "}"))
        }

        /// A listing's row from a live document's stored bytes, as `write` writes its parsed row
        /// when the document has no attachments and only itself to show: the ID (escaped first if
        /// it needs it) as the key and `_id` too, the revision as stored (`RevisionID.isWrittenAsStored`).
        static func write(storedID id: UnsafeRawBufferPointer, revision: UnsafeRawBufferPointer,
                          body: UnsafeRawBufferPointer?, to output: inout [UInt8]) {
            guard JSONWriter.needsEscaping(utf8: id) else {
                return write(idText: id, revision: revision, body: body, to: &output)
            }
            var quoted: [UInt8] = []
            JSONWriter.appendString(utf8: id, to: &quoted)
            quoted.withUnsafeBytes { quoted in
                write(idText: UnsafeRawBufferPointer(rebasing: quoted.dropFirst().dropLast()), revision: revision,
                      body: body, to: &output)
            }
        }

        /// `idText`: the ID as it stands between the quotes of a JSON string.
        private static func write(idText id: UnsafeRawBufferPointer, revision: UnsafeRawBufferPointer,
                                  body: UnsafeRawBufferPointer?, to output: inout [UInt8]) {
            // Everything up to the body's members made on the stack and appended at once: a row
            // is a dozen pieces, and each append to the page checks its capacity and ownership.
            // (The document is `DocumentJSON.appendStored`'s, its head written here with the row's.)
            withUnsafeTemporaryAllocation(byteCount: 3 * id.count + 2 * revision.count + 64, alignment: 1) { head in
                var end = 0
                func put(_ bytes: UnsafeRawBufferPointer) {
                    guard let source = bytes.baseAddress else { return }
                    (head.baseAddress! + end).copyMemory(from: source, byteCount: bytes.count)
                    end += bytes.count
                }
                func put(_ literal: StaticString) {
                    put(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
                }
                put(#"{"id":""#); put(id); put(#"","key":""#); put(id); put(#"","value":{"rev":""#); put(revision)
                if body != nil {
                    put(#""},"doc":{"_id":""#); put(id); put(#"","_rev":""#); put(revision); put(#"""#)
                } else {
                    put(#""}}"#)
                }
                output.append(contentsOf: UnsafeRawBufferPointer(rebasing: head[..<end]))
            }
            if let body {
                DocumentJSON.appendMembers(of: body, to: &output)
                output.append(literal: "}}")
            }
        }
    }
}

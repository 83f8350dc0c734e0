import CouchCore
import CouchStore

/// `/db/_all_docs` and `/db/_design_docs`, GET and POST (`{"keys":[...]}`).
enum AllDocumentsRoute {
    static func getAllDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, keys: try context.jsonOption("keys"), designOnly: false)
    }

    static func postAllDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, keys: try postedKeys(context), designOnly: false)
    }

    static func getDesignDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, keys: try context.jsonOption("keys"), designOnly: true)
    }

    static func postDesignDocuments(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, keys: try postedKeys(context), designOnly: true)
    }

    private static func postedKeys(_ context: RouteContext) throws -> JSONValue? {
        guard !context.request.body.isEmpty else { return nil }
        return try context.jsonObjectBody()["keys"]
    }

    static func respond(_ context: RouteContext, keys: JSONValue?, designOnly: Bool) throws -> HTTPResponse {
        let database = try context.database()
        let includeDocs = try context.boolOption("include_docs")
        var render = DocumentRenderOptions()
        render.conflicts = try context.boolOption("conflicts")
        render.attachments = try AttachmentRenderOptions(context, store: database.attachments)
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
        if designOnly {
            let (low, high) = ("_design/", "_design0")
            if query.descending {
                query.startKey = min(query.startKey ?? high, high)
                query.endKey = max(query.endKey ?? low, low)
            } else {
                query.startKey = max(query.startKey ?? low, low)
                query.endKey = min(query.endKey ?? high, high)
            }
        }

        let updateSequence = try context.boolOption("update_seq") ? database.updateSequence : nil
        guard let keys else {
            let stream = AllDocumentsStream(database: database, query: query, includeDocs: includeDocs, render: render,
                                            updateSequence: updateSequence)
            return HTTPResponse(status: 200, headers: [("Content-Type", HTTPResponse.jsonContentType)], body: .stream(stream))
        }
        guard let keyList = keys.arrayValue else { throw CouchError.badRequest("`keys` must be an array") }
        let ids = keyList.map { DocumentID($0.stringValue ?? "") }
        let found = try database.documents(ids: ids, includeBodies: includeDocs, includeTree: query.includeTree)
        var listed = Array(zip(keyList, found)).map { key, row in RowOutput(key: key, row: row) }
        if query.descending { listed.reverse() }
        let rows = Array(listed.dropFirst(query.skip).prefix(query.limit ?? Int.max))
        var output = AllDocumentsStream.prelude(total: try database.info().documentCount, offset: 0,
                                                updateSequence: updateSequence)
        for (index, row) in rows.enumerated() {
            output.append(contentsOf: index == 0 ? "\n".utf8 : ",\n".utf8)
            try row.write(to: &output, includeDocs: includeDocs, render: render)
        }
        output.append(contentsOf: AllDocumentsStream.epilogue)
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
        let key: JSONValue
        let row: AllDocumentsRow?

        func write(to output: inout [UInt8], includeDocs: Bool, render: DocumentRenderOptions) throws {
            guard let row else {
                output.append(contentsOf: #"{"key":"#.utf8)
                key.write(to: &output)
                output.append(contentsOf: #","error":"not_found"}"#.utf8)
                return
            }
            output.append(contentsOf: #"{"id":"#.utf8)
            JSONWriter.appendString(row.id.rawValue, to: &output)
            output.append(contentsOf: #","key":"#.utf8)
            key.write(to: &output)
            output.append(contentsOf: #","value":{"rev":"#.utf8)
            JSONWriter.appendString(row.winner.description, to: &output)
            if row.isDeleted { output.append(contentsOf: #","deleted":true"#.utf8) }
            output.append(UInt8(ascii: "}"))
            if includeDocs {
                output.append(contentsOf: #","doc":"#.utf8)
                if row.isDeleted {
                    output.append(contentsOf: "null".utf8)
                } else {
                    let revision = StoredRevision(id: row.id, revision: row.winner, isDeleted: false, body: row.body ?? [],
                                                  attachments: row.attachments)
                    let record = row.tree.map {
                        DocumentRecord(id: row.id, sequence: row.sequence, tree: $0, winner: row.winner, isDeleted: false)
                    }
                    try DocumentJSON.render(revision, record: record, options: render, into: &output)
                }
            }
            output.append(UInt8(ascii: "}"))
        }
    }
}

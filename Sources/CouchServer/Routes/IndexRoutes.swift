import CouchCore
import CouchMango
import CouchStore

/// `/db/_index`: list, create and delete Mango indexes, stored as CouchDB stores them, in
/// `"language": "query"` design documents (so they replicate to and from CouchDB).
enum IndexRoutes {
    static func getIndexes(_ context: RouteContext) throws -> HTTPResponse {
        let indexes = try MangoIndex.list(in: try context.database())
        let invalid = CouchError(.internalServerError, "Index parameter ranges: limit > 1, skip > 0", name: "invalid_list_index_params")
        func parameter(_ name: String) throws(CouchError) -> Int? {
            guard let text = context.request.queryValue(name) else { return nil }
            guard let value = Int(text) else { throw invalid }
            return value
        }
        let limit = try parameter("limit") ?? indexes.count
        let skip = min(try parameter("skip") ?? 0, indexes.count)
        guard limit >= 1, skip >= 0 else { throw invalid }
        let page = indexes.dropFirst(skip).prefix(limit)
        return .json(200, .object(JSONObject([
            (key: "total_rows", value: JSONValue(indexes.count)),
            (key: "indexes", value: .array(page.map(\.json))),
        ])))
    }

    static func postIndex(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        try context.requireJSONContentType()
        let request = try MangoIndexRequest(try context.jsonObjectBody(), databasePartitioned: database.isPartitioned)
        let id = try DocumentID.validated(request.designID)
        let current = try currentBody(database, id)
        var result = "exists"
        if let body = try request.adding(to: current?.body) {
            try save(context, database, id: id, revision: current?.revision, body: body)
            result = "created"
        }
        return .json(200, .object(JSONObject([
            (key: "result", value: JSONValue(result)),
            (key: "id", value: JSONValue(request.designID)),
            (key: "name", value: JSONValue(request.name)),
        ])))
    }

    /// `DELETE /db/_index/{ddoc}/{type}/{name}` (`ddoc` with or without `_design/`).
    static func deleteIndex(_ context: RouteContext) throws -> HTTPResponse {
        guard case .index(_, var parts) = context.endpoint else { throw CouchError.notFound() }
        if parts.first == "_design", parts.count == 4 { parts = ["_design/" + parts[1]] + parts[2...] }
        guard parts.count == 3 else {
            throw CouchError(.methodNotAllowed, "Only POST allowed")
        }
        let design = parts[0].hasBytePrefix("_design/") ? parts[0] : "_design/" + parts[0]
        let database = try context.database()
        guard let index = try MangoIndex.list(in: database).first(where: {
            $0.designID == design && $0.kind.rawValue == parts[1] && $0.name == parts[2]
        }) else { throw CouchError.notFound("missing") }
        try remove([index], context, database, design: design)
        return .json(200, ["ok": true])
    }

    /// `POST /db/_index/_bulk_delete` with `{"docids": [...]}`: every index of each design document.
    static func postBulkDelete(_ context: RouteContext) throws -> HTTPResponse {
        guard case .index(_, let parts) = context.endpoint, parts == ["_bulk_delete"] else {
            throw CouchError(.methodNotAllowed, "Only DELETE allowed")
        }
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        guard case .array(let ids)? = body["docids"], ids.allSatisfy({ $0.stringValue != nil }) else {
            throw CouchError(.badRequest, "Bulk Delete requires an array of non-null docids. Docids: \(body["docids"]?.serializedString() ?? "undefined")",
                             name: "invalid_bulk_docs")
        }
        let database = try context.database()
        var success: [JSONValue] = [], fail: [JSONValue] = []
        for raw in ids.compactMap(\.stringValue) {
            let design = raw.hasBytePrefix("_design/") ? raw : "_design/" + raw
            let indexes = try MangoIndex.list(in: database).filter { $0.designID == design }
            do {
                guard !indexes.isEmpty else { throw CouchError.notFound("missing") }
                try remove(indexes, context, database, design: design)
                success.insert(["id": JSONValue(design), "ok": true], at: 0)
            } catch let error as CouchError {
                fail.insert(["id": JSONValue(design), "error": JSONValue(error.error == "not_found" ? "not_found" : error.reason)], at: 0)
            }
        }
        return .json(200, .object(JSONObject([(key: "success", value: .array(success)), (key: "fail", value: .array(fail))])))
    }

    private static func remove(_ indexes: [MangoIndex], _ context: RouteContext, _ database: Database, design: String) throws {
        let id = DocumentID(design)
        guard var body = try currentBody(database, id) else { throw CouchError.notFound("missing") }
        var remaining: JSONObject? = body.body
        for index in indexes {
            guard let current = remaining, let after = MangoIndexRequest.removing(index.kind, index.name, from: current) else {
                throw CouchError.notFound("missing")
            }
            remaining = after
        }
        body.body = remaining ?? JSONObject()
        if remaining == nil {
            let edit = try context.authorizedEdit(DocumentEdit(id: id, revision: body.revision, isDeleted: true), in: database)
            try write(edit, context, database)
        } else {
            try save(context, database, id: id, revision: body.revision, body: body.body)
        }
    }

    private static func currentBody(_ database: Database, _ id: DocumentID) throws -> (revision: RevisionID, body: JSONObject)? {
        guard let snapshot = try? database.document(id) else { return nil }
        guard case .object(let body) = try JSONValue.parse(snapshot.revision.body) else { return nil }
        return (snapshot.revision.revision, body)
    }

    private static func save(_ context: RouteContext, _ database: Database, id: DocumentID, revision: RevisionID?,
                             body: JSONObject) throws {
        let edit = try context.authorizedEdit(DocumentEdit(id: id, revision: revision, body: body), in: database)
        try write(edit, context, database)
    }

    private static func write(_ edit: DocumentEdit, _ context: RouteContext, _ database: Database) throws {
        do {
            _ = try database.update(edit, as: context.user)
        } catch let error as CouchError where error.kind == .conflict {
            throw CouchError(.internalServerError, "Encountered a conflict while saving the design document.",
                             name: "error_saving_ddoc")
        }
    }
}

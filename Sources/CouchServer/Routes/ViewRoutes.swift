import CouchCore
import CouchFunctions
import CouchIndex
import CouchStore
import Foundation

/// `/db/_design/ddoc/_view/name` (GET, POST with `keys`, POST `.../queries`),
/// `/db/_design/ddoc/_info`, `POST /db/_compact/ddoc` and `POST /db/_view_cleanup`.
enum ViewRoutes {
    /// Design-document resources this file serves, by name; others answer 404.
    static func handle(_ context: RouteContext) throws -> HTTPResponse {
        guard case .designResource(_, _, let resource) = context.endpoint else { throw CouchError.notFound("missing") }
        let method = HTTPMethod(rawValue: context.request.method)
        switch (resource, method) {
        case ("_view", .GET?), ("_view", .HEAD?): return try getView(context)
        case ("_view", .POST?): return try postView(context)
        case ("_info", .GET?), ("_info", .HEAD?): return try getInfo(context)
        case ("_compact", .POST?): return try postCompact(context)
        case ("_view", _): throw CouchError(.methodNotAllowed, "Only GET,HEAD,POST allowed")
        case ("_info", _): throw CouchError(.methodNotAllowed, "Only GET,HEAD allowed")
        case ("_compact", _): throw CouchError(.methodNotAllowed, "Only POST allowed")
        default: throw CouchError.notFound("missing")
        }
    }

    /// The path segments after `_design/ddoc/_view` (the view's name, then `queries`).
    private static func viewArguments(_ context: RouteContext) -> [String] {
        let parts = context.request.path.split(separator: "/").compactMap { PercentDecoding.decode($0, plusIsSpace: false) }
        let resourceIndex = parts.count > 1 && parts[1] == "_design" ? 3 : 2
        return parts.count > resourceIndex + 1 ? Array(parts[(resourceIndex + 1)...]) : []
    }

    /// `/db/_partition/{p}/_design/ddoc/_view/name` (GET, POST with `keys`): the view's rows of
    /// that partition only.
    static func partitionView(_ context: RouteContext, design name: String, view: String, partition: String,
                              posted: Bool) throws -> HTTPResponse {
        let database = try context.database()
        let design = try designDocument(context, database: database, id: DocumentID(DocumentID.designPrefix + name))
        var options: ViewQueryOptions
        if posted {
            try context.requireJSONContentType()
            options = try ViewQueryOptions(body: try context.jsonObjectBody(), query: context.request.query)
        } else {
            options = try ViewQueryOptions(query: context.request.query.filter { $0.name != "partition" })
        }
        let query = try ViewQuery(context: context, database: database, design: design, viewName: view, options: options,
                                  partition: partition)
        return HTTPResponse(status: 200, headers: [("Content-Type", HTTPResponse.jsonContentType)],
                            body: .stream(ListingStream(ViewPages(query: query), owner: database.name.rawValue)))
    }

    /// The design document a request names (CouchDB's 404 `missing`/`deleted`).
    static func designDocument(_ context: RouteContext, database: Database, id named: DocumentID? = nil) throws -> DesignDocument {
        let id = try named ?? context.documentID
        if let design = try context.server.functions.designDocuments(database).first(where: { $0.id == id }) {
            return design
        }
        if let record = try database.record(id), record.isDeleted { throw CouchError.notFound("deleted") }
        throw CouchError.notFound("missing")
    }

    static func getView(_ context: RouteContext) throws -> HTTPResponse {
        let arguments = viewArguments(context)
        guard arguments.count == 1 else { throw CouchError.notFound("missing") }
        let options = try ViewQueryOptions(query: context.request.query)
        return try respond(context, view: arguments[0], options: options)
    }

    static func postView(_ context: RouteContext) throws -> HTTPResponse {
        let arguments = viewArguments(context)
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        if arguments.count == 2, arguments[1] == "queries" {
            return try queries(context, view: arguments[0], body: body)
        }
        guard arguments.count == 1 else { throw CouchError.notFound("missing") }
        let options = try ViewQueryOptions(body: body, query: context.request.query)
        return try respond(context, view: arguments[0], options: options)
    }

    /// A view query as the `_list` route reads it: the same options and checks as the
    /// view route, then `prelude`/`nextRows()` (or `totalRows`, `offset` and the rows).
    static func query(_ context: RouteContext, design: DesignDocument, view: String,
                      options: ViewQueryOptions) throws -> ViewQuery {
        try ViewQuery(context: context, database: try context.database(), design: design, viewName: view, options: options)
    }

    private static func respond(_ context: RouteContext, view: String, options: ViewQueryOptions) throws -> HTTPResponse {
        let database = try context.database()
        let design = try designDocument(context, database: database)
        let query = try ViewQuery(context: context, database: database, design: design, viewName: view, options: options)
        return HTTPResponse(status: 200, headers: [("Content-Type", HTTPResponse.jsonContentType)],
                            body: .stream(ListingStream(ViewPages(query: query), owner: database.name.rawValue)))
    }

    /// `POST .../_view/name/queries`: `{"queries": [{...}, ...]}` answers
    /// `{"results": [{total_rows, offset, rows}, ...]}`, each query with its own parameters.
    private static func queries(_ context: RouteContext, view: String, body: JSONObject) throws -> HTTPResponse {
        guard case .array(let entries)? = body["queries"] else {
            throw CouchError(.queryParseError, "`queries` member must be an array of objects")
        }
        let database = try context.database()
        let design = try designDocument(context, database: database)
        var output: [UInt8] = Array(#"{"results":["#.utf8)
        for (position, entry) in entries.enumerated() {
            guard case .object(let parameters) = entry else {
                throw CouchError(.queryParseError, "`queries` member must be an array of objects")
            }
            let options = try ViewQueryOptions(query: context.request.query, body: parameters)
            let query = try ViewQuery(context: context, database: database, design: design, viewName: view, options: options)
            if position > 0 { output.append(UInt8(ascii: ",")) }
            output += query.prelude
            var written = 0
            while let rows = try query.nextRows() {
                for row in rows {
                    output += Array((written == 0 ? "\n" : ",\n").utf8)
                    output += row
                    written += 1
                }
            }
            output += Array("\n]}".utf8)
        }
        output += Array("]}\n".utf8)
        return .json(200, bytes: output)
    }

    // MARK: Information and maintenance

    /// `GET /db/_design/ddoc/_info`: the index's state, as CouchDB's `view_index` object.
    static func getInfo(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        let design = try designDocument(context, database: database)
        let views = JavaScriptViews(design: design, database: database.name, runtime: context.server.functions,
                                    partitioned: database.isPartitioned)
        let index = views.views.isEmpty ? nil
            : try context.server.indexes.index(for: views.definition, in: database, query: false)
        let size = index?.fileSize ?? 0
        let active = index?.activeSize ?? 0
        let name = design.id.nameAfterPrefix
        return .json(200, .object(JSONObject([
            (key: "name", value: JSONValue(name)),
            (key: "view_index", value: .object(JSONObject([
                (key: "collator_versions", value: [JSONValue(Collation.collatorVersion)]),
                (key: "compact_running", value: false),
                (key: "language", value: design.body["language"] ?? JSONValue("javascript")),
                (key: "purge_seq", value: JSONValue(index?.purgeSequence ?? 0)),
                (key: "signature", value: JSONValue(views.definition.signature)),
                (key: "sizes", value: ["active": JSONValue(active), "external": JSONValue(active), "file": JSONValue(size)]),
                (key: "update_seq", value: JSONValue(index?.updateSequence ?? 0)),
                (key: "updater_running", value: JSONValue(index?.isUpdating ?? false)),
                (key: "waiting_clients", value: 0),
                (key: "waiting_commit", value: false),
            ]))),
        ])))
    }

    /// `POST /db/_compact/ddoc`: the design document's index rewritten without free pages,
    /// in the background; 202 as CouchDB.
    static func postCompact(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let database = try context.database()
        let design = try designDocument(context, database: database)
        let views = JavaScriptViews(design: design, database: database.name, runtime: context.server.functions,
                                    partitioned: database.isPartitioned)
        if !views.views.isEmpty {
            let index = try context.server.indexes.index(for: views.definition, in: database)
            let logger = context.server.logger
            Thread.detachNewThread {
                do {
                    try index.compact()
                } catch {
                    logger.error("compaction of the index of \(design.id) in \(database.name) failed: \(error)")
                }
            }
        }
        return .json(202, ["ok": true])
    }

    /// `POST /db/_view_cleanup`: index files no design document uses are removed.
    static func postViewCleanup(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let database = try context.database()
        context.server.indexes.cleanup(database)
        return .json(202, ["ok": true])
    }

    /// The signatures of a database's JavaScript views (what `_view_cleanup` keeps).
    static func javaScriptSignatures(_ functions: FunctionRuntime) -> @Sendable (Database) -> Set<String> {
        { database in
            let designs = (try? functions.designDocuments(database)) ?? []
            return Set(designs.filter { !$0.views.isEmpty }.map { design in
                JavaScriptViews.signature(design, partitioned: JavaScriptViews.isPartitioned(
                    design, inPartitionedDatabase: database.isPartitioned))
            })
        }
    }
}

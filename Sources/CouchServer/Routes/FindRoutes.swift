import CouchCore
import CouchMango
import CouchStore

/// `POST /db/_find` and `POST /db/_explain` (CouchDB's `mango_httpd`).
enum FindRoutes {
    /// `partition` (`/db/_partition/{p}/_find`): only that partition's documents, read through
    /// `_all_docs`' ID range of the partition (Couchette's JSON indexes are not partitioned).
    static func postFind(_ context: RouteContext) throws -> HTTPResponse { try find(context, partition: nil) }

    static func postExplain(_ context: RouteContext) throws -> HTTPResponse { try explain(context, partition: nil) }

    static func find(_ context: RouteContext, partition: String?) throws -> HTTPResponse {
        let (database, query) = try plan(context, partition: partition)
        let source = try MangoRequestSource(context, database: database, conflicts: query.options.conflicts,
                                            partition: partition)
        let result = try query.find(source: source, reader: MangoJSONIndexes(manager: context.server.indexes, database: database),
                                    text: context.server.mangoText.searcher(for: database))
        return .json(200, bytes: result.body)
    }

    static func explain(_ context: RouteContext, partition: String?) throws -> HTTPResponse {
        let (database, query) = try plan(context, partition: partition)
        return .json(200, query.explain(database: database.name.rawValue))
    }

    private static func plan(_ context: RouteContext, partition: String?) throws -> (Database, MangoQuery) {
        let database = try context.database()
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        var options = try MangoFindOptions(body)
        // An index's keys, counts and bookmarks come from every stored document: a reader who
        // may not see them all (`_users`, others' replication credentials) is answered from
        // `_all_docs`, matching each document as the reader sees it, and told of no index.
        let restricted = try context.documentReadRule(for: database).isRestricted
        guard let partition else {
            return (database, try MangoQuery(options, indexes: restricted ? [MangoIndex.allDocs] : try MangoIndex.list(in: database)))
        }
        if !options.partition.isEmpty, options.partition != partition {
            throw CouchError.badRequest("Conflicting value for `partition` in request body")
        }
        options.partition = partition
        return (database, try MangoQuery(options, indexes: [MangoIndex.allDocs]))
    }
}

import CouchCore
import CouchMango
import CouchStore

/// `POST /db/_find` and `POST /db/_explain` (CouchDB's `mango_httpd`).
enum FindRoutes {
    /// `partition` (`/db/_partition/{p}/_find`): only that partition's documents, read through
    /// a partitioned JSON index's rows of the partition or `_all_docs`' ID range of it.
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
        options.databasePartitioned = database.isPartitioned
        let indexes = restricted ? [MangoIndex.allDocs] : try MangoIndex.list(in: database)
        guard let partition else {
            // A partition named only in the body is not a partition query here (the documents
            // are read from the whole database): no partitioned index serves it.
            if !options.partition.isEmpty { options.databasePartitioned = false }
            return (database, try MangoQuery(options, indexes: indexes.filter { !$0.partitioned }))
        }
        if !options.partition.isEmpty, options.partition != partition {
            throw CouchError.badRequest("Conflicting value for `partition` in request body")
        }
        options.partition = partition
        return (database, try MangoQuery(options, indexes: indexes))
    }
}

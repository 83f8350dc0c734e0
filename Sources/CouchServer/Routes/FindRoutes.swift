import CouchCore
import CouchMango
import CouchStore

/// `POST /db/_find` and `POST /db/_explain` (CouchDB's `mango_httpd`).
enum FindRoutes {
    static func postFind(_ context: RouteContext) throws -> HTTPResponse {
        let (database, query) = try plan(context)
        let source = try MangoRequestSource(context, database: database, conflicts: query.options.conflicts)
        let result = try query.find(source: source, reader: MangoJSONIndexes(manager: context.server.indexes, database: database),
                                    text: context.server.mangoText.searcher(for: database))
        return .json(200, bytes: result.body)
    }

    static func postExplain(_ context: RouteContext) throws -> HTTPResponse {
        let (database, query) = try plan(context)
        return .json(200, query.explain(database: database.name.rawValue))
    }

    private static func plan(_ context: RouteContext) throws -> (Database, MangoQuery) {
        let database = try context.database()
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        let options = try MangoFindOptions(body)
        return (database, try MangoQuery(options, indexes: try MangoIndex.list(in: database)))
    }
}

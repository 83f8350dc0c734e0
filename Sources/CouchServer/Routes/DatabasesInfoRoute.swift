import CouchCore
import CouchStore

/// `GET /_dbs_info` (the `_all_dbs` listing with each database's info) and
/// `POST /_dbs_info` (`{"keys": [...]}`, at most 100 names, as CouchDB's
/// `max_db_number_for_dbs_info_req`).
enum DatabasesInfoRoute {
    static let maximumKeys = 100

    static func getDatabasesInfo(_ context: RouteContext) throws -> HTTPResponse {
        let names = try ServerRoutes.listedNames(context)
        let rows: [JSONValue] = names.compactMap { name in
            guard let database = try? context.server.databases.database(name),
                  let info = try? DatabaseRoutes.infoJSON(database) else { return nil }  // deleted meanwhile
            return ["key": JSONValue(name.rawValue), "info": info]
        }
        return .json(200, .array(rows))
    }

    static func postDatabasesInfo(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        guard let keys = body["keys"] else { throw CouchError.badRequest("`keys` member must exist.") }
        guard let list = keys.arrayValue else { throw CouchError.badRequest("`keys` member must be an array.") }
        guard list.count <= maximumKeys else { throw CouchError.badRequest("too_many_keys") }
        let rows: [JSONValue] = list.map { key in
            if let text = key.stringValue, let name = try? DatabaseName(text),
               let database = try? context.server.databases.database(name),
               let info = try? DatabaseRoutes.infoJSON(database) {
                return ["key": key, "info": info]
            }
            return ["key": key, "error": "not_found"]
        }
        return .json(200, .array(rows))
    }
}

import CouchCore
import CouchStore
import Foundation

/// `/db` and its maintenance resources.
enum DatabaseRoutes {
    static func getDatabase(_ context: RouteContext) throws -> HTTPResponse {
        .json(200, try infoJSON(context.database()))
    }

    /// `GET /db`'s answer, also each row of `/_dbs_info`.
    static func infoJSON(_ database: Database) throws -> JSONValue {
        let info = try database.info()
        let cluster = try database.clusterParameters()
        let q = cluster?["q"]?.intValue ?? 1, n = cluster?["n"]?.intValue ?? 1
        return [
            "db_name": JSONValue(info.name.rawValue),
            "purge_seq": UpdateSequence(try database.purgeSequence).json,
            "update_seq": UpdateSequence(info.updateSequence).json,
            "sizes": ["file": JSONValue(info.fileSize), "external": JSONValue(info.externalSize),
                      "active": JSONValue(info.activeSize)],
            "props": database.isPartitioned ? ["partitioned": true] : [:],
            "doc_del_count": JSONValue(info.deletedDocumentCount),
            "doc_count": JSONValue(info.documentCount),
            "disk_format_version": 8,
            "compact_running": JSONValue(info.compactRunning),
            // Shown as CouchDB shows them; Couchette keeps one copy in one file whatever they say.
            "cluster": ["q": JSONValue(q), "n": JSONValue(n), "w": JSONValue(n / 2 + 1), "r": JSONValue(n / 2 + 1)],
            "instance_start_time": JSONValue(info.instanceStartTime),
        ]
    }

    static func putDatabase(_ context: RouteContext) throws -> HTTPResponse {
        let name = try context.databaseName
        // `q` (shards) and `n` (copies) are accepted and remembered for `GET /db`'s `cluster`.
        var cluster = JSONObject()
        for parameter in ["q", "n"] {
            guard let raw = context.request.queryValue(parameter) else { continue }
            guard let value = Int(raw), value > 0 else {
                throw CouchError.badRequest("`\(parameter)` must be a positive integer")
            }
            cluster[parameter] = JSONValue(value)
        }
        var partitioned = false
        if let raw = context.request.queryValue("partitioned") {
            switch raw {
            case "true": partitioned = true
            case "false": partitioned = false
            default: throw CouchError.badRequest("Invalid `partitioned` parameter")
            }
        }
        if partitioned, name.isSystem { throw CouchError.badRequest("Cannot partition a system database") }
        let database = try context.server.databases.create(name, partitioned: partitioned)
        if !cluster.isEmpty { try database.setClusterParameters(cluster) }
        return .json(201, ["ok": true], headers: [("Location", context.absoluteURL(database: name))])
    }

    static func deleteDatabase(_ context: RouteContext) throws -> HTTPResponse {
        if context.request.queryValue("rev") != nil {
            throw CouchError.badRequest(
                "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
        }
        let name = try context.databaseName
        try context.server.databases.delete(name)
        if context.server.accessControl.isUsersDatabase(name) { context.server.usersDatabaseDeleted() }
        return .ok
    }

    static func postCompact(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let database = try context.database()
        let logger = context.server.logger
        // CouchDB compacts in the background and answers at once (also when one already runs).
        database.startCompaction { error in logger.error("compaction of \(database.name) failed: \(error)") }
        return .json(202, ["ok": true])
    }

    static func postEnsureFullCommit(_ context: RouteContext) throws -> HTTPResponse {
        // Every acknowledged write is already durable; this only confirms the instance.
        let database = try context.database()
        return .json(201, ["ok": true, "instance_start_time": JSONValue(database.instanceStartTime)])
    }

    static func getRevisionsLimit(_ context: RouteContext) throws -> HTTPResponse {
        .json(200, JSONValue(try context.database().revsLimit))
    }

    static func putRevisionsLimit(_ context: RouteContext) throws -> HTTPResponse {
        guard let limit = try context.jsonBody().intValue else {
            throw CouchError.badRequest("Rev limit has to be an integer")
        }
        guard limit > 0 else { throw CouchError.badRequest("Rev limit has to be a positive integer") }
        try context.database().setRevsLimit(limit)
        return .ok
    }
}

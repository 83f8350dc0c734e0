import CouchCore
import CouchStore
import Foundation

/// `/`, `/_all_dbs`, `/_uuids`, `/_up`, `/_membership`.
enum ServerRoutes {
    static func getWelcome(_ context: RouteContext) throws -> HTTPResponse {
        .json(200, [
            "couchdb": "Welcome",
            "version": JSONValue(ServerInfo.couchDBVersion),
            "git_sha": "couchette",
            "uuid": JSONValue(context.server.databases.serverUUID),
            "features": .array(ServerInfo.features.map { JSONValue($0) }),
            "vendor": ["name": "Couchette", "version": JSONValue(ServerInfo.version)],
        ])
    }

    static func getAllDatabases(_ context: RouteContext) throws -> HTTPResponse {
        .json(200, .array(try listedNames(context).map { JSONValue($0.rawValue) }))
    }

    /// The databases `_all_dbs` and `GET /_dbs_info` list: `startkey`, `endkey`,
    /// `descending`, `skip` and `limit` applied.
    static func listedNames(_ context: RouteContext) throws -> [DatabaseName] {
        var names = try context.server.databases.allNames()
        let descending = try context.boolOption("descending")
        if descending { names.reverse() }
        let startKey = try context.jsonOption("startkey") ?? context.jsonOption("start_key")
        let endKey = try context.jsonOption("endkey") ?? context.jsonOption("end_key")
        let precedes: (String, String) -> Bool = { a, b in
            descending ? b.utf8.lexicographicallyPrecedes(a.utf8) : a.utf8.lexicographicallyPrecedes(b.utf8)
        }
        if let start = startKey?.stringValue { names.removeAll { precedes($0.rawValue, start) } }
        if let end = endKey?.stringValue { names.removeAll { precedes(end, $0.rawValue) } }
        let skip = try context.nonNegativeIntOption("skip") ?? 0
        let limit = try context.nonNegativeIntOption("limit") ?? Int.max
        return Array(names.dropFirst(skip).prefix(limit))
    }

    /// A single node, named as CouchDB names nodes.
    static func getMembership(_ context: RouteContext) throws -> HTTPResponse {
        .json(200, ["all_nodes": [JSONValue(context.server.nodeName)], "cluster_nodes": [JSONValue(context.server.nodeName)]])
    }

    /// CouchDB 3 has no `/_stats` nor `/_config` (they moved under `/_node/{node}/`): an
    /// admin is told the name is not a database's, as CouchDB tells them.
    static func getLegacyResource(_ context: RouteContext) throws -> HTTPResponse {
        let name = context.endpoint == .server(.legacyStats) ? "_stats" : "_config"
        _ = try DatabaseName(name)
        throw CouchError.notFound("missing")
    }

    /// CouchDB's `/_uuids`: IDs by `[uuids] algorithm`, with headers that keep caches from
    /// handing the same IDs to two clients, and an `ETag` of the IDs (`couch_httpd:make_etag`).
    static func getUUIDs(_ context: RouteContext) throws -> HTTPResponse {
        let generator = context.server.uuids
        let count = try context.nonNegativeIntOption("count") ?? 1
        guard count <= generator.maximumCount else { throw CouchError.badRequest("count parameter too large") }
        let uuids = generator.next(count).map { JSONValue($0) }
        let body = JSONValue.object(["uuids": .array(uuids)]).serialized()
        let etag = "\"" + Digest.hex(Digest.md5(body)) + "\""
        return .json(200, ["uuids": .array(uuids)],
                     headers: [("Cache-Control", "must-revalidate, no-cache"), ("Pragma", "no-cache"),
                               ("Expires", "Mon, 01 Jan 1990 00:00:00 GMT"), ("ETag", etag)])
    }

    /// CouchDB's `_up`: 404 with `maintenance_mode` or `nolb` when `[couchdb] maintenance_mode`
    /// says so (load balancers take the node out); also 404 when the data directory cannot be
    /// written, the storage failure a load balancer should see.
    static func getUp(_ context: RouteContext) throws -> HTTPResponse {
        switch context.server.configuration.maintenanceMode {
        case "true": return .json(404, ["status": "maintenance_mode"])
        case "nolb": return .json(404, ["status": "nolb"])
        default: break
        }
        guard access(context.server.databases.directory, W_OK | X_OK) == 0 else {
            return .json(404, ["status": "storage_unavailable"])
        }
        return .json(200, ["status": "ok", "seeds": [:]])
    }
}

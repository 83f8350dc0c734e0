import CouchCore
import CouchStore

/// `/_reshard` (summary), `/_reshard/state`, `/_reshard/jobs`, `/_reshard/jobs/{id}` and
/// `/_reshard/jobs/{id}/state`, after CouchDB's `mem3_reshard_httpd`: the same answers,
/// validations and errors, over `Resharding` (splits rewrite the shard map only). Also
/// `GET /db/_shards`, the map they change.
enum ReshardRoutes {
    static func handle(_ context: RouteContext) throws -> HTTPResponse {
        guard case .reshard(let path) = context.endpoint else { throw CouchError.notFound("missing") }
        let method = context.request.method == "HEAD" ? "GET" : context.request.method
        switch (path.count, path.first, method) {
        case (0, _, "GET"):
            return summary(context)
        case (1, "state", "GET"):
            let state = context.server.resharding.globalState
            return .json(200, ["state": JSONValue(state.running ? "running" : "stopped"),
                               "reason": state.reason.map { JSONValue($0) } ?? .null])
        case (1, "state", "PUT"):
            return try putGlobalState(context)
        case (1, "jobs", "GET"):
            let jobs = context.server.resharding.jobs(in: context.server.databases)
            return .json(200, ["total_rows": JSONValue(jobs.count), "offset": 0, "jobs": .array(jobs.map(\.json))])
        case (1, "jobs", "POST"):
            return try postJobs(context)
        case (2, "jobs", "GET"):
            return .json(200, try job(context, path[1]).json)
        case (2, "jobs", "DELETE"):
            context.server.resharding.remove(try job(context, path[1]).id)
            return .ok
        case (3, "jobs", "GET") where path[2] == "state":
            let job = try job(context, path[1])
            return .json(200, ["state": JSONValue(job.jobState), "reason": job.reason.map { JSONValue($0) } ?? .null])
        case (3, "jobs", "PUT") where path[2] == "state":
            return try putJobState(context, try job(context, path[1]))
        default:
            if let allowed = allowedMethods(path) { throw CouchError(.methodNotAllowed, "Only \(allowed) allowed") }
            throw CouchError.notFound("missing")
        }
    }

    /// CouchDB's `Allow` for each path; nil where it answers 404.
    static func allowedMethods(_ path: [String]) -> String? {
        switch (path.count, path.first) {
        case (0, _): "GET,HEAD"
        case (1, "state"): "GET,HEAD,PUT"
        case (1, "jobs"): "GET,HEAD,POST"
        case (2, "jobs"): "GET,HEAD,DELETE"
        case (3, "jobs") where path[2] == "state": "GET,HEAD,PUT"
        default: nil
        }
    }

    /// `GET /db/_shards`: each range with the node holding it.
    static func getShards(_ context: RouteContext) throws -> HTTPResponse {
        let ranges = try ShardMap.ranges(of: try context.database())
        let node = JSONValue.array([JSONValue(context.server.nodeName)])
        return .json(200, ["shards": .object(JSONObject(ranges.map { (key: $0.name, value: node) }))])
    }

    private static func summary(_ context: RouteContext) -> HTTPResponse {
        let resharding = context.server.resharding
        let state = resharding.globalState
        let jobs = resharding.jobs(in: context.server.databases)
        func count(_ name: String) -> JSONValue { JSONValue(jobs.filter { $0.jobState == name }.count) }
        return .json(200, [
            "state": JSONValue(state.running ? "running" : "stopped"),
            "state_reason": state.reason.map { JSONValue($0) } ?? .null,
            "completed": count("completed"), "failed": count("failed"), "running": count("running"),
            "stopped": count("stopped"), "total": JSONValue(jobs.count),
        ])
    }

    private static func putGlobalState(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        switch body["state"] {
        case nil:
            throw CouchError.badRequest("Expected a `state` field")
        case "running":
            context.server.resharding.startAll(in: context.server.databases)
        case "stopped":
            let reason = body["reason"].map { $0.stringValue ?? $0.serializedString() } ?? "Cluster-wide resharding stopped by the user"
            context.server.resharding.stopAll(reason: reason)
        default:
            throw CouchError.badRequest("State field not `running` or `stopped`")
        }
        return .ok
    }

    private static func putJobState(_ context: RouteContext, _ job: Resharding.Job) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        let resharding = context.server.resharding
        switch body["state"] {
        case nil:
            throw CouchError.badRequest("Expected a `state` field")
        case "running":
            let global = resharding.globalState
            guard global.running else {
                // CouchDB answers its Erlang term.
                let reason = global.reason.map { "<<\"\($0)\">>" } ?? "undefined"
                return .json(500, ["error": JSONValue("{stopped,\(reason)}")])
            }
            resharding.run(job.id, database: try context.server.databases.database(job.database))
        case "stopped":
            resharding.stop(job.id, reason: body["reason"].map { $0.stringValue ?? $0.serializedString() } ?? "Stopped by user")
        default:
            throw CouchError.badRequest("State field not `running` or `stopped`")
        }
        return .ok
    }

    private static func job(_ context: RouteContext, _ id: String) throws(CouchError) -> Resharding.Job {
        guard let job = context.server.resharding.job(id, in: context.server.databases) else { throw CouchError.notFound("missing") }
        return job
    }

    // MARK: Creating jobs

    /// `POST /_reshard/jobs {"type": "split", "db" | "shard", "node", "range"}`: a job for each
    /// shard chosen; 201 when every one was created, 202 when some, 500 when none.
    private static func postJobs(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        // Checked in CouchDB's order: node, shard, db, range, type.
        let node = try validateNode(body["node"], context: context)
        let shard = try validateShard(body["shard"])
        let database = try validateDatabase(body["db"], context: context)
        let range = try validateRange(body["range"])
        guard body["type"] == "split" else { throw CouchError.badRequest("`job type must be `split`") }
        let target: Database
        var ranges: [ShardRange]
        switch (database, shard) {
        case (nil, nil):
            throw CouchError.badRequest("Must specify at least `db` or `shard`")
        case (_?, _?):
            throw CouchError.badRequest("`db` and `shard` are mutually exclusive")
        case (let database?, nil):
            target = database
            ranges = try ShardMap.ranges(of: database)
            if let range { ranges = ranges.filter { $0 == range } }
        case (nil, let shard?):
            guard let parsed = ShardMap.parse(shardName: shard), let name = try? DatabaseName(parsed.database),
                  context.server.databases.exists(name) else { throw CouchError.badRequest("Invalid `db`") }
            target = try context.server.databases.database(name)
            ranges = try ShardMap.ranges(of: target).filter { ShardMap.shardName($0, of: target) == shard }
        }
        _ = node   // checked only: this node holds every shard
        guard !ranges.isEmpty else { throw CouchError.notFound("missing") }
        var created = 0
        let answers: [JSONValue] = ranges.map { range in
            let name = ShardMap.shardName(range, of: target)
            switch context.server.resharding.addJob(database: target, range: range, node: context.server.nodeName) {
            case .success(let job):
                created += 1
                return ["ok": true, "id": JSONValue(job.id), "node": JSONValue(job.node), "shard": JSONValue(name)]
            case .failure(let error):
                return ["error": JSONValue("{\(error.error),\(error.reason)}"), "node": JSONValue(context.server.nodeName),
                        "shard": JSONValue(name)]
            }
        }
        return .json(created == answers.count ? 201 : (created > 0 ? 202 : 500), .array(answers))
    }

    private static func validateNode(_ value: JSONValue?, context: RouteContext) throws(CouchError) -> String? {
        guard let value else { return nil }
        guard let node = value.stringValue else { throw CouchError.badRequest("Invalid `node`") }
        // CouchDB knows no other node by that name (not an existing atom).
        guard node == context.server.nodeName else { throw CouchError.badRequest("`node` is not a valid node name") }
        return node
    }

    private static func validateShard(_ value: JSONValue?) throws(CouchError) -> String? {
        guard let value else { return nil }
        guard let shard = value.stringValue else { throw CouchError.badRequest("Invalid `shard`") }
        let bytes = Array(shard.utf8)
        guard bytes.count >= 25, shard.hasPrefix("shards/"), bytes[15] == UInt8(ascii: "-"), bytes[24] == UInt8(ascii: "/") else {
            throw CouchError.badRequest("`shard` is invalid")
        }
        return shard
    }

    private static func validateDatabase(_ value: JSONValue?, context: RouteContext) throws(CouchError) -> Database? {
        guard let value else { return nil }
        guard let text = value.stringValue, let name = try? DatabaseName(text), context.server.databases.exists(name),
              let database = try? context.server.databases.database(name) else {
            throw CouchError.badRequest("Invalid `db`")
        }
        return database
    }

    private static func validateRange(_ value: JSONValue?) throws(CouchError) -> ShardRange? {
        guard let value else { return nil }
        guard let text = value.stringValue, let range = ShardRange(text) else { throw CouchError.badRequest("Invalid `range`") }
        return range
    }
}

import CouchCore
import CouchReplication

/// `GET /_scheduler/jobs[/{id}]` and `GET /_scheduler/docs[/{replicator db}[/{docid}]]`:
/// the scheduler's jobs and the replicator databases' documents, with CouchDB 3's fields
/// and states, `limit` and `skip`.
enum SchedulerRoutes {
    static func getJobs(_ context: RouteContext) throws -> HTTPResponse {
        if let feed = context.request.query.first(where: { $0.name == "feed" })?.value, feed != "normal" {
            return try SchedulerEventsRoute.follow(context, feed: feed)
        }
        let jobs = context.server.scheduler.jobsJSON
        return try page(context, jobs, key: "jobs", defaultLimit: 100)
    }

    static func getJob(_ context: RouteContext) throws -> HTTPResponse {
        guard case .scheduler(.job(let id)) = context.endpoint,
              let job = context.server.scheduler.jobJSON(id: id) else { throw CouchError(.notFound, "unknown") }
        return .json(200, job)
    }

    static func getDocuments(_ context: RouteContext) throws -> HTTPResponse {
        guard case .scheduler(.documents(let database)) = context.endpoint else { throw CouchError(.notFound, "missing") }
        let documents = context.server.replicatorDatabase.documentsJSON(database: database)
        return try page(context, documents, key: "docs", defaultLimit: nil)
    }

    static func getDocument(_ context: RouteContext) throws -> HTTPResponse {
        guard case .scheduler(.document(let database, let id)) = context.endpoint,
              let document = context.server.replicatorDatabase.documentJSON(database: database, id: id) else {
            throw CouchError(.notFound, "unknown")
        }
        return .json(200, document)
    }

    /// Couchette's `GET /_scheduler/docs/{db}/{docid}/_pending`: the IDs of the local documents
    /// a push job has not copied yet (`{"since", "pending": [...]}`), or with `?doc_id=X`
    /// whether that one is pending (`{"doc_id", "pending": true|false}`).
    static func getPendingDocuments(_ context: RouteContext) throws -> HTTPResponse {
        guard case .scheduler(.pending(let database, let id)) = context.endpoint,
              let pending = try context.server.replicatorDatabase.pendingDocumentIDs(database: database, id: id) else {
            throw CouchError(.notFound, "unknown")
        }
        if let documentID = context.request.queryValue("doc_id") {
            return .json(200, ["doc_id": JSONValue(documentID), "pending": JSONValue(pending.ids.contains(documentID))])
        }
        return .json(200, ["since": pending.since, "pending": .array(pending.ids.map { JSONValue($0) })])
    }

    private static func page(_ context: RouteContext, _ entries: [JSONValue], key: String, defaultLimit: Int?) throws -> HTTPResponse {
        let skip = try context.nonNegativeIntOption("skip") ?? 0
        let limit = try context.nonNegativeIntOption("limit") ?? defaultLimit ?? entries.count
        let offset = min(skip, entries.count)
        let page = entries[offset...].prefix(limit)
        var body: JSONObject = ["total_rows": JSONValue(entries.count), "offset": JSONValue(offset)]
        body[key] = .array(Array(page))
        return .json(200, .object(body))
    }
}

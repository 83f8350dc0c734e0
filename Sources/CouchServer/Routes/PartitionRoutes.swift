import CouchCore
import CouchStore

/// `/db/_partition/{partition}[/...]` of a partitioned database: the partition's
/// information, and queries that read only its rows. Checked in CouchDB's order
/// (`chttpd_db:handle_partition_req`): the database is partitioned, the partition is valid,
/// then the resource.
enum PartitionRoutes {
    static func get(_ context: RouteContext) throws -> HTTPResponse {
        let (database, partition, rest) = try resolve(context)
        guard !rest.isEmpty else { return .json(200, try info(database, partition: partition)) }
        return try query(context, partition: partition, rest: rest, posted: false)
    }

    static func post(_ context: RouteContext) throws -> HTTPResponse {
        guard case .partition(_, let partition, let rest) = context.endpoint else { throw CouchError.notFound() }
        if rest.isEmpty {
            if partition.hasBytePrefix("_") {
                throw CouchError(.illegalPartition, "Partition must not start with an underscore")
            }
            throw CouchError(.methodNotAllowed, "Only GET,HEAD allowed")
        }
        _ = try resolve(context)
        return try query(context, partition: partition, rest: rest, posted: true)
    }

    private static func resolve(_ context: RouteContext) throws -> (Database, String, [String]) {
        guard case .partition(_, let partition, let rest) = context.endpoint else { throw CouchError.notFound() }
        let database = try context.database()
        guard database.isPartitioned else { throw CouchError.badRequest("database is not partitioned") }
        try DocumentID.validatePartition(partition)
        // `?partition=` may repeat the path's partition, never name another.
        if let named = context.request.queryValue("partition"), named != partition {
            throw CouchError.badRequest("Conflicting value for `partition` in query string")
        }
        return (database, partition, rest)
    }

    private static func query(_ context: RouteContext, partition: String, rest: [String], posted: Bool) throws -> HTTPResponse {
        switch rest {
        case ["_all_docs"]:
            let context = posted ? try AllDocumentsRoute.withBodyOptions(context) : context
            return try AllDocumentsRoute.respond(context, namespace: .partition(partition))
        case let parts where parts.count == 4 && parts[0] == "_design" && parts[2] == "_view":
            return try ViewRoutes.partitionView(context, design: parts[1], view: parts[3], partition: partition, posted: posted)
        case ["_find"] where posted:
            return try FindRoutes.find(context, partition: partition)
        case ["_explain"] where posted:
            return try FindRoutes.explain(context, partition: partition)
        default:
            throw CouchError.notFound("missing")
        }
    }

    /// CouchDB's partition information.
    static func info(_ database: Database, partition: String) throws -> JSONValue {
        let info = try database.partitionInfo(partition)
        return [
            "db_name": JSONValue(database.name.rawValue),
            "sizes": ["active": JSONValue(info.activeSize), "external": JSONValue(info.externalSize)],
            "partition": JSONValue(partition),
            "doc_count": JSONValue(info.documentCount),
            "doc_del_count": JSONValue(info.deletedDocumentCount),
        ]
    }
}

extension Database {
    /// CouchDB's `couch_db:validate_docid` for a partitioned database, checked by the routes
    /// before anything is written so that a bad ID refuses the whole request (the store
    /// checks every revision again).
    func validatePartitioned(_ id: DocumentID?) throws(CouchError) {
        guard isPartitioned, let id else { return }
        try id.validateForPartitionedDatabase()
    }
}

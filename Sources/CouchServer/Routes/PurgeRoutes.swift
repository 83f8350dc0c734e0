import CouchCore
import CouchStore

/// `POST /db/_purge`, `GET|PUT /db/_purged_infos_limit`, `GET /db/_purged_infos`.
enum PurgeRoutes {
    /// CouchDB's `[purge] max_document_id_number` and `max_revisions_number`.
    static let maximumDocuments = 100
    static let maximumRevisions = 1000

    static func postPurge(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        guard body.count <= maximumDocuments else { throw CouchError.badRequest("Exceeded maximum number of documents.") }
        var requests: [(DocumentID, [RevisionID])] = []
        var revisionCount = 0
        let database = try context.database()
        for (key, value) in body {
            let id = try DocumentID.validated(key)
            try database.validatePartitioned(id)
            guard let list = value.arrayValue else { throw CouchError.badRequest("Document rev/id must be a list") }
            revisionCount += list.count
            guard revisionCount <= maximumRevisions else { throw CouchError.badRequest("Exceeded maximum number of revisions.") }
            let revisions = try list.map { item throws(CouchError) -> RevisionID in
                guard let text = item.stringValue, let revision = RevisionID(text) else {
                    throw CouchError.badRequest("Invalid rev format")
                }
                return revision
            }
            requests.append((id, revisions))
        }
        let results = try database.purge(requests)
        var purged = JSONObject()
        for (id, revisions) in results { purged[id.rawValue] = .array(revisions.map { JSONValue($0.description) }) }
        return .json(context.quorumStatus(201), ["purge_seq": .null, "purged": .object(purged)])
    }

    static func getPurgedInfosLimit(_ context: RouteContext) throws -> HTTPResponse {
        .json(200, JSONValue(try context.database().purgedInfosLimit))
    }

    static func putPurgedInfosLimit(_ context: RouteContext) throws -> HTTPResponse {
        guard let limit = try context.jsonBody().intValue, limit > 0 else {
            throw CouchError.badRequest("`purged_infos_limit` must be positive integer")
        }
        try context.database().setPurgedInfosLimit(limit)
        return .ok
    }

    static func getPurgedInfos(_ context: RouteContext) throws -> HTTPResponse {
        let infos = try context.database().purgedInfos()
        return .json(200, ["purged_infos": .array(infos.map { info in
            ["id": JSONValue(info.id), "revs": .array(info.revisions.map { JSONValue($0) })]
        })])
    }
}

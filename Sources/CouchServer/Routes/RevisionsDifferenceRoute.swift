import CouchCore
import CouchStore

/// `POST /db/_revs_diff` and the older `POST /db/_missing_revs`: which of these
/// revisions does this database lack?
enum RevisionsDifferenceRoute {
    static func postRevisionsDifference(_ context: RouteContext) throws -> HTTPResponse {
        let differences = try context.database().revisionDifferences(try request(context))
        var result = JSONObject()
        for difference in differences {
            var entry: JSONObject = ["missing": .array(difference.missing.map { JSONValue($0.description) })]
            if !difference.possibleAncestors.isEmpty {
                entry["possible_ancestors"] = .array(difference.possibleAncestors.map { JSONValue($0.description) })
            }
            result[difference.id.rawValue] = .object(entry)
        }
        return .json(200, .object(result))
    }

    static func postMissingRevisions(_ context: RouteContext) throws -> HTTPResponse {
        let differences = try context.database().revisionDifferences(try request(context))
        var result = JSONObject()
        for difference in differences {
            result[difference.id.rawValue] = .array(difference.missing.map { JSONValue($0.description) })
        }
        return .json(200, ["missing_revs": .object(result)])
    }

    /// `{"docid": ["rev", ...], ...}`
    private static func request(_ context: RouteContext) throws -> [(DocumentID, [RevisionID])] {
        try context.jsonObjectBody().map { id, revisions throws(CouchError) -> (DocumentID, [RevisionID]) in
            guard let list = revisions.arrayValue else {
                throw CouchError.badRequest("Revisions of \(id) must be an array")
            }
            let parsed = try list.map { value throws(CouchError) -> RevisionID in
                guard let text = value.stringValue, let revision = RevisionID(text) else {
                    throw CouchError.badRequest("Invalid rev format")
                }
                return revision
            }
            return (DocumentID(id), parsed)
        }
    }
}

import CouchCore

/// The second stage: asks the target which of a batch's revisions it lacks
/// (`_revs_diff`, one request per batch), and turns the answer into fetch requests
/// carrying `possible_ancestors` as `atts_since`.
struct MissingRevisionFinder: Sendable {
    let target: DatabaseEndpoint

    struct Result: Sendable {
        var requests: [RevisionRequest] = []
        var checked = 0
        var found = 0
    }

    func find(_ changes: [Change]) async throws(ReplicationError) -> Result {
        var order: [DocumentID] = []
        var revisionsByID: [DocumentID: [RevisionID]] = [:]
        var result = Result()
        for change in changes {
            if revisionsByID[change.id] == nil { order.append(change.id) }
            for revision in change.revisions where !(revisionsByID[change.id]?.contains(revision) ?? false) {
                revisionsByID[change.id, default: []].append(revision)
                result.checked += 1
            }
        }
        guard result.checked > 0 else { return result }
        let missing = try await target.revisionsDifference(order.map { ($0, revisionsByID[$0] ?? []) })
        for entry in missing {
            for revision in entry.missing {
                result.requests.append(RevisionRequest(id: entry.id, revision: revision,
                                                       attachmentsSince: entry.possibleAncestors))
            }
        }
        result.found = result.requests.count
        return result
    }
}

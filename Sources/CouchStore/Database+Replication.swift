import CouchCore

/// What `_revs_diff` answers for one document.
public struct RevisionDifference: Sendable {
    public let id: DocumentID
    public let missing: [RevisionID]
    public let possibleAncestors: [RevisionID]
}

extension Database {
    /// For each document, the given revisions this database lacks (documents lacking none are left out).
    public func revisionDifferences(_ request: [(DocumentID, [RevisionID])]) throws -> [RevisionDifference] {
        try readers.withConnection { connection in
            // A request may name millions: it stops when its client hangs up.
            let cancellation = RequestCancellation.current
            return try request.enumerated().compactMap { index, entry -> RevisionDifference? in
                let (id, revisions) = entry
                if index % 256 == 0 { try cancellation?.check() }
                guard let record = try Self.record(id, connection: connection) else {
                    var seen = Set<RevisionID>()
                    let missing = revisions.filter { seen.insert($0).inserted }
                    return missing.isEmpty ? nil : RevisionDifference(id: id, missing: missing, possibleAncestors: [])
                }
                let missing = record.tree.missing(revisions)
                guard !missing.isEmpty else { return nil }
                return RevisionDifference(id: id, missing: missing,
                                          possibleAncestors: record.tree.possibleAncestors(for: missing))
            }
        }
    }
}

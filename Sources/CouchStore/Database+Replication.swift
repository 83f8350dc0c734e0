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
            try connection.run("BEGIN")
            defer { try? connection.run("COMMIT") }
            return try request.compactMap { id, revisions -> RevisionDifference? in
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

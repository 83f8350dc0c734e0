import CouchCore

/// Reads of one snapshot of a database, valid inside `Database.inOneSnapshot` only.
public struct SnapshotReader {
    let connection: SQLiteConnection

    /// As `Database.revisions(_:choosing:)`.
    public func revisions(_ id: DocumentID, choosing choose: (RevisionTree) -> [RevisionID]) throws
        -> (record: DocumentRecord, revisions: [RevisionID], bodies: [StoredRevision?])? {
        try Database.revisions(id, choosing: choose, connection: connection, inTransaction: true)
    }

    /// The winning revision, as `Database.document(_:)`: `not_found` (`missing` or `deleted`).
    public func document(_ id: DocumentID) throws -> DocumentSnapshot {
        guard let current = try Database.currentSnapshot(id, connection: connection) else {
            throw CouchError.notFound("missing")
        }
        if current.record.isDeleted { throw CouchError.notFound("deleted") }
        return current
    }
}

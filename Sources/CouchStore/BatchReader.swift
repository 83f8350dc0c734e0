import CouchCore

/// Reads of many documents in a row (`_bulk_get`, a replication batch) on one reader connection,
/// in few read transactions: the database's read locks (`fcntl` calls in WAL mode) are taken
/// once per `readsPerTransaction` documents rather than once each. A transaction is not held
/// for a whole batch, however large: while one is open the write-ahead log cannot be checkpointed
/// past it. Valid inside `Database.readingInBatches` only.
public final class BatchReader {
    static let readsPerTransaction = 256
    private let connection: SQLiteConnection
    private var reads = 0

    init(connection: SQLiteConnection) throws {
        self.connection = connection
        try connection.run("BEGIN")
    }

    func finish() {
        try? connection.run("COMMIT")
    }

    /// As `Database.revisions(_:choosing:)`.
    public func revisions(_ id: DocumentID, choosing choose: (RevisionTree) -> [RevisionID]) throws
        -> (record: DocumentRecord, revisions: [RevisionID], bodies: [StoredRevision?])? {
        try nextRead()
        return try Database.revisions(id, choosing: choose, connection: connection, inTransaction: true)
    }

    /// The winning revision, as `Database.document(_:)`: `not_found` (`missing` or `deleted`).
    public func document(_ id: DocumentID) throws -> DocumentSnapshot {
        try nextRead()
        guard let current = try Database.currentSnapshot(id, connection: connection) else {
            throw CouchError.notFound("missing")
        }
        if current.record.isDeleted { throw CouchError.notFound("deleted") }
        return current
    }

    private func nextRead() throws {
        reads += 1
        guard reads > Self.readsPerTransaction else { return }
        reads = 1
        try connection.run("COMMIT")
        try connection.run("BEGIN")
    }
}

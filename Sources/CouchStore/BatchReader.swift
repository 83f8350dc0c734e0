import CouchCore

/// Reads of many documents in a row (`_bulk_get`, a replication batch) on one reader connection.
/// Its snapshot is brought up to date every `readsPerTransaction` documents rather than held for
/// a whole batch, however large: while one is held the write-ahead log cannot be checkpointed past it.
/// Valid inside `Database.readingInBatches` only.
public final class BatchReader {
    static let readsPerTransaction = 256
    private let pool: ReaderPool
    private let reader: ReaderPool.Reader
    private var reads = 0

    init(pool: ReaderPool, reader: ReaderPool.Reader) {
        self.pool = pool
        self.reader = reader
    }

    /// As `Database.revisions(_:choosing:)`.
    public func revisions(_ id: DocumentID, choosing choose: (RevisionTree) -> [RevisionID]) throws
        -> (record: DocumentRecord, revisions: [RevisionID], bodies: [StoredRevision?])? {
        try nextRead()
        return try Database.revisions(id, choosing: choose, connection: reader.connection)
    }

    /// The winning revision, as `Database.document(_:)`: `not_found` (`missing` or `deleted`).
    public func document(_ id: DocumentID) throws -> DocumentSnapshot {
        try nextRead()
        guard let current = try Database.currentSnapshot(id, connection: reader.connection) else {
            throw CouchError.notFound("missing")
        }
        if current.record.isDeleted { throw CouchError.notFound("deleted") }
        return current
    }

    private func nextRead() throws {
        reads += 1
        guard reads > Self.readsPerTransaction else { return }
        reads = 1
        try pool.refresh(reader)
    }
}

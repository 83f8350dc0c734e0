import CouchCore

/// What `GET /db/_partition/{p}` reports: one partition's live and deleted documents and
/// the bytes of its live bodies.
public struct PartitionInfo: Sendable {
    public let documentCount: Int
    public let deletedDocumentCount: Int
    /// Bytes of the live documents' bodies (CouchDB's `sizes.external`).
    public let externalSize: Int
    /// Bytes the partition's rows take in the file: bodies, revision trees and attachment
    /// metadata (CouchDB's `sizes.active`).
    public let activeSize: Int
}

/// Partitioned databases. A partition's documents are the IDs in `["p:", "p;")`, a range of
/// the `doc_id` index, so what is read of a partition never visits another's rows.
extension Database {
    public func partitionInfo(_ partition: String) throws -> PartitionInfo {
        let (low, high) = DocumentID.partitionRange(partition)
        return try readers.withConnection { connection in
            var info = PartitionInfo(documentCount: 0, deletedDocumentCount: 0, externalSize: 0, activeSize: 0)
            try connection.query("""
                SELECT coalesce(sum(deleted = 0), 0), coalesce(sum(deleted = 1), 0),
                       coalesce(sum(CASE WHEN deleted = 0 THEN length(body) ELSE 0 END), 0),
                       coalesce(sum(length(body) + length(revision_tree) + coalesce(length(attachments), 0)), 0)
                FROM documents WHERE doc_id >= ? AND doc_id < ?
                """, [.text(low), .text(high)]) { row in
                info = PartitionInfo(documentCount: row.int(0), deletedDocumentCount: row.int(1),
                                     externalSize: row.int(2), activeSize: row.int(3))
            }
            return info
        }
    }

    /// Inside the writer, for every revision written to a partitioned database: the ID must
    /// be `partition:id` (replicated writes too), and an interactive edit that grows a
    /// partition already at `maximumPartitionSize` is refused, as CouchDB refuses it
    /// (deletions, shrinking edits and replicated revisions still go in).
    func checkPartition(_ id: DocumentID, newBody: Int, oldBody: Int, isDeletion: Bool, newEdits: Bool,
                        connection: SQLiteConnection) throws {
        guard isPartitioned, !id.isDesign, !id.isLocal else { return }
        try id.validateForPartitionedDatabase()
        let limit = maximumPartitionSize
        guard limit > 0, newEdits, !isDeletion, newBody > oldBody, let partition = id.partition else { return }
        let (low, high) = DocumentID.partitionRange(partition)
        let size = try connection.scalarInt(
            "SELECT coalesce(sum(length(body)), 0) FROM documents WHERE doc_id >= ? AND doc_id < ? AND deleted = 0",
            [.text(low), .text(high)]) ?? 0
        if size >= limit {
            throw CouchError(.partitionOverflow, "Partition limit exceeded due to update on '\(id.rawValue)'")
        }
    }
}

import CouchCore

/// A document's row: its revision tree and winning revision.
public struct DocumentRecord: Sendable {
    public let id: DocumentID
    public let sequence: Int
    public let tree: RevisionTree
    public let winner: RevisionID
    public let isDeleted: Bool

    public init(id: DocumentID, sequence: Int, tree: RevisionTree, winner: RevisionID, isDeleted: Bool) {
        self.id = id
        self.sequence = sequence
        self.tree = tree
        self.winner = winner
        self.isDeleted = isDeleted
    }
}

/// One revision of a document with its body (compact JSON object, no special members).
public struct StoredRevision: Sendable {
    public let id: DocumentID
    public let revision: RevisionID
    public let isDeleted: Bool
    public let body: [UInt8]
    public let attachments: [AttachmentInfo]

    public init(id: DocumentID, revision: RevisionID, isDeleted: Bool, body: [UInt8], attachments: [AttachmentInfo] = []) {
        self.id = id
        self.revision = revision
        self.isDeleted = isDeleted
        self.body = body
        self.attachments = attachments
    }
}

/// A document read together with its tree, for responses that need both.
public struct DocumentSnapshot: Sendable {
    public let record: DocumentRecord
    public let revision: StoredRevision

    public init(record: DocumentRecord, revision: StoredRevision) {
        self.record = record
        self.revision = revision
    }
}

/// A `_local` document: not replicated, not in `_changes`, revisions `0-N`.
public struct LocalDocument: Sendable {
    public let id: DocumentID
    public let revision: Int
    public let body: [UInt8]
    public var revisionID: RevisionID { RevisionID(generation: 0, digest: String(revision)) }
}

/// One row of the changes index.
public struct ChangeRow: Sendable {
    public let sequence: Int
    public let id: DocumentID
    public let winner: RevisionID
    public let isDeleted: Bool
    /// Present when asked for (all leaves, conflicts).
    public let tree: RevisionTree?
    /// The winning revision's body and attachments, when asked for.
    public let body: [UInt8]?
    public let attachments: [AttachmentInfo]

    /// The same row with another body (a reader's view of it).
    public func replacingBody(_ body: [UInt8]?) -> ChangeRow {
        ChangeRow(sequence: sequence, id: id, winner: winner, isDeleted: isDeleted, tree: tree, body: body,
                  attachments: attachments)
    }
}

public struct ChangesQuery: Sendable {
    public var since: Int
    public var limit: Int?
    public var descending: Bool
    public var includeTree: Bool
    public var includeBodies: Bool

    public init(since: Int = 0, limit: Int? = nil, descending: Bool = false,
                includeTree: Bool = false, includeBodies: Bool = false) {
        self.since = since
        self.limit = limit
        self.descending = descending
        self.includeTree = includeTree
        self.includeBodies = includeBodies
    }
}

/// Key range over document IDs, in raw byte order as CouchDB's `_all_docs`.
public struct AllDocumentsQuery: Sendable {
    public var startKey: String?
    public var endKey: String?
    public var inclusiveEnd = true
    public var descending = false
    public var limit: Int?
    public var skip = 0
    public var includeBodies = false
    public var includeTree = false
    /// Continue after this ID (exclusive), for paging.
    public var after: String?
    /// Only IDs in `[low, high)`, whatever the keys say: one partition's range (read
    /// through the ID index, so other partitions' rows are never visited).
    public var within: (low: String, high: String)?
    public init() {}
}

public struct AllDocumentsRow: Sendable {
    public let id: DocumentID
    public let winner: RevisionID
    public let isDeleted: Bool
    public let sequence: Int
    public let tree: RevisionTree?
    public let body: [UInt8]?
    public let attachments: [AttachmentInfo]
}

import CouchCore

/// One end of a replication: the operations the replicator needs from a database,
/// whether it is in this process (`LocalEndpoint`, on the store) or behind a URL
/// (`RemoteEndpoint`, over HTTP). The replicator never asks which; local→local,
/// local→remote, remote→local and remote→remote run the same code.
///
/// Methods throw `ReplicationError`; a remote endpoint retries failed requests itself
/// before giving up with a transient error.
public protocol DatabaseEndpoint: AnyObject, Sendable {
    /// For logs, results and `_active_tasks`: never contains credentials.
    var displayName: String { get }

    /// Opens the database (CouchDB's `db_open`): creates it first when asked, and fails
    /// with `db_not_found` or `unauthorized` as CouchDB's replicator does.
    func open(create: Bool, createParameters: JSONObject) async throws(ReplicationError) -> EndpointInfo

    /// `GET /db`: the update sequence and instance start time.
    func info() async throws(ReplicationError) -> EndpointInfo

    /// How many changes follow `sequence` (for progress); nil when the peer cannot tell.
    func pendingChanges(since sequence: SourceSequence) async throws(ReplicationError) -> Int?

    /// The source of a design document's filter function (for the replication ID).
    func filterFunctionSource(designDocument: DocumentID, name: String) async throws(ReplicationError) -> String

    /// A `_local/` document with its `_rev`, or nil if there is none.
    func localDocument(_ id: DocumentID) async throws(ReplicationError) -> JSONObject?

    /// Writes a `_local/` document (with `_rev` when it replaces one); returns the new revision.
    /// Throws `conflict`-kind errors as `checkpointCommitFailure`.
    func putLocalDocument(_ id: DocumentID, _ body: JSONObject) async throws(ReplicationError) -> String

    /// `POST /db/_ensure_full_commit`: the instance start time it reports.
    func ensureFullCommit() async throws(ReplicationError) -> String?

    /// The change feed from `request.since`, read as it arrives.
    func changes(_ request: ChangesRequest) async throws(ReplicationError) -> any ChangeStream

    /// `_revs_diff`: of these revisions, the ones this database lacks.
    func revisionsDifference(_ revisions: [(DocumentID, [RevisionID])]) async throws(ReplicationError) -> [MissingRevisions]

    /// `_bulk_get?revs=true&latest=true&attachments=false`; throws `notImplemented` when the
    /// peer has no `_bulk_get`, so the fetcher falls back to `openRevisions`.
    func bulkGet(_ requests: [RevisionRequest]) async throws(ReplicationError) -> [FetchResult]

    /// `GET /db/doc?open_revs=[...]&revs=true&latest=true`: some leaves of one document.
    func openRevisions(_ id: DocumentID, _ revisions: [RevisionID]) async throws(ReplicationError) -> [FetchResult]

    /// `_bulk_docs` with `new_edits=false`: the per-document failures (empty when all were written).
    func writeRevisions(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [WriteFailure]

    // MARK: Attachments
    //
    // Revisions whose JSON has `_attachments` travel another road, as in CouchDB (see
    // `AttachedRevisionCopier`): fetched document by document with the bodies of the
    // attachments the target lacks (`open_revs` as `multipart/mixed`, each revision a
    // `multipart/related` part, attachments no newer than `attachmentsSince` left as
    // stubs), and written one revision at a time (`PUT /db/doc?new_edits=false` as
    // `multipart/related`, or the store's `bulkUpdate` with the bodies as staged blobs).

    /// Where attachment bodies fetched for this database, as a target, wait for their
    /// write: its blob store when local, temporary files when remote.
    func attachmentSpool() throws(ReplicationError) -> any AttachmentSpool

    /// Some leaves of one document (`latest`: the leaves they lead to), each with the
    /// bodies of its attachments newer than the newest of `attachmentsSince` in its history
    /// (all of them when empty), received into `spool`. Missing revisions are left out.
    func revisionsWithAttachments(_ id: DocumentID, _ revisions: [RevisionID], attachmentsSince: [RevisionID],
                                  spool: any AttachmentSpool) async throws(ReplicationError) -> [AttachedRevision]

    /// Writes a revision with its attachment bodies (`new_edits=false`); a per-document
    /// refusal (`missing_stub` when a stub names an attachment the target lacks,
    /// `forbidden`, ...) is returned, not thrown.
    func writeRevisionWithAttachments(_ revision: AttachedRevision) async throws(ReplicationError) -> WriteFailure?
}

/// What opening a database tells the replicator.
public struct EndpointInfo: Sendable {
    public let updateSequence: SourceSequence
    /// Constant for the life of the database; compared with `_ensure_full_commit`'s answer.
    public let instanceStartTime: String?

    public init(updateSequence: SourceSequence, instanceStartTime: String?) {
        self.updateSequence = updateSequence
        self.instanceStartTime = instanceStartTime
    }
}

/// What the changes reader asks a source for.
public struct ChangesRequest: Sendable {
    public var since: SourceSequence
    public var continuous: Bool
    /// `style=all_docs` (every leaf) unless only winning revisions are replicated.
    public var allLeaves: Bool
    public var filter: ReplicationFilter?
    /// Continuous feeds: milliseconds between the source's heartbeats.
    public var heartbeatMilliseconds: Int
    /// Normal feeds: CouchDB's `timeout` (connection timeout / 3).
    public var timeoutMilliseconds: Int

    public init(since: SourceSequence, continuous: Bool, allLeaves: Bool = true, filter: ReplicationFilter? = nil,
                heartbeatMilliseconds: Int = 10_000, timeoutMilliseconds: Int = 10_000) {
        self.since = since
        self.continuous = continuous
        self.allLeaves = allLeaves
        self.filter = filter
        self.heartbeatMilliseconds = heartbeatMilliseconds
        self.timeoutMilliseconds = timeoutMilliseconds
    }
}

/// One row of a change feed: a document and its leaf revisions.
public struct Change: Sendable {
    public let sequence: SourceSequence
    public let id: DocumentID
    public let revisions: [RevisionID]
    public let isDeleted: Bool

    public init(sequence: SourceSequence, id: DocumentID, revisions: [RevisionID], isDeleted: Bool) {
        self.sequence = sequence
        self.id = id
        self.revisions = revisions
        self.isDeleted = isDeleted
    }
}

/// What a change feed says next.
public enum ChangeEvent: Sendable {
    case change(Change)
    /// The source has nothing more for now (a continuous feed waits).
    case caughtUp
    /// The feed ended at this sequence (a normal feed's `last_seq`, or a continuous feed's
    /// closing line); filtered feeds may end beyond their last row.
    case lastSequence(SourceSequence)
}

/// A change feed being read. `next()` returns nil once the feed has ended.
public protocol ChangeStream: Sendable {
    func next() async throws(ReplicationError) -> ChangeEvent?
    func cancel()
}

/// `_revs_diff`'s answer for one document.
public struct MissingRevisions: Sendable {
    public let id: DocumentID
    public let missing: [RevisionID]
    public let possibleAncestors: [RevisionID]

    public init(id: DocumentID, missing: [RevisionID], possibleAncestors: [RevisionID]) {
        self.id = id
        self.missing = missing
        self.possibleAncestors = possibleAncestors
    }
}

/// One revision to fetch.
public struct RevisionRequest: Sendable {
    public let id: DocumentID
    public let revision: RevisionID
    /// Revisions the target already has (`possible_ancestors`): attachments no newer need not be sent.
    public let attachmentsSince: [RevisionID]

    public init(id: DocumentID, revision: RevisionID, attachmentsSince: [RevisionID] = []) {
        self.id = id
        self.revision = revision
        self.attachmentsSince = attachmentsSince
    }
}

/// A revision as it travels from source to target: the document's JSON with `_id`, `_rev`,
/// `_revisions` (and `_deleted`, `_attachments` when it has them).
public struct ReplicatedRevision: Sendable {
    public let id: DocumentID
    public let revision: RevisionID
    /// The document's JSON as the source sent it, checked valid, while `document` is not
    /// replaced: a remote target gets these bytes as they are, and nothing is parsed unless
    /// asked for (`document`).
    public private(set) var sourceJSON: ArraySlice<UInt8>?
    private var parsed: JSONObject?
    /// Whether it must travel with its attachments (see `DatabaseEndpoint`).
    public private(set) var hasAttachments: Bool
    /// About how many bytes of JSON the source sent or stored for it (0: not known), from
    /// which the replicator sizes its batches.
    public var encodedSize = 0

    public init(id: DocumentID, revision: RevisionID, document: JSONObject) {
        self.id = id
        self.revision = revision
        self.parsed = document
        self.hasAttachments = Self.hasAttachments(document)
    }

    /// Reads `_id` and `_rev` of a document object; nil if they are missing or malformed.
    public init?(document: JSONObject) {
        guard let id = document["_id"]?.stringValue, let text = document["_rev"]?.stringValue,
              let revision = RevisionID(text) else { return nil }
        self.init(id: DocumentID(id), revision: revision, document: document)
    }

    /// A document kept as the JSON it came in (see `sourceJSON`), which must be a valid object
    /// whose `_id`, `_rev` and `_attachments` are those given.
    init(id: DocumentID, revision: RevisionID, json: ArraySlice<UInt8>, hasAttachments: Bool) {
        self.id = id
        self.revision = revision
        self.sourceJSON = json
        self.hasAttachments = hasAttachments
        self.encodedSize = json.count
    }

    /// The document's members (parsed from `sourceJSON` at each read when it came as JSON).
    public var document: JSONObject {
        get {
            if let parsed { return parsed }
            guard let json = sourceJSON, let object = try? JSONValue.parse(json).objectValue else { return [:] }
            return object
        }
        set {
            parsed = newValue
            sourceJSON = nil
            hasAttachments = Self.hasAttachments(newValue)
        }
    }

    /// Appends the document's JSON: the bytes it came in when it has them.
    public func writeJSON(to output: inout [UInt8]) {
        if let sourceJSON {
            output.append(contentsOf: sourceJSON)
        } else {
            JSONValue.object(document).write(to: &output)
        }
    }

    /// The document's JSON (see `writeJSON`).
    public var json: [UInt8] {
        var output: [UInt8] = []
        writeJSON(to: &output)
        return output
    }

    private static func hasAttachments(_ document: JSONObject) -> Bool {
        guard let attachments = document["_attachments"]?.objectValue else { return false }
        return !attachments.isEmpty
    }
}

/// What fetching one revision gave.
public enum FetchResult: Sendable {
    case found(ReplicatedRevision)
    /// The source no longer has it (compacted away or never there).
    case missing(DocumentID, RevisionID)
    case failed(DocumentID, RevisionID?, String)
}

/// A document the target refused (`forbidden` from validation, `unauthorized`, too large...).
public struct WriteFailure: Error, Sendable {
    public let id: DocumentID
    public let revision: RevisionID?
    public let error: String
    public let reason: String

    public init(id: DocumentID, revision: RevisionID?, error: String, reason: String) {
        self.id = id
        self.revision = revision
        self.error = error
        self.reason = reason
    }
}

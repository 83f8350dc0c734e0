import CouchCore
import CouchFunctions
import CouchStore
import Foundation

/// A database of this process, used through the store directly: no HTTP, no JSON
/// round trip for the change feed or the revision trees.
public final class LocalEndpoint: DatabaseEndpoint, @unchecked Sendable {
    public let name: DatabaseName
    private let databases: DatabaseManager
    /// Runs a named filter when this database is the source.
    private let functions: FunctionRuntime?
    /// Who writes replicated revisions, as validation functions see it: the replicator,
    /// with the admin role (only server admins start replications).
    let user = UserContext.internalWriter
    private let lock = NSLock()
    private var opened: Database?

    public init(name: DatabaseName, databases: DatabaseManager, functions: FunctionRuntime? = nil) {
        self.name = name
        self.databases = databases
        self.functions = functions
    }

    public var displayName: String { name.rawValue }

    func database() throws(ReplicationError) -> Database {
        lock.lock()
        defer { lock.unlock() }
        // A database deleted (and perhaps created again) since: open what the name opens now.
        if let opened, databases.isCurrent(opened) { return opened }
        do {
            let database = try databases.database(name)
            opened = database
            return database
        } catch {
            throw ReplicationError(.databaseNotFound, "could not open \(name.rawValue)")
        }
    }

    /// Runs store work off the task threads, naming the store's errors as the replicator does.
    func store<Value: Sendable>(_ work: @escaping @Sendable (Database) throws -> Value) async throws(ReplicationError) -> Value {
        let database = try database()
        do {
            return try await Blocking.run { try work(database) }
        } catch let error as CouchError {
            throw Self.replicationError(error, database: name)
        } catch {
            throw ReplicationError(.unknown, String(describing: error))
        }
    }

    static func replicationError(_ error: CouchError, database: DatabaseName) -> ReplicationError {
        switch error.kind {
        case .unauthorized: ReplicationError(.unauthorized, error.reason)
        case .forbidden: ReplicationError(.forbidden, error.reason)
        case .notFound where error.reason == CouchError.databaseMissing.reason:
            ReplicationError(.databaseNotFound, "could not open \(database.rawValue)")
        case .databaseNotFound, .peerUnreachable, .requestFailed, .checkpointCommitFailure, .filterFetchError,
             .requestBodyTooLarge, .stopped, .badRequest, .notImplemented:
            error
        default: ReplicationError(.unknown, error.description)
        }
    }

    public func open(create: Bool, createParameters: JSONObject) async throws(ReplicationError) -> EndpointInfo {
        if create {
            let (databases, name) = (self.databases, self.name)
            _ = try? await Blocking.run { if !databases.exists(name) { _ = try databases.create(name) } }
        }
        return try await info()
    }

    public func info() async throws(ReplicationError) -> EndpointInfo {
        let database = try database()
        return EndpointInfo(updateSequence: SourceSequence(UpdateSequence(database.updateSequence).json),
                            instanceStartTime: database.instanceStartTime)
    }

    public func pendingChanges(since sequence: SourceSequence) async throws(ReplicationError) -> Int? {
        let after = sequence.leadingInteger ?? 0
        return try await store { try $0.pendingChanges(after: after) }
    }

    public func filterFunctionSource(designDocument: DocumentID, name: String) async throws(ReplicationError) -> String {
        // A native filter has no source: its name stands for it in the replication ID.
        let qualified = designDocument.nameAfterPrefix + "/" + name
        if let functions, functions.hasNativeFilter(qualified, database: self.name) { return "native:" + qualified }
        let body = try? await store { try $0.document(designDocument).revision.body }
        guard let body, let value = try? JSONValue.parse(body), let source = value["filters"]?[name]?.stringValue else {
            throw ReplicationError(.filterFetchError, "Couldn't open document `\(designDocument.rawValue)` with filter `\(name)` from source \(displayName)")
        }
        return source
    }

    public func localDocument(_ id: DocumentID) async throws(ReplicationError) -> JSONObject? {
        let stored: LocalDocument? = try await store { database in
            do {
                return try database.localDocument(id)
            } catch let error as CouchError where error.kind == .notFound {
                return nil
            }
        }
        guard let stored else { return nil }
        var document: JSONObject = ["_id": JSONValue(id.rawValue), "_rev": JSONValue(stored.revisionID.description)]
        if let body = try? JSONValue.parse(stored.body).objectValue {
            for (key, value) in body { document[key] = value }
        }
        return document
    }

    public func putLocalDocument(_ id: DocumentID, _ body: JSONObject) async throws(ReplicationError) -> String {
        var document = body
        document["_id"] = JSONValue(id.rawValue)
        let json = JSONValue.object(document)
        do {
            return try await store { database in
                var edit = try DocumentEdit(json: json)
                edit.id = id
                return try database.update(edit).description
            }
        } catch where error.reason == CouchError.documentConflict.description {
            throw ReplicationError(.checkpointCommitFailure, "conflict")
        }
    }

    public func ensureFullCommit() async throws(ReplicationError) -> String? {
        try database().instanceStartTime
    }

    public func changes(_ request: ChangesRequest) async throws(ReplicationError) -> any ChangeStream {
        try LocalChangeStream(database: try database(), request: request, functions: functions)
    }

    public func revisionsDifference(_ revisions: [(DocumentID, [RevisionID])]) async throws(ReplicationError) -> [MissingRevisions] {
        try await store { database in
            try database.revisionDifferences(revisions).map {
                MissingRevisions(id: $0.id, missing: $0.missing, possibleAncestors: $0.possibleAncestors)
            }
        }
    }

    public func bulkGet(_ requests: [RevisionRequest]) async throws(ReplicationError) -> [FetchResult] {
        // One reader connection for the batch, its snapshot brought up to date every few hundred documents.
        try await store { database in
            try database.readingInBatches { reader in
                var results: [FetchResult] = []
                for request in requests {
                    results += try Self.read(reader, request.id, [request.revision], latest: true)
                }
                return results
            }
        }
    }

    public func openRevisions(_ id: DocumentID, _ revisions: [RevisionID]) async throws(ReplicationError) -> [FetchResult] {
        try await store { database in try database.readingInBatches { try Self.read($0, id, revisions, latest: true) } }
    }

    /// Revisions of one document as replication carries them: `_revisions`, `_deleted`,
    /// and attachment stubs (which send the revision down the attachment road).
    static func read(_ reader: BatchReader, _ id: DocumentID, _ requested: [RevisionID], latest: Bool) throws -> [FetchResult] {
        guard let (tree, found) = try leaves(reader, id, requested, latest: latest) else {
            return requested.map { .missing(id, $0) }
        }
        return found.map { revision, stored in
            guard let stored else { return .missing(id, revision) }
            if stored.attachments.isEmpty, let json = replicatedJSON(stored, tree: tree) {
                return .found(ReplicatedRevision(id: id, revision: revision, json: json[...], hasAttachments: false))
            }
            var document = replicated(stored, tree: tree)
            if !stored.attachments.isEmpty {
                var stubs = JSONObject()
                for attachment in stored.attachments { stubs[attachment.name] = stub(attachment) }
                document["_attachments"] = .object(stubs)
            }
            var replicated = ReplicatedRevision(id: id, revision: revision, document: document)
            replicated.encodedSize = stored.body.count
            return .found(replicated)
        }
    }

    /// The stored revisions `requested` names (with `latest`, the leaves they lead to, each
    /// once) and the document's revision tree; nil when the document does not exist.
    static func leaves(_ reader: BatchReader, _ id: DocumentID, _ requested: [RevisionID],
                       latest: Bool) throws -> (tree: RevisionTree, revisions: [(RevisionID, StoredRevision?)])? {
        let read = try reader.revisions(id, choosing: { tree in
            var revisions: [RevisionID] = []
            var seen = Set<RevisionID>()
            for revision in requested {
                let resolved = latest && tree.contains(revision)
                    ? tree.leaves(descendingFrom: revision).map(\.revision) : [revision]
                for leaf in resolved where seen.insert(leaf).inserted { revisions.append(leaf) }
            }
            return revisions
        })
        guard let (record, revisions, stored) = read else { return nil }
        return (record.tree, Array(zip(revisions, stored)))
    }

    /// A stored revision's JSON without `_attachments`: `_id`, `_rev`, the body, `_deleted`, `_revisions`.
    static func replicated(_ stored: StoredRevision, tree: RevisionTree) -> JSONObject {
        var document: JSONObject = ["_id": JSONValue(stored.id.rawValue), "_rev": JSONValue(stored.revision.description)]
        if case .object(let members)? = try? JSONValue.parse(stored.body) {
            for (key, value) in members { document[key] = value }
        }
        if stored.isDeleted { document["_deleted"] = true }
        document["_revisions"] = RevisionHistory(tree.history(of: stored.revision)).json
        return document
    }

    /// What `replicated` makes, written around the stored body's bytes without parsing them;
    /// nil if the body is not a compact JSON object (then it is parsed).
    static func replicatedJSON(_ stored: StoredRevision, tree: RevisionTree) -> [UInt8]? {
        let body = stored.body
        guard body.count >= 2, body.first == UInt8(ascii: "{"), body.last == UInt8(ascii: "}"),
              body.count == 2 || body[1] == UInt8(ascii: "\""),
              (try? JSONCursor.read(body[...]) { cursor throws(JSONParseError) in _ = try cursor.skipValue() }) != nil
        else { return nil }
        var json: [UInt8] = []
        json.reserveCapacity(body.count + 200)
        json.append(contentsOf: #"{"_id":"#.utf8)
        JSONWriter.appendString(stored.id.rawValue, to: &json)
        json.append(contentsOf: #","_rev":"#.utf8)
        JSONWriter.appendString(stored.revision.description, to: &json)
        if body.count > 2 {
            json.append(UInt8(ascii: ","))
            json.append(contentsOf: body[1..<(body.count - 1)])
        }
        if stored.isDeleted { json.append(contentsOf: #","_deleted":true"#.utf8) }
        json.append(contentsOf: #","_revisions":"#.utf8)
        RevisionHistory(tree.history(of: stored.revision)).write(to: &json)
        json.append(UInt8(ascii: "}"))
        return json
    }

    /// `{"content_type", "revpos", "digest", "length", "stub": true}`
    static func stub(_ attachment: AttachmentInfo) -> JSONValue {
        ["content_type": JSONValue(attachment.contentType), "revpos": JSONValue(attachment.revpos),
         "digest": JSONValue(attachment.digest), "length": JSONValue(attachment.length), "stub": true]
    }

    public func writeRevisions(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [WriteFailure] {
        try await writeRevisions(revisions, keepingAbsentBodies: false)
    }

    /// As `writeRevisions`; with `keepingAbsentBodies`, attachment stubs are stored with
    /// their bodies absent (attachments on demand).
    func writeRevisions(_ revisions: [ReplicatedRevision], keepingAbsentBodies: Bool) async throws(ReplicationError) -> [WriteFailure] {
        try await store { database in
            var failures: [WriteFailure] = []
            var edits: [DocumentEdit] = []
            var writing: [ReplicatedRevision] = []
            for revision in revisions {
                do {
                    edits.append(try DocumentEdit(json: .object(revision.document)))
                    writing.append(revision)
                } catch let error as CouchError {
                    failures.append(WriteFailure(id: revision.id, revision: revision.revision,
                                                 error: error.error, reason: error.reason))
                }
            }
            let results = try database.bulkUpdate(edits, newEdits: false, keepingAbsentBodies: keepingAbsentBodies, as: self.user)
            for (revision, result) in zip(writing, results) {
                if case .failure(let error) = result {
                    failures.append(WriteFailure(id: revision.id, revision: revision.revision,
                                                 error: error.error, reason: error.reason))
                }
            }
            return failures
        }
    }
}

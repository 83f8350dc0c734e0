import CouchCore
import CouchStore

/// The attachment road through the store: a local source hands over its blob files (read
/// as they are sent or copied, never loaded whole); a local target receives bodies into its
/// own blob store and writes the revision with `bulkUpdate(newEdits: false, following:)`.
extension LocalEndpoint {
    public func attachmentSpool() throws(ReplicationError) -> any AttachmentSpool {
        BlobStoreSpool(store: try database().attachments)
    }

    /// Attachments no newer than the newest of `attachmentsSince` in a revision's history
    /// are stubs (the target has them); the others follow, as files of this blob store.
    public func revisionsWithAttachments(_ id: DocumentID, _ revisions: [RevisionID], attachmentsSince: [RevisionID],
                                         spool: any AttachmentSpool) async throws(ReplicationError) -> [AttachedRevision] {
        try await store { database in
            guard let (tree, found) = try database.readingInBatches({ try Self.leaves($0, id, revisions, latest: true) }) else {
                return []
            }
            return found.compactMap { _, stored in
                stored.map { Self.attached($0, tree: tree, attachmentsSince: attachmentsSince, store: database.attachments) }
            }
        }
    }

    private static func attached(_ stored: StoredRevision, tree: RevisionTree, attachmentsSince: [RevisionID],
                                 store: AttachmentStore) -> AttachedRevision {
        var document = replicated(stored, tree: tree)
        let threshold = attachmentsSinceGeneration(tree.history(of: stored.revision), attachmentsSince)
        var attachments = JSONObject()
        var bodies: [AttachmentBody] = []
        var absentBody: String?
        for attachment in stored.attachments {
            // No ancestor in common: every body (even one a replicated write left at revpos 0).
            guard threshold == 0 || attachment.revpos > threshold else {
                attachments[attachment.name] = stub(attachment)
                continue
            }
            if attachment.isBodyAbsent {
                absentBody = absentBody ?? attachment.name
                attachments[attachment.name] = stub(attachment)
                continue
            }
            var entry: JSONObject = [
                "content_type": JSONValue(attachment.contentType), "revpos": JSONValue(attachment.revpos),
                "digest": JSONValue(attachment.digest), "length": JSONValue(attachment.length), "follows": true,
            ]
            if let encoding = attachment.encoding {
                entry["encoding"] = JSONValue(encoding)
                entry["encoded_length"] = JSONValue(attachment.storedLength)
            }
            attachments[attachment.name] = .object(entry)
            bodies.append(AttachmentBody(name: attachment.name, contentType: attachment.contentType,
                                         encoding: attachment.encoding, length: attachment.storedLength,
                                         content: .file(path: store.path(for: attachment.blobKey))))
        }
        if !stored.attachments.isEmpty { document["_attachments"] = .object(attachments) }
        return AttachedRevision(revision: ReplicatedRevision(id: stored.id, revision: stored.revision, document: document),
                                bodies: bodies, absentBody: absentBody)
    }

    /// CouchDB's `atts_since` rule: the generation of the newest of `since` in `history`
    /// (0 when none is), below which (inclusive) attachments need not be sent.
    static func attachmentsSinceGeneration(_ history: [RevisionID], _ since: [RevisionID]) -> Int {
        guard !since.isEmpty else { return 0 }
        let known = Set(since)
        return history.first { known.contains($0) }?.generation ?? 0
    }

    /// Stages the bodies in this blob store (committing those received into it, copying
    /// the others), then writes the revision with them as its `follows` attachments.
    public func writeRevisionWithAttachments(_ attached: AttachedRevision) async throws(ReplicationError) -> WriteFailure? {
        try await store { database in
            let revision = attached.revision
            var following: [String: StagedBlob] = [:]
            do {
                for body in attached.bodies {
                    following[body.name] = try Self.stage(body, in: database.attachments)
                }
            } catch {
                database.discardStaged(Array(following.values))
                throw error
            }
            let edit: DocumentEdit
            do {
                edit = try DocumentEdit(json: .object(revision.document))
            } catch let error as CouchError {
                database.discardStaged(Array(following.values))
                return WriteFailure(id: revision.id, revision: revision.revision, error: error.error, reason: error.reason)
            }
            if case .failure(let error) = try database.bulkUpdate([edit], newEdits: false, following: following, as: self.user)[0] {
                return WriteFailure(id: revision.id, revision: revision.revision, error: error.error, reason: error.reason)
            }
            return nil
        }
    }

    /// A body as a blob of `store`, held in flight for the write: compressed when it comes
    /// unencoded and its type is compressible, as CouchDB stores what it receives.
    private static func stage(_ body: AttachmentBody, in store: AttachmentStore) throws -> StagedBlob {
        let compressing = store.compresses(contentType: body.contentType, encoding: body.encoding)
        switch body.content {
        case .blob(let blob) where blob.store === store:
            return try blob.commit(compressing: compressing)
        case .blob(let blob):
            return try store.ingest(contentsOf: blob.path, compressing: compressing)
        case .bytes(let bytes):
            return try store.ingest(bytes, compressing: compressing)
        case .file(let path):
            return try store.ingest(contentsOf: path, compressing: compressing)
        case .spooled(let file):
            return try store.ingest(contentsOf: file.path, compressing: compressing)
        }
    }
}

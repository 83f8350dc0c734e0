import CouchCore

/// An attachment of an edit, read from `_attachments` before the write transaction
/// (inline data is already in the blob store then).
enum AttachmentInput {
    /// `"stub": true`: keep the attachment of that name from the revision this one follows.
    case stub(name: String, revpos: Int?, digest: String?)
    /// New bytes, from inline `data` or a multipart part marked `follows`.
    case blob(name: String, contentType: String, blob: StagedBlob, encoding: String?, length: Int, revpos: Int?)
    /// An attachment carried over unchanged by an attachment route.
    case kept(AttachmentInfo)
}

/// An edit whose attachments are staged and ready to be resolved inside the transaction.
struct PreparedEdit {
    let edit: DocumentEdit
    let attachments: [AttachmentInput]
    /// Blobs this edit holds in flight, released after the commit.
    let staged: [StagedBlob]
}

extension Database {
    /// Reads `_attachments` and stages inline data in the blob store.
    func prepare(_ edit: DocumentEdit, following: [String: StagedBlob]) throws -> PreparedEdit {
        guard let attachments = edit.attachments, !edit.isDeleted else {
            return PreparedEdit(edit: edit, attachments: [], staged: [])
        }
        var inputs: [AttachmentInput] = []
        var staged: [StagedBlob] = []
        do {
            for (name, value) in attachments {
                if name.hasPrefix("_") {
                    throw CouchError.badRequest("Attachment name '\(name)' starts with prohibited character '_'")
                }
                guard let meta = value.objectValue else {
                    throw CouchError.badRequest("Attachment '\(name)' must be an object")
                }
                if meta["stub"]?.boolValue == true {
                    inputs.append(.stub(name: name, revpos: meta["revpos"]?.intValue, digest: meta["digest"]?.stringValue))
                    continue
                }
                let encoding = meta["encoding"]?.stringValue
                // A content type with control characters (CR/LF) could not be sent back as a header.
                if let contentType = meta["content_type"]?.stringValue,
                   contentType.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
                    throw CouchError.badRequest("Invalid content_type for attachment \(name)")
                }
                let blob: StagedBlob
                var trustsDigest = false
                if let data = meta["data"]?.stringValue {
                    guard let bytes = Base64.decode(data) else {
                        throw CouchError.badRequest("Invalid attachment data for \(name)")
                    }
                    // Stored as sent and decompressed for clients later: it must be gzip indeed.
                    if encoding == "gzip", !Gzip.isValid(bytes) {
                        throw CouchError.badRequest("Attachment \(name) is not valid gzip data")
                    }
                    blob = try self.attachments.ingest(bytes)
                    staged.append(blob)
                } else if meta["follows"]?.boolValue == true {
                    guard let followed = following[name] else {
                        throw CouchError.badRequest("Missing attachment body for \(name)")
                    }
                    blob = followed
                    trustsDigest = true
                } else {
                    throw CouchError.badRequest("Attachment '\(name)' has neither data, stub nor follows")
                }
                // Inline data may come with the stale digest of the stub it replaces: CouchDB
                // computes the digest of what it stores and ignores the client's.
                if trustsDigest, let digest = meta["digest"]?.stringValue, digest.hasPrefix("md5-"), digest != blob.digest {
                    throw CouchError.badRequest("Digest mismatch for attachment \(name)")
                }
                let declaredLength = meta["length"]?.intValue
                if trustsDigest, encoding == nil, let declaredLength, declaredLength != blob.length {
                    throw CouchError.badRequest("Length mismatch for attachment \(name)")
                }
                inputs.append(.blob(name: name, contentType: meta["content_type"]?.stringValue ?? "application/octet-stream",
                                    blob: blob, encoding: encoding,
                                    length: encoding == nil ? blob.length : (declaredLength ?? blob.length),
                                    revpos: meta["revpos"]?.intValue))
            }
        } catch {
            discardStaged(staged)
            throw error
        }
        return PreparedEdit(edit: edit, attachments: inputs, staged: staged)
    }

    /// The attachment list of a new revision: stubs found in the nearest stored ancestor
    /// (else 412 `missing_stub`), new blobs with their revpos.
    func resolve(_ prepared: PreparedEdit, id: DocumentID, generation: Int, newEdits: Bool, ancestors: [RevisionID],
                 record: DocumentRecord?, connection: SQLiteConnection) throws -> [AttachmentInfo] {
        var ancestorAttachments: [AttachmentInfo]?
        func inherited() throws -> [AttachmentInfo] {
            if let ancestorAttachments { return ancestorAttachments }
            var found: [AttachmentInfo] = []
            if let record {
                for ancestor in ancestors where record.tree.contains(ancestor) {
                    if let stored = try Self.revisionBody(record, ancestor, connection: connection) {
                        found = stored.attachments
                        break
                    }
                }
            }
            ancestorAttachments = found
            return found
        }
        return try prepared.attachments.map { input -> AttachmentInfo in
            switch input {
            case .kept(let info):
                return info
            case .blob(let name, let contentType, let blob, let encoding, let length, let revpos):
                return AttachmentInfo(name: name, contentType: contentType, length: length, digest: blob.digest,
                                      revpos: newEdits ? generation : (revpos ?? generation), encoding: encoding,
                                      encodedLength: encoding == nil ? nil : blob.length, blobKey: blob.key)
            case .stub(let name, let revpos, let digest):
                guard let match = try inherited().first(where: {
                    $0.name == name && (revpos == nil || $0.revpos == revpos) && (digest == nil || $0.digest == digest)
                }) else {
                    throw CouchError(.missingStub, "Invalid attachment stub in \(id) for \(name)")
                }
                return match
            }
        }
    }

    /// After a write: releases staged blobs, and removes those created for edits that
    /// failed (all of them when `results` is nil) if nothing else references them.
    func finishStaging(_ prepared: [Result<PreparedEdit, CouchError>], results: [WriteResult]?,
                       following: [StagedBlob]) {
        var release = following
        var failedNew: [StagedBlob] = []
        for (index, preparation) in prepared.enumerated() {
            guard case .success(let edit) = preparation else { continue }
            release += edit.staged
            var succeeded = false
            if let results, case .success = results[index] { succeeded = true }
            if !succeeded { failedNew += edit.staged.filter(\.isNew) }
        }
        if results == nil || results!.allSatisfy({ if case .failure = $0 { true } else { false } }) {
            failedNew += following.filter(\.isNew)
        }
        attachments.release(release)
        removeIfUnreferenced(failedNew)
    }

    /// Gives up blobs staged for a write that will not use them (parts of an upload that
    /// no attachment claimed), deleting those nothing else refers to.
    public func discardStaged(_ blobs: [StagedBlob]) {
        attachments.release(blobs)
        removeIfUnreferenced(blobs.filter(\.isNew))
    }

    /// Deletes blobs no committed revision refers to (the write that created them failed).
    func removeIfUnreferenced(_ blobs: [StagedBlob]) {
        guard !blobs.isEmpty else { return }
        let referenced = (try? readers.withConnection { connection in
            try blobs.filter { blob in
                let sql = "SELECT (SELECT count(*) FROM documents WHERE instr(attachments, ?) > 0) + (SELECT count(*) FROM revision_bodies WHERE instr(attachments, ?) > 0)"
                return (try connection.scalarInt(sql, [.blob(Array(blob.key.utf8)), .blob(Array(blob.key.utf8))]) ?? 1) > 0
            }.map(\.key)
        }) ?? blobs.map(\.key)
        attachments.removeIfIdle(blobs.map(\.key).filter { !referenced.contains($0) })
    }
}

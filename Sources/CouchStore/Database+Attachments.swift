import CouchCore

/// An attachment of an edit, read from `_attachments` before the write transaction
/// (inline data is already in the blob store then).
enum AttachmentInput {
    /// `"stub": true`: keep the attachment of that name from the revision this one follows;
    /// `absent` (a replicated write that keeps absent bodies) is what to store when no
    /// ancestor has it: the stub's metadata, its body absent.
    case stub(name: String, revpos: Int?, digest: String?, absent: AttachmentInfo?)
    /// New bytes, from inline `data` or a multipart part marked `follows`.
    case blob(name: String, contentType: String, blob: StagedBlob, encoding: String?, length: Int, revpos: Int?)
    /// An attachment carried over unchanged by an attachment route.
    case kept(AttachmentInfo)
}

/// An edit made ready for the single writer on the request's own thread: attachments staged,
/// the body serialized as stored, and its part of the revision ID's hashed term made, so the
/// writer's batch does only what needs the writer (read the tree, merge, SQL).
/// A class: batches pass each one through results and switches, where a struct of seven
/// references was copied (retained field by field) several times per document.
final class PreparedEdit: Sendable {
    let edit: DocumentEdit
    let attachments: [AttachmentInput]
    /// Blobs this edit holds in flight, released after the commit.
    let staged: [StagedBlob]
    /// The body as stored: compact JSON, the client's key order and number text.
    let bodyBytes: [UInt8]
    /// `edit.bodyTerm` (interactive edits of replicated documents only; nil otherwise).
    let bodyTerm: [UInt8]?
    /// The revision ID the edit gets if it follows `edit.revision` with no attachments:
    /// the writer takes it when that is indeed so, and hashes `bodyTerm` again otherwise.
    let expectedRevision: RevisionID?

    init(edit: DocumentEdit, attachments: [AttachmentInput], staged: [StagedBlob], newEdits: Bool = true) {
        self.edit = edit
        self.attachments = attachments
        self.staged = staged
        bodyBytes = edit.bodyBytes
        guard newEdits, edit.id?.isLocal != true else {
            bodyTerm = nil
            expectedRevision = nil
            return
        }
        let term = edit.bodyTerm
        bodyTerm = term
        // A generation that cannot be followed is refused by the writer; nothing to hash then.
        if attachments.isEmpty, (edit.revision?.generation ?? 0) < Int.max {
            expectedRevision = edit.nextRevision(after: edit.revision, bodyTerm: term)
        } else {
            expectedRevision = nil
        }
    }

    /// The revision ID this edit gets after `parent` with `attachments` (resolved in the writer).
    func nextRevision(after parent: RevisionID?, attachments resolved: [AttachmentInfo]) -> RevisionID {
        if resolved.isEmpty, let expectedRevision, parent == edit.revision { return expectedRevision }
        return edit.nextRevision(after: parent, attachments: resolved, bodyTerm: bodyTerm)
    }
}

extension Database {
    /// Reads `_attachments` and stages inline data in the blob store.
    func prepare(_ edit: DocumentEdit, following: [String: StagedBlob], newEdits: Bool,
                 keepingAbsentBodies: Bool = false) throws -> PreparedEdit {
        guard let attachments = edit.attachments, !edit.isDeleted else {
            return PreparedEdit(edit: edit, attachments: [], staged: [], newEdits: newEdits)
        }
        var inputs: [AttachmentInput] = []
        var staged: [StagedBlob] = []
        do {
            for (name, value) in attachments {
                if name.hasBytePrefix("_") {
                    throw CouchError.badRequest("Attachment name '\(name)' starts with prohibited character '_'")
                }
                guard let meta = value.objectValue else {
                    throw CouchError.badRequest("Attachment '\(name)' must be an object")
                }
                if meta["stub"]?.boolValue == true {
                    inputs.append(.stub(name: name, revpos: meta["revpos"]?.intValue, digest: meta["digest"]?.stringValue,
                                        absent: keepingAbsentBodies ? Self.absentAttachment(name, meta) : nil))
                    continue
                }
                // gzip or none (identity); any other coding is refused (415), never stored under a false claim.
                let declaredEncoding = try Self.encoding(of: name, meta["encoding"])
                let contentType = meta["content_type"]?.stringValue ?? "application/octet-stream"
                // A content type with control characters (CR/LF) could not be sent back as a header.
                if contentType.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
                    throw CouchError.badRequest("Invalid content_type for attachment \(name)")
                }
                let blob: StagedBlob
                var trustsDigest = false
                if let data = meta["data"]?.stringValue {
                    guard let bytes = Base64.decode(data) else {
                        throw CouchError.badRequest("Invalid attachment data for \(name)")
                    }
                    // Stored as sent and decompressed for clients later: it must be gzip indeed.
                    if declaredEncoding == "gzip", !Gzip.isValid(bytes) {
                        throw CouchError.badRequest("Attachment \(name) is not valid gzip data")
                    }
                    blob = try self.attachments.ingest(bytes, compressing: self.attachments.compresses(
                        contentType: contentType, encoding: declaredEncoding))
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
                // computes the digest of what it stores and ignores the client's. A sender's
                // digest and length describe the bytes it sent, before the store compressed them.
                let received = blob.given ?? StagedBlob.GivenBytes(md5: blob.md5, length: blob.length)
                if trustsDigest, let digest = meta["digest"]?.stringValue, digest.hasPrefix("md5-"), digest != received.digest {
                    throw CouchError.badRequest("Digest mismatch for attachment \(name)")
                }
                let declaredLength = meta["length"]?.intValue
                let encoding = blob.encoding ?? declaredEncoding.flatMap { $0 == "identity" ? nil : $0 }
                // Bytes sent encoded: only the sender knows their decoded length.
                let sentEncoded = blob.given == nil && encoding != nil
                if trustsDigest, !sentEncoded, let declaredLength, declaredLength != received.length {
                    throw CouchError.badRequest("Length mismatch for attachment \(name)")
                }
                inputs.append(.blob(name: name, contentType: contentType, blob: blob, encoding: encoding,
                                    length: sentEncoded ? (declaredLength ?? blob.length) : received.length,
                                    revpos: meta["revpos"]?.intValue))
            }
        } catch {
            discardStaged(staged)
            throw error
        }
        return PreparedEdit(edit: edit, attachments: inputs, staged: staged, newEdits: newEdits)
    }

    /// The coding of a body a client sends: none (`identity`, or not given) or `gzip`, the only
    /// ones CouchDB stores. Another (`deflate`...) is refused: kept, it would claim a coding the
    /// bytes may not have, and no reader could decode it; ignored (as CouchDB ignores it in
    /// inline `data`), compressed bytes would be stored as the content.
    private static func encoding(of name: String, _ value: JSONValue?) throws -> String? {
        switch value {
        case nil, .null?, .string("identity")?: return nil
        case .string("gzip")?: return "gzip"
        case .string(let other)?:
            throw CouchError(.badContentType, "Attachment \(name) has encoding \(other); only gzip and identity are supported")
        default: throw CouchError.badRequest("The encoding of attachment \(name) must be a string")
        }
    }

    /// A stub's metadata as an attachment whose body is absent; nil when the stub lacks what
    /// a reader needs (then it must match an ancestor's, as any stub).
    private static func absentAttachment(_ name: String, _ meta: JSONObject) -> AttachmentInfo? {
        guard let contentType = meta["content_type"]?.stringValue, let length = meta["length"]?.intValue, length >= 0,
              let digest = meta["digest"]?.stringValue, digest.hasPrefix("md5-"),
              let revpos = meta["revpos"]?.intValue, revpos > 0 else { return nil }
        let encoding = meta["encoding"]?.stringValue.flatMap { $0 == "identity" ? nil : $0 }
        return AttachmentInfo.absent(name: name, contentType: contentType, length: length, digest: digest, revpos: revpos,
                                     encoding: encoding, encodedLength: encoding == nil ? nil : meta["encoded_length"]?.intValue)
    }

    /// Stores the body of an absent attachment: the bytes `writer` holds must have the
    /// attachment's digest (else `bad_request`, and nothing is stored). Every revision of
    /// the document that lists an absent attachment with that digest gets the blob, in one
    /// write; the revisions themselves do not change. Returns the attachment of `name` as
    /// now stored in `revision`.
    public func fillAbsentBody(_ id: DocumentID, revision: RevisionID, name: String,
                               with writer: BlobWriter) throws -> AttachmentInfo {
        let blob = try attachments.commit(writer)
        defer {
            // Referenced if the body was filled; otherwise removed if nothing else refers to it.
            attachments.release([blob], committed: false)
            removeIfUnreferenced([blob].filter(\.isNew))
        }
        return try self.writer.perform { transaction -> AttachmentInfo in
            let connection = transaction.connection
            guard let record = try Self.record(id, connection: connection),
                  let stored = try Self.revisionBody(record, revision, connection: connection),
                  let wanted = stored.attachments.first(where: { $0.name == name }) else {
                throw CouchError.notFound("Document is missing attachment")
            }
            guard wanted.isBodyAbsent else { return wanted }
            guard wanted.digest == blob.digest, blob.length == wanted.storedLength else {
                throw CouchError.badRequest("Digest mismatch for attachment \(name): expected \(wanted.digest), received \(blob.digest)")
            }
            func filled(_ bytes: [UInt8]) -> [UInt8]? {
                var list = AttachmentInfo.decode(bytes)
                var changed = false
                for index in list.indices where list[index].isBodyAbsent && list[index].digest == blob.digest {
                    list[index].blobKey = blob.key
                    changed = true
                }
                return changed ? AttachmentInfo.encode(list) : nil
            }
            var rows: [(table: String, revision: String, bytes: [UInt8])] = []
            try connection.query("SELECT winning_rev, attachments FROM documents WHERE doc_id = ? AND attachments IS NOT NULL",
                                 [.text(id.rawValue)]) { rows.append(("documents", $0.text(0), $0.blob(1))) }
            try connection.query(
                "SELECT r.rev_id, r.attachments FROM revision_bodies r JOIN documents d ON d.doc_key = r.doc_key WHERE d.doc_id = ? AND r.attachments IS NOT NULL",
                [.text(id.rawValue)]) { rows.append(("revision_bodies", $0.text(0), $0.blob(1))) }
            for row in rows {
                guard let bytes = filled(row.bytes) else { continue }
                if row.table == "documents" {
                    try connection.run("UPDATE documents SET attachments = ? WHERE doc_id = ?", [.blob(bytes), .text(id.rawValue)])
                } else {
                    try connection.run(
                        "UPDATE revision_bodies SET attachments = ? WHERE rev_id = ? AND doc_key = (SELECT doc_key FROM documents WHERE doc_id = ?)",
                        [.blob(bytes), .text(row.revision), .text(id.rawValue)])
                }
            }
            var result = wanted
            result.blobKey = blob.key
            return result
        }
    }

    /// The attachment list of a new revision: stubs found in the nearest stored ancestor
    /// (else 412 `missing_stub`), new blobs with their revpos (a replicated one's as given,
    /// else 0, as CouchDB keeps it).
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
                                      revpos: newEdits ? generation : (revpos ?? 0), encoding: encoding,
                                      encodedLength: encoding == nil ? nil : blob.length, blobKey: blob.key)
            case .stub(let name, let revpos, _, let absent):
                // By name and revpos, as CouchDB's `couch_att:merge_stubs` matches (a peer's digest
                // may be that of the bytes before it compressed them).
                guard let match = try inherited().first(where: { $0.name == name && (revpos == nil || $0.revpos == revpos) }) else {
                    if let absent { return absent }
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
        var committed = following
        var failed: [StagedBlob] = []
        for (index, preparation) in prepared.enumerated() {
            guard case .success(let edit) = preparation else { continue }
            var succeeded = false
            if let results, case .success = results[index] { succeeded = true }
            if succeeded { committed += edit.staged } else { failed += edit.staged }
        }
        if results == nil || results!.allSatisfy({ if case .failure = $0 { true } else { false } }) {
            committed.removeAll()
            failed += following
        }
        attachments.release(committed, committed: true)
        attachments.release(failed, committed: false)
        removeIfUnreferenced(failed.filter(\.isNew))
    }

    /// Gives up blobs staged for a write that will not use them (parts of an upload that
    /// no attachment claimed), deleting those nothing else refers to.
    public func discardStaged(_ blobs: [StagedBlob]) {
        attachments.release(blobs, committed: false)
        removeIfUnreferenced(blobs.filter(\.isNew))
    }

    /// After a failed write: deletes the blobs it created that no committed revision refers
    /// to and no write holds, and unmarks them (see `AttachmentStore`). (A blob it found in
    /// place is another write's to unmark; a mark left over is checked at the next open.)
    func removeIfUnreferenced(_ blobs: [StagedBlob]) {
        guard !blobs.isEmpty else { return }
        let idle = attachments.watchIdle(blobs.map(\.key))
        guard !idle.isEmpty else { return }
        // When the references cannot be read, nothing is deleted (the marks stay for the sweep).
        let referenced = (try? readers.withConnection { connection in try Self.referencedKeys(idle, connection) }) ?? Set(idle)
        attachments.removeIfUnchanged(idle, unreferenced: Set(idle).subtracting(referenced))
    }

    /// Which of these blob keys a stored revision refers to (a scan of the attachment lists
    /// per key: for the few blobs of a failed write or a crash).
    static func referencedKeys(_ keys: [String], _ connection: SQLiteConnection) throws -> Set<String> {
        let sql = "SELECT (SELECT count(*) FROM documents WHERE instr(attachments, ?1) > 0) + (SELECT count(*) FROM revision_bodies WHERE instr(attachments, ?1) > 0)"
        return Set(try keys.filter { key in (try connection.scalarInt(sql, [.blob(Array(key.utf8))]) ?? 1) > 0 })
    }
}

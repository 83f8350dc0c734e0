import CouchCore

/// The result of one document in a write: its new (or, for a replicated revision
/// already stored, existing) revision, or the error that stopped it.
public typealias WriteResult = Result<RevisionID, CouchError>

/// An all-or-nothing write (`_bulk_docs` with `all_or_nothing`) that wrote nothing because
/// some of its edits failed: what each edit would have given.
public struct AllOrNothingAborted: Error {
    public let results: [WriteResult]
}

extension Database {
    /// An interactive edit (`new_edits=true`): the edit must name the current leaf it replaces.
    public func update(_ edit: DocumentEdit, as user: UserContext = .internalWriter) throws -> RevisionID {
        try bulkUpdate([edit], newEdits: true, as: user)[0].get()
    }

    /// Writes replicated revisions (`new_edits=false`) or interactive edits, sharing one
    /// commit; each document succeeds or fails on its own. `following` holds the bodies of
    /// attachments marked `"follows": true` (a multipart upload), by attachment name.
    /// Validation runs before the edits enter the single writer, against the documents as
    /// they are then; inside, only an edit whose document moved meanwhile is checked again.
    /// `keepingAbsentBodies` (replicated writes only): a stub no ancestor backs is stored
    /// with its body absent (`AttachmentInfo.isBodyAbsent`) rather than refused.
    /// `allOrNothing`: when any edit fails, none is written (each result says what it would
    /// have been; `isAborted` in `bulkUpdateAllOrNothing`).
    public func bulkUpdate(_ edits: [DocumentEdit], newEdits: Bool, following: [String: StagedBlob] = [:],
                           keepingAbsentBodies: Bool = false, allOrNothing: Bool = false,
                           as user: UserContext = .internalWriter) throws -> [WriteResult] {
        // Serialising bodies and hashing revisions needs no writer: a large batch spreads it
        // over the cores, and the writer applies each chunk as soon as it is ready while the
        // cores prepare the next (unless validation must first see every edit).
        let preparation = ParallelChunks(edits, chunkSize: Self.preparationChunk) { slice in
            slice.map { edit -> Result<PreparedEdit, CouchError> in
                do {
                    return .success(try self.prepare(edit, following: following, newEdits: newEdits,
                                                      keepingAbsentBodies: keepingAbsentBodies && !newEdits))
                } catch let error as CouchError {
                    return .failure(error)
                } catch {
                    return .failure(CouchError.internalError("cannot stage attachments"))
                }
            }
        }
        let checks = validatorBeforeWriting(edits).map { validator in
            validateBeforeWriting(preparation.all, with: validator, newEdits: newEdits, user: user)
        }
        let touchesDesign = edits.contains { $0.id?.isDesign == true }
        noteDesignWrite(touchesDesign)
        defer { noteDesignWrite(touchesDesign) }
        var results: [WriteResult]
        do {
            results = try writer.perform { transaction in
                var results: [WriteResult] = []
                results.reserveCapacity(edits.count)
                try preparation.forEach { prepared in
                    switch (prepared, checks?[results.count] ?? .success(.notChecked)) {
                    case (.failure(let error), _), (_, .failure(let error)): results.append(.failure(error))
                    case (.success(let edit), .success(let check)):
                        results.append(try self.inSavepoint(transaction) { protect in
                            try self.apply(edit, newEdits: newEdits, user: user, check: check, in: transaction, protect: protect)
                        })
                    }
                }
                // Thrown, the whole operation's savepoint rolls back: nothing of it is written.
                if allOrNothing, results.contains(where: { (try? $0.get()) == nil }) { throw AllOrNothingAborted(results: results) }
                return results
            }
        } catch let aborted as AllOrNothingAborted {
            finishStaging(preparation.all, results: nil, following: Array(following.values))
            throw aborted
        } catch {
            finishStaging(preparation.all, results: nil, following: Array(following.values))
            throw error
        }
        finishStaging(preparation.all, results: results, following: Array(following.values))
        return results
    }

    /// Edits a batch's writer applies as one chunk, prepared while it applies the one before.
    static let preparationChunk = 128

    /// An interactive edit whose attachments are given as stored ones (`COPY`): their bytes
    /// are shared in the blob store, not copied.
    public func update(_ edit: DocumentEdit, keeping attachmentList: [AttachmentInfo],
                       as user: UserContext = .internalWriter) throws -> RevisionID {
        let prepared = PreparedEdit(edit: edit, attachments: attachmentList.map(AttachmentInput.kept), staged: [])
        let check = try validatorBeforeWriting([edit]).map { validator in
            try validateBeforeWriting([.success(prepared)], with: validator, newEdits: true, user: user)[0].get()
        } ?? .notChecked
        noteDesignWrite(edit.id?.isDesign == true)
        defer { noteDesignWrite(edit.id?.isDesign == true) }
        return try writer.perform { transaction in
            try self.inSavepoint(transaction) { protect in
                try self.apply(prepared, newEdits: true, user: user, check: check, in: transaction, protect: protect)
            }.get()
        }
    }

    /// Adds or replaces one attachment (`PUT /db/doc/att`), keeping the rest of the revision.
    public func putAttachment(_ id: DocumentID, revision: RevisionID?, name: String, contentType: String,
                              blob: StagedBlob, as user: UserContext = .internalWriter) throws -> RevisionID {
        let build = { (connection: SQLiteConnection) throws -> PreparedEdit in
            let parent = try self.parentContent(id, revision: revision, connection: connection)
            // The new attachment first, then the others in their order, as CouchDB lists them
            // (the order is part of the revision ID).
            let inputs: [AttachmentInput] = [.blob(name: name, contentType: contentType, blob: blob, encoding: blob.encoding,
                                                   length: blob.given?.length ?? blob.length, revpos: nil)]
                + parent.attachments.filter { $0.name != name }.map(AttachmentInput.kept)
            return PreparedEdit(edit: DocumentEdit(id: id, revision: revision, body: parent.body), attachments: inputs, staged: [])
        }
        let result: RevisionID
        do {
            result = try writeAttachmentEdit(id, build: build, user: user)
        } catch {
            attachments.release([blob], committed: false)
            if blob.isNew { removeIfUnreferenced([blob]) }
            throw error
        }
        attachments.release([blob], committed: true)
        return result
    }

    /// Removes one attachment (`DELETE /db/doc/att?rev=`).
    public func deleteAttachment(_ id: DocumentID, revision: RevisionID, name: String,
                                 as user: UserContext = .internalWriter) throws -> RevisionID {
        try writeAttachmentEdit(id, build: { connection in
            let parent = try self.parentContent(id, revision: revision, connection: connection)
            guard parent.attachments.contains(where: { $0.name == name }) else { throw CouchError.notFound("Document is missing attachment") }
            let inputs = parent.attachments.filter { $0.name != name }.map(AttachmentInput.kept)
            return PreparedEdit(edit: DocumentEdit(id: id, revision: revision, body: parent.body), attachments: inputs, staged: [])
        }, user: user)
    }

    /// An edit of one attachment, built from its parent revision: validated first against
    /// the parent as a reader sees it (a named leaf does not change), then written.
    private func writeAttachmentEdit(_ id: DocumentID, build: @escaping (SQLiteConnection) throws -> PreparedEdit,
                                     user: UserContext) throws -> RevisionID {
        var check = ValidationCheck.notChecked
        if let validator, id.isDesign || validator.validates(self), let early = try? readers.withConnection(build) {
            check = try validateBeforeWriting([.success(early)], with: validator, newEdits: true, user: user)[0].get()
        }
        noteDesignWrite(id.isDesign)
        defer { noteDesignWrite(id.isDesign) }
        return try writer.perform { transaction in
            try self.inSavepoint(transaction) { protect in
                try self.apply(try build(transaction.connection), newEdits: true, user: user, check: check,
                               in: transaction, protect: protect)
            }.get()
        }
    }

    /// Runs one document's edit, whose writes are all undone if it fails: an edit of several
    /// statements opens a savepoint before its first (`protect`); a new document's single
    /// `INSERT` undoes itself, without the two statements of a savepoint (half of the statements
    /// a new document runs). Throws when the transaction itself is gone (SQLite rolls it back on
    /// a full disk or an I/O error), so that no later edit runs outside it, committed on its own.
    private func inSavepoint(_ transaction: WriteTransaction,
                             _ body: (_ protect: () throws -> Void) throws -> RevisionID) throws -> WriteResult {
        let saved = transaction.state
        var isProtected = false
        func protect() throws {
            guard !isProtected else { return }
            try transaction.connection.run("SAVEPOINT document")
            isProtected = true
        }
        do {
            let revision = try body(protect)
            if isProtected { try transaction.connection.run("RELEASE document") }
            return .success(revision)
        } catch {
            transaction.state = saved
            if isProtected {
                try? transaction.connection.run("ROLLBACK TO document")
                try? transaction.connection.run("RELEASE document")
            }
            if transaction.connection.isAutocommit { throw error }
            return .failure(error as? CouchError ?? CouchError(.unknownError, String(describing: error)))
        }
    }

    /// The body and attachments an attachment edit starts from: the given leaf, or none
    /// for a new document.
    private func parentContent(_ id: DocumentID, revision: RevisionID?,
                               connection: SQLiteConnection) throws -> (body: JSONObject, attachments: [AttachmentInfo]) {
        guard let revision else { return (JSONObject(), []) }
        // A revision the document does not have is CouchDB's 409 `not_found` `missing_rev`.
        guard let record = try Self.record(id, connection: connection), record.tree.contains(revision) else {
            throw CouchError.missingRevision
        }
        guard record.tree.isLeaf(revision), let stored = try Self.revisionBody(record, revision, connection: connection) else {
            throw CouchError.documentConflict
        }
        guard case .object(let body) = try JSONValue.parse(stored.body) else {
            throw CouchError.internalError("stored body is not an object")
        }
        return (body, stored.attachments)
    }

    /// `protect`: called before the writes of an edit that takes more than one statement.
    private func apply(_ prepared: PreparedEdit, newEdits: Bool, user: UserContext, check: ValidationCheck,
                       in transaction: WriteTransaction, protect: () throws -> Void) throws -> RevisionID {
        let edit = prepared.edit
        guard let id = edit.id else { throw CouchError.badRequest("Document id is missing") }
        if id.isLocal { return try applyLocal(edit, id: id, bodyBytes: prepared.bodyBytes, in: transaction) }
        if let revision = try insertIfNew(prepared, id: id, newEdits: newEdits, in: transaction) { return revision }
        let connection = transaction.connection
        var existing: (key: Int, tree: RevisionTree, winner: RevisionID, body: [UInt8], attachments: [UInt8], isDeleted: Bool)?
        try connection.query(
            "SELECT doc_key, revision_tree, winning_rev, body, attachments, deleted FROM documents WHERE doc_id = ?",
            [.text(id.rawValue)]
        ) { row in
            existing = (row.int(0), try decodeTree(row.blob(1)), try parseRevision(row, column: 2), row.blob(3), row.blob(4),
                        row.int(5) != 0)
        }
        var tree = existing?.tree ?? RevisionTree()
        let record = existing.map { DocumentRecord(id: id, sequence: 0, tree: $0.tree, winner: $0.winner, isDeleted: false) }
        let history: [RevisionID]
        let attachmentList: [AttachmentInfo]
        if newEdits {
            let parent = try parentRevision(for: edit, tree: tree)
            // A replicated revision may carry any generation: the next one must not trap.
            let (generation, overflow) = (parent?.generation ?? 0).addingReportingOverflow(1)
            guard !overflow else { throw CouchError.badRequest("Revision generation too large") }
            let candidates = parent.map { [$0] } ?? []
            attachmentList = try resolve(prepared, id: id, generation: generation, newEdits: true,
                                         ancestors: candidates, record: record, connection: connection)
            let revision = prepared.nextRevision(after: parent, attachments: attachmentList)
            if tree.contains(revision) { throw CouchError.documentConflict }
            history = [revision] + (parent.map { tree.history(of: $0) } ?? [])
        } else {
            if let recorded = edit.history {
                history = recorded.revisions
            } else if let revision = edit.revision {
                history = [revision]
            } else {
                throw CouchError.badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
            }
            if tree.contains(history[0]) { return history[0] }
            attachmentList = try resolve(prepared, id: id, generation: history[0].generation, newEdits: false,
                                         ancestors: Array(history.dropFirst()), record: record, connection: connection)
        }
        let revision = history[0]
        let body = prepared.bodyBytes
        let attachmentBytes: SQLiteValue = attachmentList.isEmpty ? .null : .blob(AttachmentInfo.encode(attachmentList))
        try checkPartition(id, newBody: body.count, oldBody: existing.map { $0.isDeleted ? 0 : $0.body.count } ?? 0,
                           isDeletion: edit.isDeleted, newEdits: newEdits, connection: connection)
        switch tree.merge(history: history, isDeleted: edit.isDeleted, hasBody: true) {
        case .alreadyKnown:
            return revision
        case .newLeaf, .newBranch:
            break
        }
        try validateInWriter(prepared, newEdits: newEdits, user: user, check: check, tree: existing?.tree ?? RevisionTree(),
                             in: transaction)
        let removed = tree.stem(limit: revsLimit)
        guard let winner = tree.winner else { throw CouchError.internalError("revision tree has no leaf") }
        let sequence = transaction.nextSequence()

        guard let existing else {
            transaction.state.counts.count(winner.isDeleted, by: 1)
            transaction.state.counts.externalSize += winner.isDeleted ? 0 : body.count
            try connection.run(
                "INSERT INTO documents (doc_id, sequence, deleted, winning_rev, body, revision_tree, attachments) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [.text(id.rawValue), .int(sequence), .int(winner.isDeleted ? 1 : 0), .text(winner.revision.description),
                 .blob(body), .blob(tree.encoded()), attachmentBytes])
            return revision
        }
        try protect()
        // The winner's body lives in the row; every other stored body in revision_bodies.
        var winnerBody: SQLiteValue = .blob(existing.body)
        var winnerAttachments: SQLiteValue = existing.attachments.isEmpty ? .null : .blob(existing.attachments)
        if winner.revision != existing.winner {
            if tree.contains(existing.winner) {
                try connection.run("INSERT OR REPLACE INTO revision_bodies (doc_key, rev_id, body, attachments) VALUES (?, ?, ?, ?)",
                                   [.int(existing.key), .text(existing.winner.description), winnerBody, winnerAttachments])
            }
            if winner.revision == revision {
                winnerBody = .blob(body)
                winnerAttachments = attachmentBytes
            } else {
                winnerBody = .blob(Array("{}".utf8))
                winnerAttachments = .null
                try connection.query("SELECT body, attachments FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                                     [.int(existing.key), .text(winner.revision.description)]) { row in
                    winnerBody = .blob(row.blob(0))
                    winnerAttachments = row.isNull(1) ? .null : .blob(row.blob(1))
                }
            }
            try connection.run("DELETE FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                               [.int(existing.key), .text(winner.revision.description)])
        }
        if winner.revision != revision {
            try connection.run("INSERT OR REPLACE INTO revision_bodies (doc_key, rev_id, body, attachments) VALUES (?, ?, ?, ?)",
                               [.int(existing.key), .text(revision.description), .blob(body), attachmentBytes])
        }
        for stemmed in removed {
            try connection.run("DELETE FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                               [.int(existing.key), .text(stemmed.description)])
        }
        transaction.state.counts.count(existing.isDeleted, by: -1)
        transaction.state.counts.count(winner.isDeleted, by: 1)
        transaction.state.counts.externalSize += (winner.isDeleted ? 0 : winnerBody.byteCount)
            - (existing.isDeleted ? 0 : existing.body.count)
        try connection.run(
            "UPDATE documents SET sequence = ?, deleted = ?, winning_rev = ?, body = ?, revision_tree = ?, attachments = ? WHERE doc_key = ?",
            [.int(sequence), .int(winner.isDeleted ? 1 : 0), .text(winner.revision.description),
             winnerBody, .blob(tree.encoded()), winnerAttachments, .int(existing.key)])
        return revision
    }

    /// The write of a document that is not there yet, in its one statement, without first
    /// looking it up (a bulk load's every document, a replicated first revision): nil, with
    /// nothing written, when the document exists or the edit needs more than an insert
    /// (attachments, a parent revision, a partition's limit, a validation function), which
    /// `apply` then writes as any other. A replicated revision of a later generation most often
    /// updates a document the target has, and is looked up first.
    private func insertIfNew(_ prepared: PreparedEdit, id: DocumentID, newEdits: Bool,
                             in transaction: WriteTransaction) throws -> RevisionID? {
        let edit = prepared.edit
        guard prepared.attachments.isEmpty, !isPartitioned else { return nil }
        let revision: RevisionID
        if newEdits {
            guard edit.revision == nil else { return nil }
            revision = prepared.nextRevision(after: nil, attachments: [])
        } else {
            guard let history = edit.history?.revisions ?? edit.revision.map({ [$0] }), history.count == 1,
                  history[0].generation == 1 else { return nil }
            revision = history[0]
        }
        guard !validates(id, in: transaction) else { return nil }
        let body = prepared.bodyBytes
        var tree = RevisionTree()
        _ = tree.merge(history: [revision], isDeleted: edit.isDeleted, hasBody: true)
        let connection = transaction.connection
        try connection.run("""
            INSERT INTO documents (doc_id, sequence, deleted, winning_rev, body, revision_tree, attachments)
            VALUES (?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (doc_id) DO NOTHING
            """, [.text(id.rawValue), .int(transaction.sequence + 1), .int(edit.isDeleted ? 1 : 0),
                  .text(revision.description), .blob(body), .blob(tree.encoded())])
        guard connection.changes == 1 else { return nil }
        _ = transaction.nextSequence()
        transaction.state.counts.count(edit.isDeleted, by: 1)
        transaction.state.counts.externalSize += edit.isDeleted ? 0 : body.count
        return revision
    }

    /// Whether the writer runs validation functions on an edit of `id`: design documents'
    /// checks whenever there is a validator; other documents' when the database has
    /// functions that check them, asked once a transaction (the answer comes from the
    /// committed design documents).
    private func validates(_ id: DocumentID, in transaction: WriteTransaction) -> Bool {
        guard let validator else { return false }
        if id.isDesign { return true }
        let validates = transaction.validatesDocuments ?? validator.validates(self)
        transaction.validatesDocuments = validates
        return validates
    }

    /// Validates edits against the documents as a reader sees them, outside the writer, so
    /// that a slow function holds no other write back. Per edit: the check made, or the
    /// error that refuses it.
    private func validateBeforeWriting(_ prepared: [Result<PreparedEdit, CouchError>], with validator: DocumentValidator,
                                       newEdits: Bool, user: UserContext) -> [Result<ValidationCheck, CouchError>] {
        let active = validator.validates(self)
        // Read what every edit is validated against, then validate them together.
        var results = prepared.map { _ in Result<ValidationCheck, CouchError>.success(.notChecked) }
        var proposals: [(index: Int, write: ProposedWrite, oldRevision: RevisionID?)] = []
        let read: Void? = try? readers.withConnection { connection in
            for (index, preparation) in prepared.enumerated() {
                guard case .success(let edit) = preparation, active || edit.edit.id?.isDesign == true else { continue }
                do {
                    if let proposal = try self.proposedWrite(edit, newEdits: newEdits, user: user, connection: connection) {
                        proposals.append((index, proposal.write, proposal.oldRevision))
                    }
                } catch {
                    // Left to the writer, which meets the same error or checks again.
                }
            }
        }
        guard read != nil, !proposals.isEmpty else { return results }
        let errors = validator.validate(proposals.map(\.write), in: self)
        for (position, proposal) in proposals.enumerated() {
            if position < errors.count, let error = errors[position] {
                results[proposal.index] = .failure(error)
            } else {
                results[proposal.index] = .success(.checked(oldRevision: proposal.oldRevision))
            }
        }
        return results
    }

    /// The validator, when any of `edits` is validated before the writer (design documents
    /// always are: their functions must compile).
    private func validatorBeforeWriting(_ edits: [DocumentEdit]) -> DocumentValidator? {
        guard let validator, validator.validates(self) || edits.contains(where: { $0.id?.isDesign == true }) else { return nil }
        return validator
    }

    /// Inside the writer: validates an edit not checked before, or whose old revision is no
    /// longer the one it was checked against.
    private func validateInWriter(_ prepared: PreparedEdit, newEdits: Bool, user: UserContext, check: ValidationCheck,
                                  tree: RevisionTree, in transaction: WriteTransaction) throws {
        guard let validator, let id = prepared.edit.id, validates(id, in: transaction) else { return }
        let connection = transaction.connection
        if case .checked(let checkedRevision) = check,
           let current = try oldRevision(of: prepared.edit, newEdits: newEdits, tree: tree),
           current.revision == checkedRevision {
            return
        }
        guard let proposal = try proposedWrite(prepared, newEdits: newEdits, user: user, connection: connection) else { return }
        try validator.validate(proposal.write, in: self)
    }

    func interactiveParent(for edit: DocumentEdit, tree: RevisionTree) throws(CouchError) -> RevisionID? {
        try parentRevision(for: edit, tree: tree)
    }

    /// The leaf an interactive edit replaces, after CouchDB's rules: a new document has
    /// none; a deleted document may be recreated without `_rev`; otherwise `_rev` must be a leaf.
    private func parentRevision(for edit: DocumentEdit, tree: RevisionTree) throws(CouchError) -> RevisionID? {
        guard let winner = tree.winner else {
            if edit.revision != nil { throw CouchError.documentConflict }
            return nil
        }
        guard let revision = edit.revision else {
            if winner.isDeleted { return winner.revision }
            throw CouchError.documentConflict
        }
        guard tree.isLeaf(revision) else { throw CouchError.documentConflict }
        return revision
    }

    private func applyLocal(_ edit: DocumentEdit, id: DocumentID, bodyBytes: [UInt8], in transaction: WriteTransaction) throws -> RevisionID {
        let connection = transaction.connection
        let current = try connection.scalarInt("SELECT revision FROM local_documents WHERE doc_id = ?", [.text(id.rawValue)])
        if let current {
            guard let given = edit.revisionField, given.generation == 0, Int(given.digest) == current else {
                throw CouchError.documentConflict
            }
        } else if edit.isDeleted {
            throw CouchError.notFound("missing")
        } else if let given = edit.revisionField, !(given.generation == 0 && given.digest == "0") {
            throw CouchError.documentConflict
        }
        if edit.isDeleted {
            try connection.run("DELETE FROM local_documents WHERE doc_id = ?", [.text(id.rawValue)])
            return RevisionID(generation: 0, digest: "0")
        }
        let next = (current ?? 0) + 1
        try connection.run("INSERT OR REPLACE INTO local_documents (doc_id, revision, body) VALUES (?, ?, ?)",
                           [.text(id.rawValue), .int(next), .blob(bodyBytes)])
        return RevisionID(generation: 0, digest: String(next))
    }
}

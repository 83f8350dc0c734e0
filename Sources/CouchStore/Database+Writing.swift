import CouchCore

/// The result of one document in a write: its new (or, for a replicated revision
/// already stored, existing) revision, or the error that stopped it.
public typealias WriteResult = Result<RevisionID, CouchError>

extension Database {
    /// An interactive edit (`new_edits=true`): the edit must name the current leaf it replaces.
    public func update(_ edit: DocumentEdit) throws -> RevisionID {
        try bulkUpdate([edit], newEdits: true)[0].get()
    }

    /// Writes replicated revisions (`new_edits=false`) or interactive edits, sharing
    /// one commit; each document succeeds or fails on its own.
    public func bulkUpdate(_ edits: [DocumentEdit], newEdits: Bool) throws -> [WriteResult] {
        try writer.perform { transaction in
            edits.map { edit -> WriteResult in
                do {
                    try transaction.connection.execute("SAVEPOINT document")
                    let saved = transaction.sequence
                    do {
                        let revision = try self.apply(edit, newEdits: newEdits, in: transaction)
                        try transaction.connection.execute("RELEASE document")
                        return .success(revision)
                    } catch {
                        transaction.sequence = saved
                        try? transaction.connection.execute("ROLLBACK TO document")
                        try? transaction.connection.execute("RELEASE document")
                        throw error
                    }
                } catch let error as CouchError {
                    return .failure(error)
                } catch {
                    return .failure(CouchError(.unknownError, String(describing: error)))
                }
            }
        }
    }

    private func apply(_ edit: DocumentEdit, newEdits: Bool, in transaction: WriteTransaction) throws -> RevisionID {
        guard let id = edit.id else { throw CouchError.badRequest("Document id is missing") }
        if let attachments = edit.attachments, !attachments.isEmpty {
            throw CouchError(.notImplemented, "Attachments are not supported yet")
        }
        if id.isLocal { return try applyLocal(edit, id: id, in: transaction) }
        let connection = transaction.connection
        var existing: (key: Int, tree: RevisionTree, winner: RevisionID, body: [UInt8])?
        try connection.query(
            "SELECT doc_key, revision_tree, winning_rev, body FROM documents WHERE doc_id = ?", [.text(id.rawValue)]
        ) { row in
            existing = (row.int(0), try decodeTree(row.blob(1)), try parseRevision(row.text(2)), row.blob(3))
        }
        var tree = existing?.tree ?? RevisionTree()
        let history: [RevisionID]
        if newEdits {
            let parent = try parentRevision(for: edit, tree: tree)
            let revision = edit.nextRevision(after: parent)
            if tree.contains(revision) { throw CouchError.documentConflict }
            history = [revision] + (parent.map { tree.history(of: $0) } ?? [])
        } else {
            if let recorded = edit.history {
                history = recorded.revisions
            } else if let revision = edit.revision {
                history = [revision]
            } else {
                throw CouchError.badRequest("new_edits=false requires _rev or _revisions")
            }
            if let revision = edit.revision, revision != history[0] {
                throw CouchError.badRequest("_rev does not match _revisions")
            }
        }
        let revision = history[0]
        let body = edit.bodyBytes
        switch tree.merge(history: history, isDeleted: edit.isDeleted, hasBody: true) {
        case .alreadyKnown:
            return revision
        case .newLeaf, .newBranch:
            break
        }
        if let validator {
            try validator(ProposedRevision(documentID: id, revision: revision, isDeleted: edit.isDeleted,
                                           body: body, isReplicated: !newEdits))
        }
        let removed = tree.stem(limit: revsLimit)
        guard let winner = tree.winner else { throw CouchError.internalError("revision tree has no leaf") }
        let sequence = transaction.nextSequence()

        guard let existing else {
            try connection.run(
                "INSERT INTO documents (doc_id, sequence, deleted, winning_rev, body, revision_tree) VALUES (?, ?, ?, ?, ?, ?)",
                [.text(id.rawValue), .int(sequence), .int(winner.isDeleted ? 1 : 0), .text(winner.revision.description),
                 .blob(body), .blob(tree.encoded())])
            return revision
        }
        // The winner's body lives in the row; every other stored body in revision_bodies.
        var winnerBody = existing.body
        if winner.revision != existing.winner {
            if tree.contains(existing.winner) {
                try connection.run("INSERT OR REPLACE INTO revision_bodies (doc_key, rev_id, body) VALUES (?, ?, ?)",
                                   [.int(existing.key), .text(existing.winner.description), .blob(existing.body)])
            }
            if winner.revision == revision {
                winnerBody = body
            } else {
                var found: [UInt8]?
                try connection.query("SELECT body FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                                     [.int(existing.key), .text(winner.revision.description)]) { found = $0.blob(0) }
                winnerBody = found ?? Array("{}".utf8)
            }
            try connection.run("DELETE FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                               [.int(existing.key), .text(winner.revision.description)])
        }
        if winner.revision != revision {
            try connection.run("INSERT OR REPLACE INTO revision_bodies (doc_key, rev_id, body) VALUES (?, ?, ?)",
                               [.int(existing.key), .text(revision.description), .blob(body)])
        }
        for stemmed in removed {
            try connection.run("DELETE FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                               [.int(existing.key), .text(stemmed.description)])
        }
        try connection.run(
            "UPDATE documents SET sequence = ?, deleted = ?, winning_rev = ?, body = ?, revision_tree = ? WHERE doc_key = ?",
            [.int(sequence), .int(winner.isDeleted ? 1 : 0), .text(winner.revision.description),
             .blob(winnerBody), .blob(tree.encoded()), .int(existing.key)])
        return revision
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

    private func applyLocal(_ edit: DocumentEdit, id: DocumentID, in transaction: WriteTransaction) throws -> RevisionID {
        let connection = transaction.connection
        let current = try connection.scalarInt("SELECT revision FROM local_documents WHERE doc_id = ?", [.text(id.rawValue)])
        if let current {
            guard let given = edit.revision, given.generation == 0, Int(given.digest) == current else {
                throw CouchError.documentConflict
            }
        } else if edit.isDeleted {
            throw CouchError.notFound("missing")
        } else if let given = edit.revision, !(given.generation == 0 && given.digest == "0") {
            throw CouchError.documentConflict
        }
        if edit.isDeleted {
            try connection.run("DELETE FROM local_documents WHERE doc_id = ?", [.text(id.rawValue)])
            return RevisionID(generation: 0, digest: "0")
        }
        let next = (current ?? 0) + 1
        try connection.run("INSERT OR REPLACE INTO local_documents (doc_id, revision, body) VALUES (?, ?, ?)",
                           [.text(id.rawValue), .int(next), .blob(edit.bodyBytes)])
        return RevisionID(generation: 0, digest: String(next))
    }
}

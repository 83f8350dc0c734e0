import CouchCore

/// What a write checked before it entered the writer: the old revision it validated
/// against. Inside, the check is made again only if the document moved meanwhile.
enum ValidationCheck {
    case notChecked
    case checked(oldRevision: RevisionID?)
}

extension Database {
    /// The validation input of an edit against the document as `connection` sees it, and
    /// the old revision it names; nil when the edit writes nothing new (a known revision)
    /// or cannot apply (it will fail with its own error).
    func proposedWrite(_ prepared: PreparedEdit, newEdits: Bool, user: UserContext,
                       connection: SQLiteConnection) throws -> (write: ProposedWrite, oldRevision: RevisionID?)? {
        let edit = prepared.edit
        guard let id = edit.id, !id.isLocal else { return nil }
        let record = try Self.record(id, connection: connection)
        let tree = record?.tree ?? RevisionTree()
        guard let old = try oldRevision(of: edit, newEdits: newEdits, tree: tree) else { return nil }
        var document: JSONObject = ["_id": JSONValue(id.rawValue)]
        if newEdits {
            if let parent = old.revision { document["_rev"] = JSONValue(parent.description) }
        } else if let history = Self.history(of: edit) {
            document["_rev"] = JSONValue(history[0].description)
            document["_revisions"] = RevisionHistory(history).json
        }
        for (key, value) in edit.body { document[key] = value }
        if edit.isDeleted { document["_deleted"] = true }
        let stubs = Self.attachmentStubs(prepared.attachments)
        if !stubs.isEmpty { document["_attachments"] = .object(stubs) }
        var oldDocument: JSONObject?
        if let record {
            for candidate in old.bodyCandidates {
                guard let stored = try Self.revisionBody(record, candidate, connection: connection) else { continue }
                var previous: JSONObject = ["_id": JSONValue(id.rawValue), "_rev": JSONValue(candidate.description)]
                if case .object(let members) = try JSONValue.parse(stored.body) {
                    for (key, value) in members { previous[key] = value }
                }
                if stored.isDeleted { previous["_deleted"] = true }
                let oldStubs = Self.attachmentStubs(stored.attachments.map(AttachmentInput.kept))
                if !oldStubs.isEmpty { previous["_attachments"] = .object(oldStubs) }
                oldDocument = previous
                break
            }
        }
        let write = ProposedWrite(documentID: id, newDocument: document, oldDocument: oldDocument, user: user,
                                  isReplicated: !newEdits)
        return (write, old.revision)
    }

    /// The revision an edit's validation compares against: an interactive edit's parent, or
    /// the first ancestor of a replicated revision the tree holds (then the next ones, should
    /// its body be gone). nil when the edit writes nothing new or cannot apply.
    func oldRevision(of edit: DocumentEdit, newEdits: Bool,
                     tree: RevisionTree) throws -> (revision: RevisionID?, bodyCandidates: [RevisionID])? {
        if newEdits {
            let parent: RevisionID?
            do { parent = try interactiveParent(for: edit, tree: tree) } catch { return nil }
            return (parent, parent.map { [$0] } ?? [])
        }
        guard let history = Self.history(of: edit), !tree.contains(history[0]) else { return nil }
        let known = history.dropFirst().filter { tree.contains($0) }
        return (known.first, Array(known))
    }

    static func history(of edit: DocumentEdit) -> [RevisionID]? {
        if let recorded = edit.history, !recorded.revisions.isEmpty { return recorded.revisions }
        return edit.revision.map { [$0] }
    }

    /// `_attachments` as a validation function sees them: stubs with what is known.
    static func attachmentStubs(_ inputs: [AttachmentInput]) -> JSONObject {
        var stubs = JSONObject()
        for input in inputs {
            switch input {
            case .kept(let info):
                stubs[info.name] = .object(["content_type": JSONValue(info.contentType), "revpos": JSONValue(info.revpos),
                                            "digest": JSONValue(info.digest), "length": JSONValue(info.length),
                                            "stub": true])
            case .blob(let name, let contentType, let blob, _, let length, _):
                stubs[name] = .object(["content_type": JSONValue(contentType), "digest": JSONValue(blob.digest),
                                       "length": JSONValue(length), "stub": true])
            case .stub(let name, let revpos, let digest, _):
                var stub: JSONObject = ["stub": true]
                if let revpos { stub["revpos"] = JSONValue(revpos) }
                if let digest { stub["digest"] = JSONValue(digest) }
                stubs[name] = .object(stub)
            }
        }
        return stubs
    }
}

import CouchCore
import CouchReplication
import CouchStore

/// What one reader may see of a database's documents: CouchDB's `after_doc_read` of its
/// system databases. In `_users` (`couch_users_db`) a non-admin reads only their own user
/// document; in a replicator database (`couch_replicator_docs`) a reader who is neither an
/// admin, nor the document's `owner`, nor the replicator (`_replicator` role) gets the
/// document without credentials (`ReplicationDocument.strippingCredentials`).
///
/// The rule is applied where documents leave, not per route: `DocumentJSON.render` writes
/// every document an answer carries and requires its options' rule (document reads,
/// `open_revs`, `_bulk_get`, `_all_docs`/`_design_docs` and `_changes` with bodies, views'
/// `include_docs`, `_find`, the documents show and update functions get, multipart forms);
/// `_changes` filters and `_find` selectors see the documents as rendered, so no selector can
/// probe what is hidden. Only the replicator itself reads the store as it is.
enum DocumentReadRule: Sendable {
    /// Every document as stored.
    case whole
    /// `_users` for a non-admin: their own document only, no design document.
    case ownUserDocument(UserContext)
    /// A replicator database for a reader who is not its admin nor the replicator: others'
    /// documents without their credentials.
    case credentialsHidden(reader: String?)

    init(database: DatabaseName, isUsersDatabase: Bool, user: UserContext, isAdmin: Bool) {
        if isAdmin || user.isServerAdmin {
            self = .whole
        } else if isUsersDatabase {
            self = .ownUserDocument(user)
        } else if database.isReplicator, !user.roles.contains("_replicator") {
            self = .credentialsHidden(reader: user.name)
        } else {
            self = .whole
        }
    }

    /// Whether some documents are hidden, whole or in part: then nothing derived from every
    /// stored document (index keys, counts of rows read) may be shown to this reader.
    var isRestricted: Bool {
        if case .whole = self { return false }
        return true
    }

    /// The revision as this reader may see it; CouchDB's error when it may not see it at all.
    func readable(_ revision: StoredRevision) throws(CouchError) -> StoredRevision {
        switch self {
        case .whole:
            return revision
        case .ownUserDocument(let user):
            try UsersDatabase.checkRead(revision.id, user: user, isAdmin: false)
            return revision
        case .credentialsHidden(let reader):
            guard !revision.id.isDesign, !revision.id.isLocal, !revision.body.isEmpty else { return revision }
            guard let body = (try? JSONValue.parse(revision.body))?.objectValue else {
                // Stored bodies are objects; one that is not cannot be vouched for.
                throw CouchError.internalError("stored body is not an object")
            }
            if let owner = body["owner"]?.stringValue, owner == reader { return revision }
            let hidden = ReplicationDocument.strippingCredentials(body)
            guard hidden != body else { return revision }
            return StoredRevision(id: revision.id, revision: revision.revision, isDeleted: revision.isDeleted,
                                  body: JSONValue.object(hidden).serialized(), attachments: revision.attachments)
        }
    }

    /// A change row as this reader may see it (its body, when it carries one), or nil when
    /// the reader may not see the document at all.
    func readable(_ row: ChangeRow) -> ChangeRow? {
        guard isRestricted else { return row }
        let revision = StoredRevision(id: row.id, revision: row.winner, isDeleted: row.isDeleted, body: row.body ?? [],
                                      attachments: row.attachments)
        guard let shown = try? readable(revision) else { return nil }
        return row.body == nil ? row : row.replacingBody(shown.body)
    }
}

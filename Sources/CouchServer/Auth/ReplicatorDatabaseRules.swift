import CouchCore
import CouchReplication
import CouchStore

/// The rules of replicator databases (`_replicator`, `*/_replicator`) for their users, as
/// CouchDB applies them: each written replication document is validated (403 with
/// CouchDB's reasons) and gets its writer as `owner`; a reader who is neither an admin
/// nor the owner sees its endpoints without credentials. The replicator's own writes of
/// `_replication_state` go to the store directly and pass none of these.
enum ReplicatorDatabaseRules {
    static func prepare(_ edit: DocumentEdit, id: DocumentID, parent: JSONObject?, user: UserContext,
                        isAdmin: Bool) throws(CouchError) -> DocumentEdit {
        guard !id.isDesign, !id.isLocal else { return edit }
        try ReplicationDocument.validate(edit.body, isDeleted: edit.isDeleted, old: parent, userName: user.name,
                                         roles: user.roles, isAdmin: isAdmin)
        guard !edit.isDeleted else { return edit }
        var prepared = edit
        prepared.body = try ReplicationDocument.settingOwner(edit.body, userName: user.name, isAdmin: isAdmin)
        return prepared
    }

    /// The revision as this reader may see it.
    static func readable(_ revision: StoredRevision, user: UserContext, isAdmin: Bool) -> StoredRevision {
        guard !isAdmin, !revision.id.isDesign,
              let body = (try? JSONValue.parse(revision.body))?.objectValue else { return revision }
        if let owner = body["owner"]?.stringValue, owner == user.name { return revision }
        return StoredRevision(id: revision.id, revision: revision.revision, isDeleted: revision.isDeleted,
                              body: JSONValue.object(ReplicationDocument.strippingCredentials(body)).serialized(),
                              attachments: revision.attachments)
    }
}

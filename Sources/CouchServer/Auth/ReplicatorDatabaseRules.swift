import CouchCore
import CouchReplication
import CouchStore

/// The rules of replicator databases (`_replicator`, `*/_replicator`) for their users, as
/// CouchDB applies them to writes: each written replication document is validated (403 with
/// CouchDB's reasons) and gets its writer as `owner`. (What readers see: `DocumentReadRule`.)
/// The replicator's own writes of `_replication_state` go to the store directly and pass
/// none of these.
enum ReplicatorDatabaseRules {
    static func prepare(_ edit: DocumentEdit, id: DocumentID, parent: JSONObject?, user: UserContext,
                        isAdmin: Bool) throws(CouchError) -> DocumentEdit {
        guard !id.isDesign, !id.isLocal else { return edit }
        let body = edit.body  // parsed once when the edit came as bytes
        try ReplicationDocument.validate(body, isDeleted: edit.isDeleted, old: parent, userName: user.name,
                                         roles: user.roles, isAdmin: isAdmin)
        guard !edit.isDeleted else { return edit }
        var prepared = edit
        prepared.body = try ReplicationDocument.settingOwner(body, userName: user.name, isAdmin: isAdmin)
        return prepared
    }
}

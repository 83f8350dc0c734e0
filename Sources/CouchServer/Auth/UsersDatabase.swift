import CouchCore
import CouchStore

/// The `_users` database's rules, after CouchDB's `couch_users_db` (who may read and
/// write which user document, and the hashing of `password`) and its `_design/_auth`
/// validation function (the shape of a user document).
///
/// Why here and not in the store's `Database.validator`: these rules depend on who asks
/// (a user may only touch their own document and not its roles) and on the revision being
/// replaced, which the store's validator does not see; and the password must be hashed
/// before the store derives the revision ID from the body, which a validator (that only
/// accepts or refuses) cannot do. So every document write passes `AuthorizationPolicy`'s
/// write check (`RouteContext.authorizedEdit`), which calls `prepare` below for `_users`.
enum UsersDatabase {
    static let name = try! DatabaseName("_users")
    static let documentPrefix = "org.couchdb.user:"
    /// What a stored password consists of; set by the server from `password`.
    static let credentialMembers = ["password_scheme", "pbkdf2_prf", "derived_key", "salt", "iterations", "password_sha"]

    static func documentID(for user: String) -> DocumentID { DocumentID(documentPrefix + user) }

    /// The user a document ID names (`org.couchdb.user:NAME`), or nil.
    static func userName(of id: DocumentID) -> String? {
        guard id.rawValue.hasPrefix(documentPrefix) else { return nil }
        return String(id.rawValue.dropFirst(documentPrefix.count))
    }

    /// Reading a document: admins read all; others only their own, and no design document.
    static func checkRead(_ id: DocumentID, user: UserContext, isAdmin: Bool) throws(CouchError) {
        if isAdmin { return }
        if id.isDesign {
            throw CouchError(.forbidden, "Only administrators can view design docs in the users database.")
        }
        guard let owner = userName(of: id), owner == user.name else { throw CouchError.notFound("missing") }
    }

    /// Writing a document by ID (CouchDB's `before_doc_update`): admins write all; a user
    /// their own; anonymous users may only sign up (create), which `validate` decides.
    static func checkWrite(_ id: DocumentID, user: UserContext, isAdmin: Bool) throws(CouchError) {
        if isAdmin || user.name == nil { return }
        guard userName(of: id) == user.name else { throw CouchError.notFound("missing") }
    }

    /// The edit as it will be stored: checked, and with `password` replaced by its hash.
    static func prepare(_ edit: DocumentEdit, parent: JSONObject?, user: UserContext, isAdmin: Bool,
                        hasher: PasswordHasher) throws(CouchError) -> DocumentEdit {
        guard let id = edit.id else { return edit }
        try checkWrite(id, user: user, isAdmin: isAdmin)
        try validate(edit, id: id, parent: parent, user: user, isAdmin: isAdmin)
        var prepared = edit
        switch edit.body["password"] {
        case nil, .null?:
            // Only the server hashes a non-admin's password: otherwise a sign-up could carry
            // a hash of a billion iterations that every login attempt would then pay.
            if !isAdmin && !edit.isDeleted {
                for key in credentialMembers where edit.body[key] != parent?[key] {
                    throw CouchError(.forbidden, "Only admins may set `\(key)`; send `password` instead.")
                }
            }
        case .string(let password)?:
            prepared.body.removeValue(forKey: "password")
            for (key, value) in hasher.hash(password).userDocumentMembers { prepared.body[key] = value }
        case _?:
            throw CouchError(.forbidden, "Password value is invalid.")
        }
        return prepared
    }

    /// CouchDB's `_design/_auth` `validate_doc_update`, rule by rule, with its messages.
    static func validate(_ edit: DocumentEdit, id: DocumentID, parent: JSONObject?, user: UserContext,
                         isAdmin: Bool) throws(CouchError) {
        func refuse(_ reason: String) -> CouchError { CouchError(.forbidden, reason) }
        let body = edit.body
        if edit.isDeleted {
            if isAdmin || (user.name != nil && parent?["name"]?.stringValue == user.name) { return }
            throw refuse("Only admins may delete other user docs.")
        }
        if let parent, parent["type"]?.stringValue != "user" { throw refuse("doc.type must be user") }
        guard body["type"]?.stringValue == "user" else { throw refuse("doc.type must be user") }
        guard let name = body["name"]?.stringValue, !name.isEmpty else { throw refuse("doc.name is required") }
        guard let rolesValue = body["roles"], let roleList = rolesValue.arrayValue else {
            throw refuse("doc.roles must be an array")
        }
        guard id.rawValue == documentPrefix + name else {
            throw refuse("Doc ID must be of the form org.couchdb.user:name")
        }
        if let parent, parent["name"]?.stringValue != name { throw refuse("Usernames can not be changed.") }
        if body["password_sha"] != nil, body["salt"] == nil {
            throw refuse("Users with password_sha must have a salt.See /_utils/script/couch.js for example code.")
        }
        let roles = roleList.compactMap(\.stringValue)
        guard roles.count == roleList.count else { throw refuse("doc.roles must be an array") }
        if !isAdmin {
            if let parent {
                guard user.name == name else { throw refuse("You may only update your own user document.") }
                let parentRoles = parent["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
                guard parentRoles.sorted() == roles.sorted() else { throw refuse("Only _admin may edit roles") }
            } else if !roles.isEmpty {
                throw refuse("Only _admin may set roles")
            }
        }
        if roles.contains(where: { $0.hasPrefix("_") }) {
            throw refuse("No system roles (starting with underscore) in users db.")
        }
        if name.hasPrefix("_") { throw refuse("Username may not start with underscore.") }
        if name.contains(":") { throw refuse("Character `:` is not allowed in usernames.") }
    }
}

extension UsersDatabase {
    static let authDesignDocument = DocumentID("_design/_auth")

    /// CouchDB creates `_users/_design/_auth` with the database, and clients wait for it to
    /// know the database is ready. Couchette enforces the user-document rules natively
    /// (`prepare`, `validate`), so its validation function accepts everything itself.
    static func installAuthDesignDocument(in database: Database) {
        do {
            guard try database.record(authDesignDocument) == nil else { return }
        } catch {
            return
        }
        let body: JSONObject = [
            "language": "javascript",
            "validate_doc_update": "function(newDoc, oldDoc, userCtx, secObj) {\n  // Checked by Couchette itself: document shape, names, roles and who may write.\n}",
        ]
        _ = try? database.update(DocumentEdit(id: authDesignDocument, body: body))
    }
}

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
    /// `[chttpd_auth] authentication_db` unless set otherwise.
    static let defaultName = try! DatabaseName("_users")
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

    /// The edit as it will be stored (CouchDB's `before_doc_update`, then `_design/_auth`'s
    /// validation): checked, and with `password`, when it follows `rules`, replaced by its hash,
    /// the hash's members first as CouchDB writes them. `preserve_salt: true` keeps the
    /// document's salt (a hash upgrade: the user's sessions stay valid).
    static func prepare(_ edit: DocumentEdit, parent: JSONObject?, user: UserContext, isAdmin: Bool,
                        hasher: PasswordHasher, rules: PasswordRules,
                        withAuthDesignDocument: Bool = true) throws(CouchError) -> DocumentEdit {
        guard let id = edit.id else { return edit }
        try checkWrite(id, user: user, isAdmin: isAdmin)
        var prepared = edit
        let sent = edit.body  // parsed once when the edit came as bytes
        switch sent["password"] {
        case nil, .null?:
            break
        case .string(let password)?:
            try rules.check(password)
            let salt = sent["preserve_salt"] == true ? sent["salt"]?.stringValue : nil
            var body = JSONObject()
            for (key, value) in hasher.hash(password, salt: salt).userDocumentMembers { body[key] = value }
            for (key, value) in sent where !passwordMembers.contains(key) { body[key] = value }
            prepared.body = body
        case _?:
            throw CouchError(.forbidden, "Password value is invalid.")
        }
        try validate(prepared, id: id, parent: parent, user: user, isAdmin: isAdmin,
                     withAuthDesignDocument: withAuthDesignDocument)
        // Only the server hashes a non-admin's password: otherwise a sign-up could carry a hash
        // of a billion iterations that every login attempt would then pay. (Couchette's rule,
        // after CouchDB's own, so that their refusals come first.)
        if sent["password"] == nil || sent["password"] == .null, !isAdmin, !edit.isDeleted {
            for key in credentialMembers where sent[key] != parent?[key] {
                throw CouchError(.forbidden, "Only admins may set `\(key)`; send `password` instead.")
            }
        }
        return prepared
    }

    /// What a new password replaces (CouchDB's `remove_password_fields`).
    static let passwordMembers: Set<String> = [
        "derived_key", "iterations", "password", "password_scheme", "password_sha", "preserve_salt", "pbkdf2_prf", "salt",
    ]

    /// CouchDB's `_design/_auth` `validate_doc_update`, rule by rule in its order, with its
    /// messages. CouchDB runs that function only where the design document is: in a users
    /// database without it (a new `authentication_db`, until the server installs it) only
    /// `before_doc_update` judges, which lets a document of any shape in. Without it
    /// (`withAuthDesignDocument` false) Couchette still keeps the rules that guard privileges:
    /// who may delete, update, or give roles, and no system roles.
    static func validate(_ edit: DocumentEdit, id: DocumentID, parent: JSONObject?, user: UserContext,
                         isAdmin: Bool, withAuthDesignDocument: Bool = true) throws(CouchError) {
        func refuse(_ reason: String) -> CouchError { CouchError(.forbidden, reason) }
        /// JavaScript's truthiness, which the function's `!newDoc.x` tests use.
        func isTruthy(_ value: JSONValue?) -> Bool {
            switch value {
            case nil, .null?, .bool(false)?: false
            case .string(let text)?: !text.isEmpty
            case .number(let number)?: number.doubleValue != 0
            default: true
            }
        }
        let body = edit.body
        if edit.isDeleted {
            if isAdmin || (user.name != nil && parent?["name"]?.stringValue == user.name) { return }
            throw refuse("Only admins may delete other user docs.")
        }
        let roles = body["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let name = body["name"]?.stringValue
        if withAuthDesignDocument {
            if let parent, parent["type"]?.stringValue != "user" { throw refuse("doc.type must be user") }
            guard body["type"]?.stringValue == "user" else { throw refuse("doc.type must be user") }
            guard isTruthy(body["name"]) else { throw refuse("doc.name is required") }
            guard isTruthy(body["roles"]) else { throw refuse("doc.roles must exist") }
            guard let roleList = body["roles"]?.arrayValue else { throw refuse("doc.roles must be an array") }
            guard roles.count == roleList.count else { throw refuse("doc.roles can only contain strings") }
            guard let name, id.rawValue == documentPrefix + name else {
                throw refuse("Doc ID must be of the form org.couchdb.user:name")
            }
            if let parent, parent["name"]?.stringValue != name { throw refuse("Usernames can not be changed.") }
            if isTruthy(body["password_sha"]), !isTruthy(body["salt"]) {
                throw refuse("Users with password_sha must have a salt.See /_utils/script/couch.js for example code.")
            }
            if let scheme = body["password_scheme"], isTruthy(scheme) {
                guard let text = scheme.stringValue, text == "simple" || text == "pbkdf2" else {
                    throw refuse("Password scheme `\(scheme.stringValue ?? scheme.serializedString())` not supported.")
                }
                if text == "pbkdf2" {
                    guard case .number? = body["iterations"] else { throw refuse("iterations must be a number.") }
                    guard body["derived_key"]?.stringValue != nil else { throw refuse("derived_key must be a string.") }
                }
            }
        }
        if !isAdmin {
            if let parent {
                guard user.name == name else { throw refuse("You may only update your own user document.") }
                let parentRoles = parent["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
                guard parentRoles.sorted() == roles.sorted() else { throw refuse("Only _admin may edit roles") }
            } else if !roles.isEmpty {
                throw refuse("Only _admin may set roles")
            }
        }
        if roles.contains(where: { $0 != "_metrics" && $0.hasBytePrefix("_") }) {
            throw refuse("No system roles (starting with underscore) in users db.")
        }
        guard withAuthDesignDocument, let name else { return }
        if name.hasBytePrefix("_") { throw refuse("Username may not start with underscore.") }
        if name.contains(":") { throw refuse("Character `:` is not allowed in usernames.") }
    }
}

extension UsersDatabase {
    static let authDesignDocument = DocumentID("_design/_auth")

    /// CouchDB creates `_users/_design/_auth` with the database, and clients wait for it to
    /// know the database is ready. Couchette enforces the user-document rules natively
    /// (`prepare`, `validate`), so its validation function accepts everything itself.
    static func installAuthDesignDocument(in database: Database) {
        guard (try? hasAuthDesignDocument(database)) == false else { return }
        let body: JSONObject = [
            "language": "javascript",
            "validate_doc_update": "function(newDoc, oldDoc, userCtx, secObj) {\n  // Checked by Couchette itself: document shape, names, roles and who may write.\n}",
        ]
        _ = try? database.update(DocumentEdit(id: authDesignDocument, body: body))
    }

    /// Whether `_design/_auth` is there (not deleted): its rules then apply (see `validate`).
    static func hasAuthDesignDocument(_ database: Database) throws -> Bool {
        try database.record(authDesignDocument).map { !$0.isDeleted } ?? false
    }
}

import CouchCore
import CouchStore
import Foundation
import Logging

/// CouchDB's `couch_password_hasher` with `[chttpd_auth] upgrade_hash_on_auth = true`: when
/// a user logs in with a password whose stored hash is not what the server now makes (another
/// scheme, PRF or iteration count), the user document is rewritten in the background with the
/// password hashed anew, keeping its salt (so that its sessions stay valid). One upgrade per
/// user at a time; a write that loses to another edit is left alone, as CouchDB's is.
enum PasswordUpgrade {
    private static let inProgress = Locked<Set<String>>([])
    private static let logger = Logger(label: "couchette.auth")

    static func needed(_ stored: PasswordHash, hasher: PasswordHasher) -> Bool {
        switch stored.scheme {
        case .simple: true
        case .pbkdf2(let function): function != hasher.function || stored.iterations != hasher.iterations
        }
    }

    static func start(name: String, password: String, document: JSONObject, hasher: PasswordHasher,
                      database usersDatabase: DatabaseName, databases: DatabaseManager) {
        let key = usersDatabase.rawValue + "/" + name
        guard inProgress.withLock({ $0.insert(key).inserted }) else { return }
        DispatchQueue.global(qos: .utility).async {
            // As CouchDB's hasher: no other upgrade of this user for 5 s, so that a password
            // change following the login is not overtaken by the next login's upgrade.
            defer {
                DispatchQueue.global().asyncAfter(deadline: .now() + 5) { inProgress.withLock { _ = $0.remove(key) } }
            }
            var body = document
            body["password"] = JSONValue(password)
            body["preserve_salt"] = true
            do {
                let database = try databases.database(usersDatabase)
                let edit = try DocumentEdit(json: .object(body))
                let prepared = try UsersDatabase.prepare(edit, parent: document, user: .internalWriter,
                                                         isAdmin: true, hasher: hasher, rules: PasswordRules())
                _ = try database.update(prepared)
                logger.notice("upgraded the stored password hash of user \(JSONValue(name).serializedString())")
            } catch {
                logger.info("password hash of user \(JSONValue(name).serializedString()) not upgraded: \(error)")
            }
        }
    }
}

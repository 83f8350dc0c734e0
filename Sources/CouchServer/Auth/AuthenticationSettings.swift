import CouchCore

/// How clients authenticate, from CouchDB's settings as CouchDB reads them: the handlers in
/// `[chttpd] authentication_handlers`, the users database (`[chttpd_auth] authentication_db`),
/// proxy authentication (`proxy_use_secret`, `secret`, the `x_auth_*` header names), JSON Web
/// Tokens (`[jwt_auth]`, `[jwt_keys]`), the lockout after failed logins (`[chttpd_auth_lockout]`)
/// and the rules new passwords must follow (`password_regexp`). Values are read from the
/// configuration's entries as given, so `_config` shows them as they were set.
struct AuthenticationSettings: Sendable {
    /// CouchDB's handlers, named as `_session` lists them.
    enum Handler: String, Sendable {
        case jwt, proxy, cookie
        case basic = "default"
    }

    var handlers: [Handler] = [.cookie, .basic]
    /// Where user documents are looked up, besides server admins.
    var usersDatabase = UsersDatabase.defaultName
    /// Whether `authentication_db` was set (`_session` then names it, as CouchDB does).
    var usersDatabaseConfigured = false
    var proxy = ProxyAuthentication.Settings()
    var jwt = JSONWebTokenAuthentication.Settings()
    var lockout = LoginLockout.Settings()
    var passwordRules = PasswordRules()
    /// `[chttpd_auth] pbkdf2_prf`: the PRF of new password hashes.
    var passwordFunction = HashFunction.sha256
    /// `[chttpd_auth] upgrade_hash_on_auth`: rehash a user's password at login when its
    /// hash is not what the server now makes (see `PasswordUpgrade`).
    var upgradeHashOnAuth = false
    /// `[chttpd_auth] allow_conflicted_user_docs` (see `CredentialStore`).
    var allowConflictedUserDocuments = false

    init() {}

    init(_ file: ConfigurationFile) throws(ConfigurationError) {
        func auth(_ key: String) -> String? { file.value(key, in: "chttpd_auth", "couch_httpd_auth") }
        if let text = file.value("authentication_handlers", in: "chttpd") {
            handlers = try Self.handlers(text)
        }
        // Only `[chttpd_auth]`'s, as CouchDB's auth cache reads it (`[couch_httpd_auth]`'s was the node-local port's).
        if let name = file.value("authentication_db", in: "chttpd_auth"), !name.isEmpty {
            guard let database = try? DatabaseName(name) else {
                throw ConfigurationError("authentication_db is not a valid database name: \"\(name)\"")
            }
            usersDatabase = database
            usersDatabaseConfigured = true
        }
        proxy = try ProxyAuthentication.Settings(file)
        jwt = try JSONWebTokenAuthentication.Settings(file)
        lockout = try LoginLockout.Settings(file)
        if let rules = auth("password_regexp") { passwordRules = PasswordRules(rules) }
        if let name = auth("pbkdf2_prf") {
            guard let function = HashFunction(couchName: name) else {
                throw ConfigurationError("pbkdf2_prf must be one of sha, sha224, sha256, sha384, sha512, not \"\(name)\"")
            }
            passwordFunction = function
        }
        upgradeHashOnAuth = try Self.bool(auth("upgrade_hash_on_auth"), named: "upgrade_hash_on_auth") ?? false
        allowConflictedUserDocuments = try Self.bool(file.value("allow_conflicted_user_docs", in: "chttpd_auth"),
                                                     named: "allow_conflicted_user_docs") ?? false
    }

    static func bool(_ text: String?, named name: String) throws(ConfigurationError) -> Bool? {
        switch text?.lowercased() {
        case nil: return nil
        case "true": return true
        case "false": return false
        default: throw ConfigurationError("\(name) must be true or false, not \"\(text ?? "")\"")
        }
    }

    /// Reads `{chttpd_auth, cookie_authentication_handler}, {couch_httpd_auth, ...}`: a handler
    /// is named by its function's first word (CouchDB's `auth_handler_name`), whichever of
    /// CouchDB's two modules names it. Other handlers (a module of one's own, or the null
    /// handler that makes every client an admin) are refused rather than ignored.
    static func handlers(_ text: String) throws(ConfigurationError) -> [Handler] {
        var handlers: [Handler] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else { break }
            let parts = rest[rest.index(after: open)..<close].split(separator: ",").map { $0.trimmingWhitespace() }
            rest = rest[rest.index(after: close)...]
            guard parts.count == 2, ["chttpd_auth", "couch_httpd_auth"].contains(parts[0]) else {
                throw ConfigurationError("authentication_handlers: unknown handler {\(parts.joined(separator: ", "))}")
            }
            let handler: Handler? = switch parts[1] {
            case "jwt_authentication_handler": .jwt
            case "proxy_authentication_handler", "proxy_authentification_handler": .proxy
            case "cookie_authentication_handler": .cookie
            case "default_authentication_handler": .basic
            default: nil
            }
            guard let handler else { throw ConfigurationError("authentication_handlers: unknown handler \(parts[1])") }
            if !handlers.contains(handler) { handlers.append(handler) }
        }
        return handlers
    }

    /// The databases whose documents are user documents (CouchDB's `couch_users_db` rules and
    /// password hashing): the users database, and any named `_users` or ending `/_users`.
    func isUsersDatabase(_ name: DatabaseName) -> Bool {
        name == usersDatabase || name.rawValue == "_users" || name.rawValue.hasSuffix("/_users")
    }
}

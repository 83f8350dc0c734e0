import CouchCore
import CouchStore
import Logging

/// The server's security state, built once at start: admins (hashed), the session
/// secret, the password hasher, the authenticator, CORS. `CouchServer.handle` asks it to
/// authenticate and authorize each request before the request reaches its handler.
final class AccessControl: Sendable {
    let configuration: ServerConfiguration
    let admins: AdminRegistry
    let hasher: PasswordHasher
    let cookie: SessionCookie
    let authenticator: Authenticator
    let cors: CORSPolicy
    let databases: DatabaseManager
    /// The authentication handlers and their settings, the users database, lockout and
    /// password rules (read from the configuration's entries, see `AuthenticationSettings`).
    let settings: AuthenticationSettings
    private let logger = Logger(label: "couchette.auth")

    /// `lockout` is the server's: failure counts outlive configuration changes.
    init(configuration: ServerConfiguration, databases: DatabaseManager,
         lockout: LoginLockout = LoginLockout()) throws(ConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        self.databases = databases
        settings = try AuthenticationSettings(ConfigurationFile(entries: configuration.otherEntries))
        let authentication = configuration.authentication
        hasher = PasswordHasher(iterations: authentication.iterations, function: settings.passwordFunction,
                                iterationRange: max(1, authentication.minimumIterations)...max(1, authentication.minimumIterations,
                                                                                               authentication.maximumIterations),
                                concurrentChecks: max(1, configuration.listener.threadCount / 4))
        admins = try AdminRegistry.load(directory: databases.directory, adding: authentication.admins, hasher: hasher)
        if admins.isEmpty, !configuration.isLoopbackOnly {
            throw ConfigurationError("""
                refusing to listen on \(configuration.listener.bindAddress) with no server admin: every client \
                would be an admin. Add one with --admin NAME:PASSWORD (or an [admins] section in --config), \
                or bind to 127.0.0.1.
                """)
        }
        cookie = SessionCookie(secret: try SessionSecret.load(directory: databases.directory),
                               timeout: authentication.sessionTimeout,
                               persistent: authentication.allowPersistentCookies,
                               sameSite: authentication.cookieSameSite)
        authenticator = Authenticator(credentials: CredentialStore(admins: admins, databases: databases,
                                                                   usersDatabase: settings.usersDatabase,
                                                                   allowConflicts: settings.allowConflictedUserDocuments),
                                      hasher: hasher, cookie: cookie,
                                      requireValidUser: authentication.requireValidUser,
                                      settings: settings, lockout: lockout)
        cors = CORSPolicy(configuration.cors)
    }

    var isAdminParty: Bool { authenticator.isAdminParty }

    /// Checks the request against the policy; returns the user's standing in the route's
    /// database when the check had to look it up.
    func authorize(_ endpoint: Endpoint, method: String, user: UserContext) throws -> DatabaseAccess? {
        let requested = HTTPMethod(rawValue: method).map { $0 == .HEAD ? HTTPMethod.GET : $0 }
        // The settings read where they are, not copied (every request comes through here).
        if configuration.authentication.requireValidUser, user.isAnonymous, !user.isServerAdmin,
           !AuthorizationPolicy.isExemptFromRequiredLogin(
               endpoint.route, method: requested, exceptUp: configuration.authentication.requireValidUserExceptForUp) {
            throw CouchError(.unauthorized, "Authentication required.")
        }
        try ensureUsersDatabase(endpoint, method: requested)
        let requirement = AuthorizationPolicy.requirement(
            for: endpoint, method: requested, usersSecurityEditable: configuration.authentication.usersDatabaseSecurityEditable,
            isUsersDatabase: endpoint.databaseName.map(settings.isUsersDatabase) ?? false)
        var looked: DatabaseAccess?
        try AuthorizationPolicy.enforce(requirement, user: user) {
            let access = try self.access(for: user, to: endpoint)
            looked = access
            return access
        }
        return looked
    }

    /// What `user` may do in the endpoint's database: everything for server admins;
    /// otherwise what its security object says. `not_found` when the database is missing.
    func access(for user: UserContext, to endpoint: Endpoint) throws -> DatabaseAccess {
        guard let name = endpoint.databaseName else { return user.isServerAdmin ? .full : .init(isAdmin: false, isMember: true) }
        if user.isServerAdmin { return .full }
        return try securityObject(of: try databases.database(name)).access(for: user)
    }

    /// The database's security object, or the default a database never given one has.
    func securityObject(of database: some FunctionDatabase) throws -> SecurityObject {
        if let stored = try database.securityObject() { return SecurityObject(json: stored) }
        // User documents guard themselves (`UsersDatabase`): members are everyone.
        if settings.isUsersDatabase(database.name) { return .everyone }
        switch configuration.authentication.defaultSecurity {
        case .adminOnly: return .adminOnly
        case .everyone: return .everyone
        }
    }

    /// A database created here gets the configured default written into it at once, as
    /// CouchDB writes it at creation: changing `default_security` later leaves it as it is.
    func secureNewDatabase(_ database: Database) throws {
        try database.setSecurityObject(securityObject(of: database).json)
    }

    /// Whether `name`'s documents are user documents (see `AuthenticationSettings`).
    func isUsersDatabase(_ name: DatabaseName) -> Bool { settings.isUsersDatabase(name) }

    /// The users database is created when first needed, as CouchDB's auth cache creates it.
    private func ensureUsersDatabase(_ endpoint: Endpoint, method: HTTPMethod?) throws {
        let name = settings.usersDatabase
        guard endpoint.databaseName == name, !databases.exists(name) else { return }
        if case .database = endpoint, method == .PUT || method == .DELETE { return }
        do {
            _ = try databases.create(name)
            logger.info("created the users database \(name.rawValue)")
        } catch let error as CouchError where error.kind == .fileExists {
            return
        }
    }

    /// `WWW-Authenticate` for a 401, only where CouchDB sends one: when the client asks
    /// for it (`X-CouchDB-WWW-Authenticate`), when configured, or under `require_valid_user`.
    func challenge(for error: CouchError, request: HTTPRequest) -> String? {
        guard error.status == 401 else { return nil }
        if let requested = request.header("x-couchdb-www-authenticate") { return requested }
        if let configured = configuration.authentication.wwwAuthenticate { return configured }
        if configuration.authentication.requireValidUser, error.kind == .unauthorized { return "Basic realm=\"server\"" }
        return nil
    }

    /// The largest document a write may carry, checked where edits pass the policy.
    var maximumDocumentSize: Int { configuration.maximumDocumentSize }
}

extension AccessControl {
    /// Whether an upload may stream to disk as it arrives: only when the request would be
    /// authorized. Otherwise it is read into memory (within the body limit) and refused
    /// by `handle` like any other request.
    func mayUpload(method: String, path: String, headers: [String: String], endpoint: Endpoint) -> Bool {
        let request = HTTPRequest(method: method, path: path, query: [], headers: headers, body: [])
        do {
            _ = try authorize(endpoint, method: method, user: try authenticator.authenticate(request).user)
            return true
        } catch {
            return false
        }
    }
}

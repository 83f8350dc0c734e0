import CouchCore
import CouchStore

/// Every access decision, after CouchDB's `chttpd_auth_request` and `couch_db`'s
/// security checks. `CouchServer.handle` asks `check` once per request, after
/// authentication and before the handler; document writes whose IDs are only known from
/// the body (`POST /db`, `_bulk_docs`, `COPY`'s destination) also pass `checkWrite`.
///
/// The route rules are a switch over every `RouteKey` and method with no `default`: a
/// route added to the table without a rule here does not compile.
enum AuthorizationPolicy {
    enum Requirement: Equatable {
        /// No check (`/`, `/_up`, `/_uuids`, `/_session`).
        case anyone
        /// `_admin` role; CouchDB answers 401 "You are not a server admin." to everyone else.
        case serverAdmin
        /// A member of the route's database (or its admin, or anyone when it has no members).
        case member
        /// A database admin (member check first): 401 for anonymous, 403 for others.
        case databaseAdmin
        /// `_compact`: a database admin; CouchDB answers 401 to any other member.
        case databaseAdminToCompact
        /// `_users` documents: a member, then only one's own document (`couch_users_db`).
        case userDocument(DocumentID, reading: Bool)
        /// Never allowed, with this error.
        case refused(CouchError)
    }

    /// The rule of each route, by method (`nil`: a method the route does not serve, which
    /// then answers 405 once this check has passed, as CouchDB checks access first).
    static func requirement(for route: RouteKey, method: HTTPMethod?) -> Requirement {
        switch route {
        case .server(let resource):
            switch resource {
            case .root, .up, .uuids, .session: return .anyone
            // Replications read and write local databases directly, whatever their
            // `_security`, so only admins may start them; `_active_tasks` is admin-only in CouchDB.
            case .replicate, .activeTasks: return .serverAdmin
            // CouchDB 3: `[chttpd] admin_only_all_dbs = true`.
            case .allDatabases: return .serverAdmin
            // CouchDB 3: `_dbs_info` follows `admin_only_all_dbs`; the rest are admin-only
            // (`_stats` and `_config` at the root are admin-only before being refused).
            case .databasesInfo, .membership, .databaseUpdates, .legacyStats, .legacyConfig: return .serverAdmin
            }
        // `/_node/...`: configuration, statistics and system facts are for server admins.
        case .node(let resource):
            switch resource {
            case .name, .config, .configSection, .configKey, .configReload, .stats, .system, .versions, .prometheus:
                return .serverAdmin
            }
        case .database:
            switch method {
            case .PUT, .DELETE: return .serverAdmin
            case .GET, .HEAD, .POST, .COPY, .OPTIONS, nil: return .member
            }
        case .databaseResource(let resource):
            switch resource {
            case .allDocuments, .designDocuments, .bulkDocuments, .bulkGet, .changes,
                 .revisionsDifference, .missingRevisions, .ensureFullCommit, .allDocumentsQueries, .designDocumentsQueries,
                 .localDocuments, .shards:
                return .member
            case .compact, .viewCleanup:
                return .databaseAdminToCompact
            case .revisionsLimit, .security:
                return method == .PUT ? .databaseAdmin : .member
            // Purging rewrites history: database admins only, as in CouchDB.
            case .purge:
                return .databaseAdmin
            case .purgedInfosLimit, .purgedInfos:
                return method == .PUT ? .databaseAdmin : .member
            // Queries read as `_all_docs` does (documents a user may not see are left out);
            // creating an index writes a design document, which checks for an admin.
            case .find, .explain, .index:
                return .member
            }
        // Deleting an index rewrites its design document.
        case .index:
            return .databaseAdmin
        // A rewritten request is authorized again where it lands.
        case .document, .attachment, .localDocument, .designResource, .designFunction, .partition:
            return .member
        // The admin page's files are public, as Fauxton's are: what it shows comes from the API.
        case .utils:
            return .anyone
        // Resharding changes every database's shard map: CouchDB's `_reshard` is for server admins.
        case .reshard:
            return .serverAdmin
        // Jobs name their peers and documents; CouchDB's `_scheduler` is for server admins.
        case .scheduler(let resource):
            switch resource {
            case .jobs, .job, .documents, .document, .pending: return .serverAdmin
            }
        }
    }

    /// The rule for one request: the route's, made stricter for design documents and for
    /// the system databases as CouchDB does. `isUsersDatabase`: whether the route's database
    /// holds user documents (`_users`, or the configured `authentication_db`).
    static func requirement(for endpoint: Endpoint, method: HTTPMethod?, usersSecurityEditable: Bool,
                            isUsersDatabase: Bool = false) -> Requirement {
        let base = requirement(for: endpoint.route, method: method)
        let writes = method == .PUT || method == .DELETE || method == .POST
        switch endpoint {
        case .document(_, let id), .attachment(_, let id, _):
            if isUsersDatabase, !id.isLocal {
                if id.isDesign, writes { return .databaseAdmin }
                // COPY reads its source here; its destination is checked as a write.
                return .userDocument(id, reading: !writes)
            }
            if isUsersDatabase, id.isLocal { return .databaseAdmin }
            if id.isDesign, writes { return .databaseAdmin }
            return base
        case .databaseResource(_, let resource) where isUsersDatabase:
            switch resource {
            case .allDocuments, .changes, .allDocumentsQueries, .designDocumentsQueries, .localDocuments:
                return .serverAdmin
            // Stricter than CouchDB, which filters each document of these per user:
            // only admins list or bulk-read the users database.
            case .designDocuments, .bulkGet:
                return .serverAdmin
            // Answers about documents one may not read (`possible_ancestors` tells which
            // users exist; purged IDs name users): CouchDB's `_users` is for admins only.
            case .revisionsDifference, .missingRevisions, .purgedInfos:
                return .serverAdmin
            // Indexes are design documents, which only admins read in a users database.
            case .index:
                return .databaseAdmin
            case .security where method == .PUT && !usersSecurityEditable:
                return .refused(CouchError(.forbidden, "You can't edit the security object of the user database."))
            default:
                return base
            }
        case .databaseResource(let database, let resource) where database.isSystem && database.isReplicator:
            switch resource {
            case .allDocuments, .changes, .allDocumentsQueries, .localDocuments:
                return .serverAdmin
            default:
                return base
            }
        case .database where isUsersDatabase && (method == .GET || method == .HEAD):
            // Its information counts the users (POST, a sign-up, follows the document rules).
            return .serverAdmin
        // `POST /db/_compact/ddoc` is compaction, for database admins as `_compact`.
        case .designResource(_, _, "_compact"):
            return .databaseAdminToCompact
        // A show renders one document, which the reader's rule lets through only when it is
        // their own (another's is missing, as in CouchDB).
        case .designResource(_, _, DesignFunctionRoute.show.rawValue) where isUsersDatabase:
            return base
        // Views, lists... of a users database read its design documents and every user's
        // document: for admins only (CouchDB's "Only administrators can view design docs").
        case .designResource(_, let id, _) where isUsersDatabase:
            return .userDocument(id, reading: true)
        case .index where isUsersDatabase:
            return .databaseAdmin
        case .server, .database, .databaseResource, .designResource, .scheduler, .node, .index, .utils, .partition, .reshard:
            return base
        }
    }

    /// CouchDB's `require_valid_user`: anonymous requests are refused, except a login
    /// attempt (and `/_up` when configured).
    static func isExemptFromRequiredLogin(_ route: RouteKey, method: HTTPMethod?, exceptUp: Bool) -> Bool {
        (route == .server(.session) && method == .POST) || (exceptUp && route == .server(.up))
    }

    /// Throws CouchDB's error when `user` may not do what `requirement` asks. `access` is
    /// only computed (reading the database's security object) when the rule needs it.
    static func enforce(_ requirement: Requirement, user: UserContext,
                        access: () throws -> DatabaseAccess) throws {
        switch requirement {
        case .anyone:
            return
        case .serverAdmin:
            guard user.isServerAdmin else { throw CouchError(.unauthorized, "You are not a server admin.") }
        case .member:
            try requireMember(user, try access())
        case .databaseAdmin:
            let access = try access()
            try requireMember(user, access)
            try requireDatabaseAdmin(user, access)
        case .databaseAdminToCompact:
            let access = try access()
            try requireMember(user, access)
            guard access.isAdmin else { throw CouchError(.unauthorized, "You are not a server or db admin.") }
        case .userDocument(let id, let reading):
            let access = try access()
            try requireMember(user, access)
            if reading {
                try UsersDatabase.checkRead(id, user: user, isAdmin: access.isAdmin)
            } else {
                try UsersDatabase.checkWrite(id, user: user, isAdmin: access.isAdmin)
            }
        case .refused(let error):
            throw error
        }
    }

    static func requireMember(_ user: UserContext, _ access: DatabaseAccess) throws(CouchError) {
        guard access.isMember else {
            throw user.isAnonymous
                ? CouchError(.unauthorized, "You are not authorized to access this db.")
                : CouchError(.forbidden, "You are not allowed to access this db.")
        }
    }

    static func requireDatabaseAdmin(_ user: UserContext, _ access: DatabaseAccess) throws(CouchError) {
        guard access.isAdmin else {
            throw CouchError(user.isAnonymous ? .unauthorized : .forbidden, "You are not a db or server admin.")
        }
    }

    /// A document write whose ID comes from the body, or any write the store is about to
    /// take: design documents need a database admin; `_users` documents follow their own
    /// rules and have their password hashed (see `UsersDatabase`).
    static func checkWrite(_ edit: DocumentEdit, in database: Database, user: UserContext, access: DatabaseAccess,
                           accessControl: AccessControl, newEdits: Bool) throws -> DocumentEdit {
        guard let id = edit.id else { return edit }
        if id.isDesign { try requireDatabaseAdmin(user, access) }
        if database.name.isReplicator, !id.isLocal, !id.isDesign {
            return try ReplicatorDatabaseRules.prepare(
                edit, id: id, parent: try parentBody(of: edit, id: id, in: database, newEdits: newEdits), user: user,
                isAdmin: access.isAdmin || user.isServerAdmin)
        }
        // Design documents of `_users` need an admin (above) and nothing else, as in CouchDB,
        // where no `validate_doc_update` runs on a design document.
        guard accessControl.isUsersDatabase(database.name), !id.isLocal, !id.isDesign else { return edit }
        return try UsersDatabase.prepare(edit, parent: try parentBody(of: edit, id: id, in: database, newEdits: newEdits),
                                         user: user, isAdmin: access.isAdmin, hasher: accessControl.hasher,
                                         rules: accessControl.settings.passwordRules,
                                         withAuthDesignDocument: try UsersDatabase.hasAuthDesignDocument(database))
    }

    /// The revision an edit replaces, which `_users` rules compare against: the one named
    /// by `_rev` (the store refuses the write if it is no longer a leaf), or for replicated
    /// writes the current winner.
    private static func parentBody(of edit: DocumentEdit, id: DocumentID, in database: Database,
                                   newEdits: Bool) throws -> JSONObject? {
        let snapshot: DocumentSnapshot?
        if newEdits {
            guard let revision = edit.revision else { return nil }
            snapshot = try? database.document(id, revision: revision)
        } else {
            snapshot = try? database.document(id)
        }
        guard let snapshot, !snapshot.revision.isDeleted else { return nil }
        return try? JSONValue.parse(snapshot.revision.body).objectValue
    }
}

import CouchCore
import CouchFunctions
import CouchIndex
import CouchMango
import CouchReplication
import CouchStore
import Foundation
import Logging

/// The HTTP face of a data directory: parses each request's endpoint, finds its
/// handler in the route table and turns every error into CouchDB's error response.
public final class CouchServer: RequestHandler {
    public let databases: DatabaseManager
    /// The configuration in force (it changes through `/_node/_local/_config`).
    /// Borrowed, not copied: a request reading one setting would otherwise copy them all.
    public var configuration: ServerConfiguration {
        _read {
            let current = accessControl
            yield current.configuration
        }
    }
    /// The layered configuration behind `/_node/_local/_config` (see `Config/`).
    let liveConfiguration: LiveConfiguration
    private let accessControlHolder: AccessControlHolder
    /// Admins, sessions, the authorization policy and CORS (see `Auth/`), rebuilt when the
    /// configuration changes; a request keeps the one it started with.
    var accessControl: AccessControl { accessControlHolder.current }
    /// The replications started with `POST /_replicate`, listed by `GET /_active_tasks`.
    public let replications: ReplicationManager
    /// Design documents' functions and the native ones an embedding application registers;
    /// validates every write of `databases`.
    public let functions: FunctionRuntime
    /// The open view (and Mango) indexes of every database.
    public let indexes = IndexManager()
    /// Owns every job (from `_replicate` and `_replicator` documents): `_scheduler/jobs`.
    public let scheduler: ReplicationScheduler
    /// Watches the replicator databases: `_scheduler/docs`.
    public let replicatorDatabase: ReplicatorDatabase
    /// Fetches the attachment bodies an on-demand pull left on its source, when first read.
    public let attachmentsOnDemand: OnDemandAttachments
    /// Mango's text indexes (FTS5 files beside each database); its JSON indexes are in `indexes`.
    let mangoText = MangoTextIndexes()
    /// The admin page's files served at `/_utils/` (nil: none found; see `PublicDirectory`).
    public let publicDirectory: String?
    /// The node's name (`[couchette] node_name`, read at start): `/_membership`, `/_node/{name}`.
    public let nodeName: String
    /// `/_reshard`'s jobs and state (`ReshardRoutes`).
    let resharding = Resharding()
    /// The IDs of `/_uuids` and of documents posted without one (`[uuids] algorithm`).
    let uuids: UUIDGenerator
    /// Failed logins counted for `[chttpd_auth_lockout]`; kept across configuration changes.
    private let loginLockout = LoginLockout()
    private let couchSettings: Locked<CouchSettings>
    /// CouchDB's settings read from the configuration's entries (see `CouchSettings`).
    var settings: CouchSettings { couchSettings.withLock { $0 } }
    /// Third-party files for the admin page, `/_utils/vendor/NAME/` (see `VendorDirectory`).
    public let vendorDirectories: [String: String]
    let logger = Logger(label: "couchette.server")
    /// Requests, reads and feeds counted for `_stats` and `_prometheus`.
    let metrics: ServerMetrics
    /// Trims the allocator once requests stop (see `IdleMemoryRelease`).
    private let idleMemoryRelease: IdleMemoryRelease
    /// Where requests that may run long are answered (see `OffThreadAnswer`): as many at
    /// once as the listener has workers (a pool the servers of one process share), half of
    /// them at most for one database.
    let longRequests: FairQueue

    /// A server for `databases`, its admins (stored hashed) and session secret kept in
    /// their data directory. Refuses to serve beyond loopback with no admin.
    public init(databases: DatabaseManager, configuration: ServerConfiguration) throws {
        self.databases = databases
        liveConfiguration = LiveConfiguration(base: configuration, directory: databases.directory)
        let effective = try liveConfiguration.effective(firstTime: true)
        let holder = AccessControlHolder(try AccessControl(configuration: effective, databases: databases,
                                                           lockout: loginLockout))
        let settings = try CouchSettings(ConfigurationFile(entries: effective.otherEntries))
        couchSettings = Locked(settings)
        nodeName = settings.nodeName
        uuids = UUIDGenerator(settings.uuids)
        accessControlHolder = holder
        LogLevelControl.level = LogLevelControl.level(named: effective.logLevel) ?? LogLevelControl.level
        databases.maximumOpen = effective.maximumOpenDatabases
        publicDirectory = PublicDirectory.locate(configured: effective.publicDirectory)
        vendorDirectories = VendorDirectory.locate(codeMirror: effective.codeMirrorDirectory)
        databases.maximumPartitionSize = effective.maximumPartitionSize
        databases.attachmentCompression = effective.attachmentCompression
        functions = FunctionRuntime(limits: effective.functions, securityObject: { database in
            (try? holder.current.securityObject(of: database).json) ?? [:]
        })
        // Every database created from now on (`PUT /db`, a replication's `create_target`) gets the
        // configured default security written into it, as CouchDB writes it at creation. System
        // databases keep their own rules.
        databases.observeCreations { [weak databases] database in
            if holder.current.isUsersDatabase(database.name) {
                UsersDatabase.installAuthDesignDocument(in: database)
                // As when one is deleted (see `usersDatabaseDeleted`).
                if let databases { Self.installAuthDesignDocument(holder.current.settings.usersDatabase, in: databases) }
            }
            guard !database.name.isSystem else { return }
            try? holder.current.secureNewDatabase(database)
        }
        databases.validator = functions
        Self.installAuthDesignDocument(holder.current.settings.usersDatabase, in: databases)
        indexes.registerSignatureProvider(ViewRoutes.javaScriptSignatures(functions))
        indexes.registerSignatureProvider { database in
            Set(((try? MangoIndex.list(in: database)) ?? []).compactMap(\.signature))
        }
        replications = ReplicationManager(serverUUID: databases.serverUUID, databases: databases, functions: functions)
        scheduler = ReplicationScheduler(manager: replications, configuration: effective.replicator, nodeName: nodeName)
        replicatorDatabase = ReplicatorDatabase(databases: databases, scheduler: scheduler)
        attachmentsOnDemand = OnDemandAttachments(replicatorDatabase: replicatorDatabase)
        let metrics = ServerMetrics()
        self.metrics = metrics
        idleMemoryRelease = IdleMemoryRelease(requestCount: { [weak metrics] in metrics?.requestCount ?? 0 },
                                              releaseCaches: { [weak databases] in databases?.releaseCacheMemory() })
        longRequests = FairQueue(pool: ThreadPool.shared(name: "long-requests", threads: configuration.listener.threadCount),
                                 share: configuration.listener.threadCount / 2)
        replicatorDatabase.start()
    }

    /// Stops every replication (each writes a last checkpoint); `_replicator` documents
    /// keep their state, so their jobs resume when a server starts on this data again.
    /// Stops every replication and waits (up to `timeout` seconds) for each to write its
    /// last checkpoint, so that it starts again from there with the server.
    public func shutdown(timeout: Double = 10) {
        let running = replications.replications
        replicatorDatabase.stop()
        scheduler.shutdown()
        let finished = DispatchSemaphore(value: 0)
        running.forEach { $0.whenFinished { _ in finished.signal() } }
        let deadline = DispatchTime.now() + timeout
        for _ in running where finished.wait(timeout: deadline) == .timedOut { break }
    }

    /// CouchDB's defaults: an admin party on loopback, unless admins were stored before.
    public convenience init(databases: DatabaseManager) throws {
        try self.init(databases: databases, configuration: ServerConfiguration())
    }

    /// Puts `configuration` in force: a new `AccessControl` (admins read again from their
    /// file), the log level, the open-database bound and the replicator's limits. Throws,
    /// changing nothing, when the configuration is refused.
    func install(_ configuration: ServerConfiguration) throws {
        let settings = try CouchSettings(ConfigurationFile(entries: configuration.otherEntries))
        accessControlHolder.current = try AccessControl(configuration: configuration, databases: databases,
                                                        lockout: loginLockout)
        couchSettings.withLock { $0 = settings }
        uuids.configure(settings.uuids)
        if let level = LogLevelControl.level(named: configuration.logLevel) { LogLevelControl.level = level }
        databases.maximumOpen = configuration.maximumOpenDatabases
        scheduler.configuration = configuration.replicator
        databases.maximumPartitionSize = configuration.maximumPartitionSize
        databases.attachmentCompression = configuration.attachmentCompression
    }

    /// Gives an existing users database its `_design/_auth`, which clients wait for.
    private static func installAuthDesignDocument(_ name: DatabaseName, in databases: DatabaseManager) {
        guard databases.exists(name), let database = try? databases.database(name) else { return }
        UsersDatabase.installAuthDesignDocument(in: database)
    }

    /// A users database was deleted. CouchDB's auth cache, whose watch of the users database
    /// then ends, starts watching the configured one (`authentication_db` may have changed
    /// since) and gives it `_design/_auth`: so does Couchette, then and when a users database
    /// is created. A newly configured `authentication_db` gets it then or at the next start,
    /// as in CouchDB.
    func usersDatabaseDeleted() {
        Self.installAuthDesignDocument(accessControl.settings.usersDatabase, in: databases)
    }

    /// `[chttpd] max_http_request_size` as now configured (`_config` changes it while running).
    public var maximumBodySize: Int? { configuration.listener.maximumBodySize }

    /// True when no admin is configured and every client is one (CouchDB's admin party).
    public var isAdminParty: Bool { accessControl.isAdminParty }

    /// Every request, on the listener's thread unless it may run long (`OffThreadAnswer`) or
    /// cost a password check.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        if OffThreadAnswer.mayRunLong(method: request.method, path: request.path) || OffThreadAnswer.filtersChanges(request)
            || runsValidation(request) {
            return HTTPResponse(status: 200, body: .deferred(OffThreadAnswer(queue: longRequests, path: request.path) { [self] in
                answer(request)
            }))
        }
        let authenticator = accessControl.authenticator
        guard let credentials = authenticator.passwordCheckKey(request) else { return answer(request) }
        // Logins take a share of their own, not their database's: a flood of them leaves the
        // database's slow requests their threads. Too many different ones answer 503 at once.
        let hasher = authenticator.hasher
        guard hasher.admit(credentials: credentials) else {
            return answer(request) { _ in .error(PasswordHasher.tooManyChecks) }
        }
        return HTTPResponse(status: 200, body: .deferred(OffThreadAnswer(
            queue: longRequests, path: request.path, owner: "_password_checks",
            answered: { hasher.answered(credentials: credentials) }) { [self] in answer(request) }))
    }

    /// A write into a database whose validation functions (JavaScript, which may loop until
    /// its time limit) will judge it.
    private func runsValidation(_ request: HTTPRequest) -> Bool {
        guard let name = OffThreadAnswer.writtenDatabase(method: request.method, path: request.path),
              let database = try? databases.database(name) else { return false }
        return functions.validates(database)
    }

    /// CORS preflight, then authentication and authorization (once, by the policy in
    /// `Auth/`), then the handler the route table names.
    /// `routing` answers in place of the route table (a refusal before any work).
    private func answer(_ request: HTTPRequest, routing: ((HTTPRequest) -> HTTPResponse)? = nil) -> HTTPResponse {
        let started = DispatchTime.now().uptimeNanoseconds
        let access = accessControl
        let request = RequestForms.overridingMethod(request)
        var response = access.cors.preflight(request) ?? (routing ?? route)(request)
        response = RequestForms.wrappingJSONP(response, request: request, allowed: access.configuration.allowJSONP)
        access.cors.decorate(&response, for: request)
        metrics.recordRequest(method: request.method, status: response.status,
                              nanoseconds: DispatchTime.now().uptimeNanoseconds &- started)
        return response
    }

    /// Authentication, authorization and the handler; a rewritten request (`_rewrite`) comes
    /// back here.
    func route(_ request: HTTPRequest) -> HTTPResponse {
        do {
            let authentication = try accessControl.authenticator.authenticate(request)
            let endpoint = try Endpoint(path: request.path, plusIsSpace: settings.decodePlusToSpace)
            let access = try accessControl.authorize(endpoint, method: request.method, user: authentication.user)
            var response = try RouteTable.handler(for: request.method, at: endpoint)(
                RouteContext(server: self, request: request, endpoint: endpoint,
                             user: authentication.user, databaseAccess: access))
            if endpoint.route == .document || endpoint.route == .attachment, response.status == 200,
               request.method == "GET" || request.method == "HEAD" {
                metrics.recordRead()
            }
            if let renewed = authentication.renewedCookie, response.header("Set-Cookie") == nil {
                response.setHeader("Set-Cookie", renewed)
            }
            return response
        } catch let error as CouchError {
            // Work stopped because its client hung up: nobody reads this answer.
            if error.kind == .stopped, RequestCancellation.current?.isCancelled == true { metrics.recordAbortedRequest() }
            var response = HTTPResponse.error(error)
            if error.kind == .methodNotAllowed,
               let endpoint = try? Endpoint(path: request.path, plusIsSpace: settings.decodePlusToSpace),
               let allow = RouteTable.allowHeader(for: endpoint) {
                response.setHeader("Allow", allow)
            }
            if let challenge = accessControl.challenge(for: error, request: request) {
                response.setHeader("WWW-Authenticate", challenge)
            }
            return response
        } catch {
            logger.error("unexpected error: \(error)")
            return .error(CouchError(.unknownError, "internal error"))
        }
    }

    /// Attachment uploads, alone or in a `multipart/related` document, stream into the
    /// blob store as they arrive; every other body is read into memory.
    public func bodySink(method: String, path: String, headers: [String: String]) -> RequestBodySink? {
        guard method == "PUT" else { return nil }
        // A plain document PUT (`/db/doc`, no multipart body) is neither: answered without
        // parsing the path and authorizing the request here as well as in `route`.
        let isMultipart = headers["content-type"].map { $0.lowercased().hasPrefix("multipart/related") } ?? false
        guard isMultipart || path.utf8.lazy.filter({ $0 == UInt8(ascii: "/") }).count >= 3 else { return nil }
        guard let endpoint = try? Endpoint(path: path, plusIsSpace: settings.decodePlusToSpace),
              let name = endpoint.databaseName,
              accessControl.mayUpload(method: method, path: path, headers: headers, endpoint: endpoint),
              let database = try? databases.database(name) else { return nil }
        switch endpoint {
        case .attachment:
            // Compressible types are compressed as they arrive (CouchDB's default for `Content-Type`).
            let compressing = database.attachments.compresses(contentType: headers["content-type"] ?? "application/octet-stream",
                                                              encoding: nil)
            return try? BlobUploadSink(store: database.attachments, compressing: compressing)
        case .document(_, let id) where !id.isLocal:
            guard let contentType = headers["content-type"], contentType.lowercased().hasPrefix("multipart/related"),
                  let boundary = MultipartReader.boundary(fromContentType: contentType) else { return nil }
            return MultipartUploadSink(store: database.attachments, boundary: boundary,
                                       maximumDocumentSize: Self.maximumDocumentSize)
        default:
            return nil
        }
    }

    static let maximumDocumentSize = 64 * 1024 * 1024
}

/// The access control in force, swapped whole when the configuration changes.
final class AccessControlHolder: @unchecked Sendable {
    // Every request reads it, more than once: readers must not wait for each other.
    private let lock = ReadWriteLock()
    private var control: AccessControl

    init(_ control: AccessControl) { self.control = control }

    var current: AccessControl {
        get { lock.reading { control } }
        set { lock.writing { control = newValue } }
    }
}

import CouchCore

public enum HTTPMethod: String, Sendable, CaseIterable {
    case GET, HEAD, PUT, POST, DELETE, COPY, OPTIONS
}

typealias RouteHandler = @Sendable (RouteContext) throws -> HTTPResponse

/// The map of the API: which handler serves which method on which resource.
/// Read top to bottom; anything not here is a 404, or a 405 with `Allow`.
enum RouteTable {
    static let routes: [RouteKey: [HTTPMethod: RouteHandler]] = [
        .server(.root): [.GET: ServerRoutes.getWelcome],
        .server(.allDatabases): [.GET: ServerRoutes.getAllDatabases],
        .server(.uuids): [.GET: ServerRoutes.getUUIDs],
        .server(.up): [.GET: ServerRoutes.getUp],
        .server(.session): [.GET: SessionRoutes.getSession, .POST: SessionRoutes.postSession, .DELETE: SessionRoutes.deleteSession],
        .server(.replicate): [.POST: ReplicateRoute.postReplicate],
        .server(.activeTasks): [.GET: ActiveTasksRoute.getActiveTasks],
        .scheduler(.jobs): [.GET: SchedulerRoutes.getJobs],
        .scheduler(.job): [.GET: SchedulerRoutes.getJob],
        .scheduler(.documents): [.GET: SchedulerRoutes.getDocuments],
        .scheduler(.document): [.GET: SchedulerRoutes.getDocument],
        .scheduler(.pending): [.GET: SchedulerRoutes.getPendingDocuments],
        .server(.membership): [.GET: ServerRoutes.getMembership],
        .server(.databasesInfo): [.GET: DatabasesInfoRoute.getDatabasesInfo, .POST: DatabasesInfoRoute.postDatabasesInfo],
        .server(.databaseUpdates): [.GET: DatabaseUpdatesRoute.getDatabaseUpdates],
        .server(.legacyStats): [.GET: ServerRoutes.getLegacyResource, .PUT: ServerRoutes.getLegacyResource,
                                .POST: ServerRoutes.getLegacyResource, .DELETE: ServerRoutes.getLegacyResource],
        .server(.legacyConfig): [.GET: ServerRoutes.getLegacyResource, .PUT: ServerRoutes.getLegacyResource,
                                 .POST: ServerRoutes.getLegacyResource, .DELETE: ServerRoutes.getLegacyResource],

        .node(.name): [.GET: ConfigurationRoutes.getNodeName],
        .node(.config): [.GET: ConfigurationRoutes.getConfiguration],
        .node(.configSection): [.GET: ConfigurationRoutes.getSection],
        .node(.configKey): [.GET: ConfigurationRoutes.getKey, .PUT: ConfigurationRoutes.putKey,
                            .DELETE: ConfigurationRoutes.deleteKey],
        .node(.configReload): [.POST: ConfigurationRoutes.postReload],
        .node(.stats): [.GET: NodeStatisticsRoutes.getStats],
        .node(.system): [.GET: NodeStatisticsRoutes.getSystem],
        .node(.versions): [.GET: NodeStatisticsRoutes.getVersions],
        .node(.prometheus): [.GET: NodeStatisticsRoutes.getPrometheus],
        .utils: [.GET: StaticFilesRoute.getFile],
        // `/_reshard/...` (ReshardRoutes checks the method, with CouchDB's `Allow` per path).
        .reshard: Dictionary(uniqueKeysWithValues: HTTPMethod.allCases.map { ($0, ReshardRoutes.handle) }),

        .database: [
            .GET: DatabaseRoutes.getDatabase,
            .PUT: DatabaseRoutes.putDatabase,
            .DELETE: DatabaseRoutes.deleteDatabase,
            .POST: DocumentRoutes.postDocument,
        ],
        .databaseResource(.allDocuments): [.GET: AllDocumentsRoute.getAllDocuments, .POST: AllDocumentsRoute.postAllDocuments],
        .databaseResource(.designDocuments): [.GET: AllDocumentsRoute.getDesignDocuments, .POST: AllDocumentsRoute.postDesignDocuments],
        .databaseResource(.bulkDocuments): [.POST: BulkDocumentsRoute.postBulkDocuments],
        .databaseResource(.bulkGet): [.POST: BulkGetRoute.postBulkGet],
        .databaseResource(.changes): [.GET: ChangesRoute.getChanges, .POST: ChangesRoute.postChanges],
        .databaseResource(.revisionsDifference): [.POST: RevisionsDifferenceRoute.postRevisionsDifference],
        .databaseResource(.missingRevisions): [.POST: RevisionsDifferenceRoute.postMissingRevisions],
        .databaseResource(.compact): [.POST: DatabaseRoutes.postCompact],
        .databaseResource(.ensureFullCommit): [.POST: DatabaseRoutes.postEnsureFullCommit],
        .databaseResource(.revisionsLimit): [.GET: DatabaseRoutes.getRevisionsLimit, .PUT: DatabaseRoutes.putRevisionsLimit],
        .databaseResource(.security): [.GET: SecurityRoutes.getSecurity, .PUT: SecurityRoutes.putSecurity],
        .databaseResource(.purge): [.POST: PurgeRoutes.postPurge],
        .databaseResource(.purgedInfosLimit): [.GET: PurgeRoutes.getPurgedInfosLimit, .PUT: PurgeRoutes.putPurgedInfosLimit],
        .databaseResource(.purgedInfos): [.GET: PurgeRoutes.getPurgedInfos],
        .databaseResource(.viewCleanup): [.POST: ViewRoutes.postViewCleanup],
        .databaseResource(.allDocumentsQueries): [.POST: AllDocumentsRoute.postAllDocumentsQueries],
        .databaseResource(.designDocumentsQueries): [.POST: AllDocumentsRoute.postDesignDocumentsQueries],
        // `_view`, `_info`, and `_compact/ddoc` (ViewRoutes checks the method).
        .designResource: Dictionary(uniqueKeysWithValues: HTTPMethod.allCases.map { ($0, ViewRoutes.handle) }),
        .databaseResource(.find): [.POST: FindRoutes.postFind],
        .databaseResource(.explain): [.POST: FindRoutes.postExplain],
        .databaseResource(.index): [.GET: IndexRoutes.getIndexes, .POST: IndexRoutes.postIndex],
        .index: [.DELETE: IndexRoutes.deleteIndex, .POST: IndexRoutes.postBulkDelete],
        .databaseResource(.shards): [.GET: ReshardRoutes.getShards],
        .databaseResource(.localDocuments): [.GET: AllDocumentsRoute.getLocalDocuments, .POST: AllDocumentsRoute.postLocalDocuments],
        .partition: [.GET: PartitionRoutes.get, .POST: PartitionRoutes.post],

        .document: [
            .GET: DocumentRoutes.getDocument,
            .PUT: DocumentRoutes.putDocument,
            .DELETE: DocumentRoutes.deleteDocument,
            .COPY: DocumentRoutes.copyDocument,
            .POST: FormUploadRoute.postDocument,
        ],
        .attachment: [
            .GET: AttachmentRoutes.getAttachment,
            .PUT: AttachmentRoutes.putAttachment,
            .DELETE: AttachmentRoutes.deleteAttachment,
        ],
        .designFunction(.show): [.GET: ShowRoute.show, .POST: ShowRoute.show],
        // CouchDB runs a list for OPTIONS as for GET.
        .designFunction(.list): [.GET: ListRoute.list, .POST: ListRoute.list, .OPTIONS: ListRoute.list],
        .designFunction(.update): Dictionary(uniqueKeysWithValues: HTTPMethod.allCases.map { ($0, UpdateRoute.update) }),
        .designFunction(.rewrite): Dictionary(uniqueKeysWithValues: HTTPMethod.allCases.map { ($0, RewriteRoute.rewrite) }),
        .localDocument: [
            .GET: LocalDocumentRoutes.getLocalDocument,
            .PUT: LocalDocumentRoutes.putLocalDocument,
            .DELETE: LocalDocumentRoutes.deleteLocalDocument,
        ],
    ]

    /// The handler for a request, or the error CouchDB answers when there is none.
    static func handler(for method: String, at endpoint: Endpoint) throws(CouchError) -> RouteHandler {
        guard let methods = routes[endpoint.route] else {
            throw CouchError(.notFound, endpoint.route == .designResource ? "Design document functions are not supported yet" : "missing")
        }
        // HEAD is GET without a body; libmicrohttpd drops the body.
        let requested = HTTPMethod(rawValue: method) == .HEAD && methods[.HEAD] == nil ? HTTPMethod.GET : HTTPMethod(rawValue: method)
        if let requested, let handler = methods[requested] { return handler }
        throw CouchError(.methodNotAllowed, "Only \(allowed(methods)) allowed")
    }

    static func allowed(_ methods: [HTTPMethod: RouteHandler]) -> String {
        var names = HTTPMethod.allCases.filter { methods[$0] != nil }
        if methods[.GET] != nil, methods[.HEAD] == nil { names.insert(.HEAD, at: names.firstIndex(of: .GET)! + 1) }
        return names.map(\.rawValue).joined(separator: ",")
    }

    static func allowHeader(for endpoint: Endpoint) -> String? {
        if case .reshard(let path) = endpoint { return ReshardRoutes.allowedMethods(path) }
        return routes[endpoint.route].map(allowed)
    }
}

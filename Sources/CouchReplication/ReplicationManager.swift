import CouchCore
import CouchFunctions
import CouchStore
import CurlClient
import Foundation
import Logging

/// Owns the running replication jobs of one server (or of the command line): starts
/// them, finds them by ID, cancels them, and reports them for `_active_tasks`. Starting
/// a replication that is already running joins it, as CouchDB does. The `_replicator`
/// database's scheduler will own its jobs through this type.
public final class ReplicationManager: @unchecked Sendable {
    public let serverUUID: String
    private let databases: DatabaseManager?
    /// Runs named filters on local sources.
    let functions: FunctionRuntime?
    private let clientConfiguration: HTTPClientConfiguration
    private let logger = Logger(label: "couchette.replication")
    private let lock = NSLock()
    private var jobs: [String: Replication] = [:]
    /// Cancelled jobs writing their last checkpoint, by base ID: a new job of the same
    /// replication waits for them, so that two never write the same checkpoint document.
    private var stopping: [String: Replication] = [:]
    private var sharedClient: HTTPClient?
    private var backoff = Backoff.job
    /// Back-off for restarting crashed jobs (tests shorten it); applies to jobs started after.
    public var jobBackoff: Backoff {
        get { lock.withLock { backoff } }
        set { lock.withLock { backoff = newValue } }
    }

    public init(serverUUID: String, databases: DatabaseManager?, functions: FunctionRuntime? = nil,
                clientConfiguration: HTTPClientConfiguration = ReplicationManager.defaultClientConfiguration) {
        self.serverUUID = serverUUID
        self.databases = databases
        self.functions = functions
        self.clientConfiguration = clientConfiguration
    }

    public static var defaultClientConfiguration: HTTPClientConfiguration {
        var configuration = HTTPClientConfiguration()
        // No limit per host: each continuous feed holds a connection for its life, and a
        // thousand jobs may feed from one peer. Each job limits its own requests instead
        // (`http_connections`). Idle connections kept: libcurl's own measure (four per transfer).
        configuration.maximumConnectionsPerHost = 0
        configuration.maximumCachedConnections = 0
        configuration.userAgent = "Couchette replicator"
        return configuration
    }

    deinit {
        sharedClient?.shutdown()
    }

    /// One HTTP client for every job: connections to a peer are shared and kept alive.
    var client: HTTPClient {
        lock.lock()
        defer { lock.unlock() }
        if let sharedClient { return sharedClient }
        let client = HTTPClient(configuration: clientConfiguration)
        sharedClient = client
        return client
    }

    // MARK: - Jobs

    /// The running jobs.
    public var replications: [Replication] {
        lock.lock()
        defer { lock.unlock() }
        return jobs.values.sorted { $0.id.jobID < $1.id.jobID }
    }

    /// A running job by its job ID (`base+continuous`, or only the base ID).
    public func replication(id: String) -> Replication? {
        lock.lock()
        defer { lock.unlock() }
        if let job = jobs[id.replacingOccurrences(of: " ", with: "+")] { return job }
        let base = ReplicationID.baseID(ofJobID: id)
        return jobs.values.first { $0.id.baseID == base }
    }

    /// Cancels a running job; nil if there is none with that ID. The job is forgotten at
    /// once (it leaves `_active_tasks`) and stops after a last checkpoint.
    @discardableResult
    public func cancel(id: String) -> Replication? {
        lock.lock()
        let base = ReplicationID.baseID(ofJobID: id)
        guard let job = jobs[id.replacingOccurrences(of: " ", with: "+")] ?? jobs.values.first(where: { $0.id.baseID == base }) else {
            lock.unlock()
            return nil
        }
        jobs[job.id.jobID] = nil
        stopping[job.id.baseID] = job
        lock.unlock()
        job.cancel()
        return job
    }

    /// Stops every job (the server is shutting down).
    public func stopAll() {
        replications.forEach { cancel(id: $0.id.jobID) }
    }

    /// The ID of a replication when it can be known without asking a remote peer (it
    /// cannot for a named filter of a remote source, whose code is part of the ID).
    public func knownReplicationID(for settings: ReplicationSettings) -> ReplicationID? {
        guard let function = settings.filter?.designFunction else {
            return ReplicationID(settings: settings, serverUUID: serverUUID, filterCode: nil)
        }
        guard case .local(let name) = settings.source, let databases,
              let database = try? databases.database(name),
              let body = try? database.document(function.designDocument).revision.body,
              let code = (try? JSONValue.parse(body))?["filters"]?[function.name]?.stringValue else { return nil }
        return ReplicationID(settings: settings, serverUUID: serverUUID, filterCode: code)
    }

    /// The ID of a replication, fetching a named filter's code from the source if needed.
    public func replicationID(for settings: ReplicationSettings) async throws(ReplicationError) -> ReplicationID {
        guard let function = settings.filter?.designFunction else {
            return ReplicationID(settings: settings, serverUUID: serverUUID, filterCode: nil)
        }
        let source = try endpoint(for: settings.source, settings: settings)
        let code = try await source.filterFunctionSource(designDocument: function.designDocument, name: function.name)
        return ReplicationID(settings: settings, serverUUID: serverUUID, filterCode: code)
    }

    /// Starts a replication, or returns the running job with the same ID.
    public func start(_ settings: ReplicationSettings) async throws(ReplicationError) -> Replication {
        let id = try await replicationID(for: settings)
        return try start(settings, id: id)
    }

    // MARK: - Transforms

    private var transforms: [String: DocumentTransform] = [:]

    /// Registers a Swift transform under `name`: replications that name it (`"transform"`)
    /// apply it to every document they write.
    public func registerTransform(_ name: String, _ transform: DocumentTransform) {
        lock.withLock { transforms[name] = transform }
    }

    /// The transform a replication names: a registered one, else `ddoc/name` of the design
    /// document of its local end (the source when local, else the target), run in that
    /// database's JavaScript workers.
    func resolveTransform(_ settings: ReplicationSettings) throws(ReplicationError) -> DocumentTransform? {
        if let transform = settings.transform { return transform }
        guard let name = settings.transformName else { return nil }
        if let registered = lock.withLock({ transforms[name] }) { return registered }
        let local = [settings.source, settings.target].lazy.compactMap { peer -> DatabaseName? in
            if case .local(let name) = peer { return name } else { return nil }
        }.first
        guard let local, let databases, let functions else {
            throw ReplicationError(.badRequest, "transform `\(name)` is not registered, and a JavaScript transform needs a local database")
        }
        let database: Database
        do {
            database = try databases.database(local)
        } catch {
            throw ReplicationError(.databaseNotFound, "could not open \(local.rawValue)")
        }
        let function = try functions.transform(name, in: database)
        return DocumentTransform(batch: { documents, direction in
            let texts = documents.map { document -> [UInt8] in
                var object: JSONObject = ["_id": JSONValue(document.id.rawValue)]
                for (key, value) in document.body { object[key] = value }
                return JSONValue.object(object).serialized()
            }
            return function.apply(texts, direction: direction.rawValue).map { result in
                result.map { document in document.filter { !$0.key.hasBytePrefix("_") } }
            }
        })
    }

    /// Starts a replication whose ID is known.
    public func start(_ settings: ReplicationSettings, id: ReplicationID) throws(ReplicationError) -> Replication {
        var settings = settings
        settings.transform = try resolveTransform(settings)
        let source = try endpoint(for: settings.source, settings: settings)
        let target = try endpoint(for: settings.target, settings: settings)
        lock.lock()
        if let running = jobs[id.jobID] {
            lock.unlock()
            return running
        }
        let job = Replication(id: id, settings: settings, source: source, target: target, backoff: backoff,
                              logger: logger)
        let watches = watchDeletion(of: settings, failing: job)
        job.onFinish = { [weak self] finished in
            watches.forEach { $0.database.notifier.remove($0.token) }
            self?.forget(finished)
        }
        jobs[id.jobID] = job
        let previous = stopping[id.baseID]
        lock.unlock()
        if let previous {
            previous.whenFinished { _ in job.start() }
        } else {
            job.start()
        }
        return job
    }

    /// A job whose local source or target is deleted meets CouchDB's `db_not_found` at once
    /// (rather than wait forever on the deleted file, holding it open): it fails, or, when it
    /// retries such failures, stops its session and tries again later.
    private func watchDeletion(of settings: ReplicationSettings, failing job: Replication) -> [(database: Database, token: Int)] {
        guard let databases else { return [] }
        return [settings.source, settings.target].compactMap { peer -> (database: Database, token: Int)? in
            guard case .local(let name) = peer, let database = try? databases.database(name) else { return nil }
            let token = database.notifier.observe { [weak job] event in
                guard case .databaseDeleted = event else { return }
                job?.fail(ReplicationError(.databaseNotFound, "could not open \(name.rawValue)"))
            }
            return (database, token)
        }
    }

    private func forget(_ job: Replication) {
        lock.lock()
        if jobs[job.id.jobID] === job { jobs[job.id.jobID] = nil }
        if stopping[job.id.baseID] === job { stopping[job.id.baseID] = nil }
        lock.unlock()
    }

    /// The endpoint for one end of a replication.
    public func endpoint(for peer: ReplicationPeer, settings: ReplicationSettings) throws(ReplicationError) -> DatabaseEndpoint {
        switch peer {
        case .local(let name):
            guard let databases else {
                throw ReplicationError(.badRequest, "`\(name.rawValue)` is not a URL and there are no local databases here")
            }
            return LocalEndpoint(name: name, databases: databases, functions: functions)
        case .remote(let remote):
            // CouchDB's `connection_timeout` is its HTTP client's inactivity timeout.
            let inactivity = (settings.connectionTimeoutMilliseconds + 999) / 1000
            return RemoteEndpoint(peer: remote, client: client, retries: settings.retriesPerRequest,
                                  inactivityTimeoutSeconds: inactivity, connections: settings.httpConnections, logger: logger)
        }
    }
}

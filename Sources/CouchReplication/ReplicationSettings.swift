import CouchCore

/// A replication as `POST /_replicate` (and, later, a `_replicator` document) describes
/// it, read and checked once, with CouchDB's defaults and error reasons.
public struct ReplicationSettings: Sendable {
    public var source: ReplicationPeer
    public var target: ReplicationPeer
    public var continuous = false
    public var createTarget = false
    /// `create_target_params`: query parameters of the `PUT` that creates a remote target.
    public var createTargetParameters = JSONObject()
    public var filter: ReplicationFilter?
    /// `since_seq`: start here instead of at the checkpoint.
    public var sinceSequence: SourceSequence?
    public var useCheckpoints = true
    public var checkpointIntervalMilliseconds = 30_000
    /// Changes handed to a worker at once.
    public var workerBatchSize = 500
    /// Workers processing batches concurrently (each finds, fetches and writes its batch).
    public var workerCount = 4
    /// Connections kept open to each remote peer at most.
    public var httpConnections = 20
    public var connectionTimeoutMilliseconds = 30_000
    public var retriesPerRequest = 5
    /// Copy only each document's winning revision (`style=main_only`).
    public var winningRevisionsOnly = false
    /// Rewrites each document body on its way: set directly by an embedding application, or
    /// resolved when the job starts from `transformName`.
    public var transform: DocumentTransform?
    /// `"transform"`: a registered Swift transform's name, or `ddoc/name` of a JavaScript one in
    /// the local database's design document (see `DocumentTransform`).
    public var transformName: String?
    /// Couchette's `"attachments": "on_demand"`: a pull into a local database keeps the
    /// attachment stubs and leaves the bodies on the source, fetched when first read.
    public var attachmentsOnDemand = false
    /// A `_replicator` document's job: retried even when its peers cannot be reached at
    /// the start (nobody waits on it), where a one-shot `_replicate` fails.
    public var isPersistent = false

    public init(source: ReplicationPeer, target: ReplicationPeer) {
        self.source = source
        self.target = target
    }

    /// What a `_replicate` body asks for: start a replication, or cancel one.
    public enum Request: Sendable {
        case start(ReplicationSettings)
        /// `{"replication_id": ..., "cancel": true}`
        case cancelByID(String)
        /// `{... same body ..., "cancel": true}`
        case cancel(ReplicationSettings)
    }

    /// Reads a `_replicate` body.
    public static func request(from body: JSONObject) throws(ReplicationError) -> Request {
        let cancel = try flag(body, "cancel") ?? false
        if cancel, let id = body["replication_id"] {
            guard let text = id.stringValue else { throw .badRequest("`replication_id` must be a string") }
            return .cancelByID(text)
        }
        let settings = try ReplicationSettings(json: body)
        return cancel ? .cancel(settings) : .start(settings)
    }

    public init(json body: JSONObject) throws(ReplicationError) {
        guard let sourceValue = body["source"] else { throw .badRequest("Missing `source` field") }
        guard let targetValue = body["target"] else { throw .badRequest("Missing `target` field") }
        self.init(source: try ReplicationPeer(json: sourceValue, role: "source"),
                  target: try ReplicationPeer(json: targetValue, role: "target"))
        continuous = try Self.flag(body, "continuous") ?? false
        createTarget = try Self.flag(body, "create_target") ?? false
        if let parameters = body["create_target_params"] {
            guard let object = parameters.objectValue else { throw .badRequest("`create_target_params` must be a JSON object") }
            createTargetParameters = object
        }
        useCheckpoints = try Self.flag(body, "use_checkpoints") ?? true
        winningRevisionsOnly = try Self.flag(body, "winning_revs_only") ?? false
        checkpointIntervalMilliseconds = try Self.positiveInteger(body, "checkpoint_interval", maximum: Self.maximumMilliseconds)
            ?? checkpointIntervalMilliseconds
        workerBatchSize = try Self.positiveInteger(body, "worker_batch_size", maximum: Self.maximumWorkerBatchSize) ?? workerBatchSize
        workerCount = try Self.positiveInteger(body, "worker_processes", maximum: Self.maximumWorkerCount) ?? workerCount
        httpConnections = try Self.positiveInteger(body, "http_connections", maximum: Self.maximumHTTPConnections) ?? httpConnections
        connectionTimeoutMilliseconds = try Self.positiveInteger(body, "connection_timeout", maximum: Self.maximumMilliseconds)
            ?? connectionTimeoutMilliseconds
        if let retries = body["retries_per_request"] {
            guard let count = retries.intValue, count >= 0, count <= Self.maximumRetries else {
                throw .badRequest("`retries_per_request` must be an integer between 0 and \(Self.maximumRetries)")
            }
            retriesPerRequest = count
        }
        if let since = body["since_seq"], !since.isNull { sinceSequence = SourceSequence(since) }
        filter = try Self.filter(body)
        if let transform = body["transform"], !transform.isNull {
            guard let name = transform.stringValue, !name.isEmpty else {
                throw .badRequest("`transform` must name a registered transform or a design document's, `ddocname/transformname`")
            }
            transformName = name
        }
        if let attachments = body["attachments"], !attachments.isNull {
            switch attachments.stringValue {
            case "all": attachmentsOnDemand = false
            case "on_demand": attachmentsOnDemand = true
            default: throw .badRequest("`attachments` must be \"all\" or \"on_demand\"")
            }
        }
    }

    private static func filter(_ body: JSONObject) throws(ReplicationError) -> ReplicationFilter? {
        let given = ["doc_ids", "filter", "selector"].filter { body[$0] != nil && body[$0]?.isNull == false }
        guard given.count <= 1 else { throw .badRequest("`doc_ids`, `filter`, `selector` are mutually exclusive") }
        if let ids = body["doc_ids"], !ids.isNull {
            guard let list = ids.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw .badRequest("`doc_ids` must be an array of strings")
            }
            // CouchDB unquotes each ID (`couch_httpd:unquote`): "_design%2Ffoo" names "_design/foo".
            return .documentIDs(list.compactMap { $0.stringValue.map { PercentDecoding.decodeLeniently($0[...], plusIsSpace: true) } })
        }
        if let selector = body["selector"], !selector.isNull {
            guard selector.objectValue != nil else { throw .badRequest("`selector` must be a JSON object") }
            do {
                _ = try MangoSelector(selector)
            } catch {
                throw .badRequest("Invalid selector: \(error.reason)")
            }
            return .selector(selector)
        }
        if let name = body["filter"], !name.isNull {
            guard let text = name.stringValue, !text.isEmpty else { throw .badRequest("`filter` must be a string") }
            var parameters = JSONObject()
            if let query = body["query_params"], !query.isNull {
                guard let object = query.objectValue else { throw .badRequest("`query_params` must be an object") }
                parameters = object
            }
            if !text.hasBytePrefix("_") && !text.contains("/") {
                throw .badRequest("Invalid filter. Must match `ddocname/filtername` or `filtername`.")
            }
            return .named(text, queryParameters: parameters)
        }
        return nil
    }

    private static func flag(_ body: JSONObject, _ name: String) throws(ReplicationError) -> Bool? {
        guard let value = body[name], !value.isNull else { return nil }
        guard let flag = value.boolValue else { throw .badRequest("`\(name)` must be a boolean") }
        return flag
    }

    // Ranges of the numeric settings. A client's number sizes queues, task counts and
    // timers, so each is bounded where it is read: nothing downstream may overflow or
    // allocate without limit. Durations stop at Erlang's timer limit (2^32 - 1 ms), the
    // largest CouchDB itself can wait; counts at values far above any useful setting.
    public static let maximumMilliseconds = 4_294_967_295
    public static let maximumWorkerBatchSize = 100_000
    public static let maximumWorkerCount = 128
    public static let maximumHTTPConnections = 1_000
    public static let maximumRetries = 1_000

    private static func positiveInteger(_ body: JSONObject, _ name: String, maximum: Int) throws(ReplicationError) -> Int? {
        guard let value = body[name], !value.isNull else { return nil }
        guard let number = value.intValue ?? value.stringValue.flatMap({ Int($0) }), number > 0, number <= maximum else {
            throw .badRequest("`\(name)` must be a positive integer of at most \(maximum)")
        }
        return number
    }
}

import CouchCore

/// What the replicator databases' documents say to others: `_scheduler/docs`, the remotes
/// of on-demand attachment pulls, a push job's pending documents.
extension ReplicatorDatabase {
    // MARK: - Attachments on demand and pending documents

    /// The remotes whose pulls into `database` left attachment bodies behind
    /// (`"attachments": "on_demand"`), as their documents describe them now.
    public func onDemandSources(for database: DatabaseName) -> [RemotePeer] {
        lock.withLock {
            documents.keys.sorted().compactMap { key -> RemotePeer? in
                guard let state = documents[key], let settings = state.settings, settings.attachmentsOnDemand else { return nil }
                switch (settings.source, settings.target) {
                case (.remote(let remote), .local(let name)) where name == database: return remote
                case (.local(let name), .remote(let remote)) where name == database && state.syncSource == name: return remote
                default: return nil
                }
            }
        }
    }

    /// The documents the push job of replicator document `id` has not copied yet (see
    /// `PendingDocuments`); nil when there is no such document or job yet.
    public func pendingDocumentIDs(database: DatabaseName, id: DocumentID) throws(CouchError) -> (since: JSONValue, ids: [String])? {
        guard let settings = lock.withLock({ documents[Key(database: database, id: id)]?.settings }) else { return nil }
        return try PendingDocuments.of(settings, manager: scheduler.manager, databases: databases)
    }

    // MARK: - Reporting

    /// `_scheduler/docs` entries of one replicator database (or all), sorted by document ID.
    public func documentsJSON(database: DatabaseName?) -> [JSONValue] {
        let entries = lock.withLock { documents.filter { database == nil || $0.key.database == database } }
        return entries.sorted { $0.key < $1.key }.map { json($0.key, $0.value) }
    }

    /// One `_scheduler/docs/{db}/{docid}` entry, or nil.
    public func documentJSON(database: DatabaseName, id: DocumentID) -> JSONValue? {
        let key = Key(database: database, id: id)
        guard let state = lock.withLock({ documents[key] }) else { return nil }
        return json(key, state)
    }

    private func json(_ key: Key, _ document: DocumentState) -> JSONValue {
        var state = document.state
        var info = document.info
        var errorCount = document.state == "failed" || document.state == "error" ? 1 : 0
        var startTime = document.startTime
        var lastUpdated = document.lastUpdated
        if let jobID = document.jobID ?? document.pairJobID, let job = scheduler.documentStatus(jobID: jobID) {
            (state, info, errorCount, startTime, lastUpdated) = (job.state, job.info, job.errorCount, job.startTime, job.lastUpdated)
        }
        if let pairID = document.pairJobID, let pairJob = scheduler.documentStatus(jobID: pairID), pairJob.state == "crashing" {
            (state, info, errorCount) = (pairJob.state, pairJob.info, pairJob.errorCount)
        }
        let running = state != "completed" && state != "failed"
        var entry: JSONObject = [
            "database": JSONValue(key.database.rawValue),
            "doc_id": JSONValue(key.id.rawValue),
            "id": running ? document.jobID.map { JSONValue($0) } ?? .null : .null,
            "node": JSONValue(scheduler.nodeName),
            "source": document.source.map { JSONValue($0) } ?? .null,
            "target": document.target.map { JSONValue($0) } ?? .null,
            "state": JSONValue(state),
            "info": info,
            "error_count": JSONValue(errorCount),
            "start_time": JSONValue(ISO8601.string(startTime)),
            "last_updated": JSONValue(ISO8601.string(lastUpdated)),
            "source_proxy": .null,
            "target_proxy": .null,
        ]
        // Couchette's sync pairs: the pull job beside the push (`id`).
        if document.settings != nil, document.syncSource != nil || document.pairJobID != nil {
            entry["pair_id"] = running ? document.pairJobID.map { JSONValue($0) } ?? .null : .null
        }
        return .object(entry)
    }
}

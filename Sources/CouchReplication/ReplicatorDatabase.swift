import CouchCore
import CouchStore
import Foundation
import Logging

/// Watches every replicator database (`_replicator`, created at the first start, and any
/// `*/_replicator`): each document is parsed into the `ReplicationSettings` that
/// `POST /_replicate` produces and handed to the scheduler as a job; updating the
/// document's definition restarts the job, deleting it stops the job. As CouchDB 3 does,
/// the outcome is written back into the document (`_replication_state` `completed` with
/// `_replication_stats`, or `failed` with `_replication_state_reason`), and documents in
/// either state are left alone — so after a restart unfinished jobs start again (from
/// their checkpoints) and completed ones stay completed.
public final class ReplicatorDatabase: @unchecked Sendable {
    /// What `_scheduler/docs` reports of a document with no running job.
    struct DocumentState {
        var jobID: String?
        var definition: String
        /// `initializing`, `completed`, `failed`, `error` when no job runs it.
        var state: String
        var info: JSONValue = .null
        var source: String?
        var target: String?
        var startTime = Date()
        var lastUpdated = Date()
        /// What the document describes, once parsed (for pending documents).
        var settings: ReplicationSettings?
        /// A sync pair's pull job (target → source), beside `jobID`'s push.
        var pairJobID: String?
        /// The document's sequence in its database: later exclusive pairs retire earlier ones.
        var sequence = 0
        /// For a sync pair: its local database and remote, and whether it is exclusive.
        var syncSource: DatabaseName?
        var syncTarget: String?
        var exclusive = false

        var jobIDs: [String] { [jobID, pairJobID].compactMap { $0 } }
    }

    struct Key: Hashable, Comparable {
        let database: DatabaseName
        let id: DocumentID
        static func < (a: Key, b: Key) -> Bool {
            a.database == b.database ? a.id.rawValue < b.id.rawValue : a.database < b.database
        }
    }

    public static let defaultName = try! DatabaseName("_replicator")

    let databases: DatabaseManager
    let scheduler: ReplicationScheduler
    private let logger = Logger(label: "couchette.replicator")
    let lock = NSLock()
    var documents: [Key: DocumentState] = [:]
    /// Watched databases: the notifier token and the last sequence processed.
    private var watched: [DatabaseName: (database: Database, token: Int, sequence: Int)] = [:]
    private var scanning: Set<DatabaseName> = []
    private var rescan: Set<DatabaseName> = []
    private var stopped = false

    public init(databases: DatabaseManager, scheduler: ReplicationScheduler) {
        self.databases = databases
        self.scheduler = scheduler
    }

    /// Creates `_replicator` if missing, then watches every replicator database, now and
    /// as they are created.
    public func start() {
        if !databases.exists(Self.defaultName) { _ = try? databases.create(Self.defaultName) }
        databases.observeCreations { [weak self] database in
            if database.name.isReplicator { self?.watch(database) }
        }
        for name in (try? databases.allNames()) ?? [Self.defaultName] where name.isReplicator {
            if let database = try? databases.database(name) { watch(database) }
        }
    }

    /// Stops watching (the scheduler stops the jobs).
    public func stop() {
        lock.lock()
        stopped = true
        let all = watched.values
        watched = [:]
        lock.unlock()
        all.forEach { $0.database.notifier.remove($0.token) }
    }

    private func watch(_ database: Database) {
        let name = database.name
        let token = database.notifier.observe { [weak self] event in
            switch event {
            case .committed: self?.scan(name)
            case .databaseDeleted: self?.forget(database: name)
            }
        }
        lock.lock()
        if stopped || watched[name] != nil {
            lock.unlock()
            database.notifier.remove(token)
            return
        }
        watched[name] = (database, token, 0)
        lock.unlock()
        scan(name)
    }

    private func forget(database name: DatabaseName) {
        lock.lock()
        if let entry = watched.removeValue(forKey: name) { entry.database.notifier.remove(entry.token) }
        let keys = documents.keys.filter { $0.database == name }
        let jobs = keys.flatMap { documents.removeValue(forKey: $0)?.jobIDs ?? [] }
        lock.unlock()
        jobs.forEach { scheduler.remove(jobID: $0) }
    }

    /// Reads the database's changes since the last scan, off the committing thread; one
    /// scan at a time per database (a commit during a scan asks for another).
    private func scan(_ name: DatabaseName) {
        lock.lock()
        guard !stopped, watched[name] != nil else {
            lock.unlock()
            return
        }
        if scanning.contains(name) {
            rescan.insert(name)
            lock.unlock()
            return
        }
        scanning.insert(name)
        lock.unlock()
        ReplicationTasks.task { [weak self] in
            while let self {
                self.processChanges(of: name)
                let again = self.lock.withLock { () -> Bool in
                    if self.rescan.remove(name) != nil { return true }
                    self.scanning.remove(name)
                    return false
                }
                if !again { return }
            }
        }
    }

    private func processChanges(of name: DatabaseName) {
        guard let (database, since) = lock.withLock({ watched[name].map { ($0.database, $0.sequence) } }) else { return }
        let rows: [ChangeRow]
        do {
            rows = try database.changes(ChangesQuery(since: since, includeBodies: true))
        } catch {
            logger.error("cannot read the changes of \(name): \(error)")
            return
        }
        var documents: [(key: Key, body: JSONObject, sequence: Int)] = []
        for row in rows where !row.id.isDesign && !row.id.isLocal {
            let key = Key(database: name, id: row.id)
            if row.isDeleted {
                removeDocument(key)
            } else if let body = row.body, let object = (try? JSONValue.parse(body))?.objectValue {
                documents.append((key, object, row.sequence))
            }
        }
        // Exclusive pairs first: an earlier pair they retire (by sequence) must never start,
        // not even for a moment, as at a restart it would otherwise start before its retirer is read.
        let exclusiveFirst = documents.filter { $0.body["exclusive"]?.boolValue == true }
            + documents.filter { $0.body["exclusive"]?.boolValue != true }
        for document in exclusiveFirst { process(document.key, body: document.body, sequence: document.sequence) }
        if let last = rows.last {
            lock.withLock { watched[name]?.sequence = last.sequence }
        }
    }

    private func removeDocument(_ key: Key) {
        let jobIDs = lock.withLock { documents.removeValue(forKey: key)?.jobIDs ?? [] }
        jobIDs.forEach { scheduler.remove(jobID: $0) }
    }

    /// A new or updated document: ignored when it is in a final state or its definition
    /// did not change (the replicator's own write-back), else its job (re)starts.
    private func process(_ key: Key, body: JSONObject, sequence: Int) {
        let definition = ReplicationDocument.definition(body)
        let written = body["_replication_state"]?.stringValue
        lock.lock()
        let previous = documents[key]
        if let previous, previous.definition == definition, written != "completed", written != "failed" {
            lock.unlock()
            return
        }
        lock.unlock()
        let suspended = body["suspended"]?.boolValue == true
        previous?.jobIDs.forEach { scheduler.remove(jobID: $0, suspended: suspended) }

        var state = DocumentState(jobID: nil, definition: definition, state: "initializing")
        state.sequence = sequence
        state.source = body["source"].map(Self.displayName)
        state.target = body["target"].map(Self.displayName)
        if written == "completed" || written == "failed" {
            state.state = written!
            state.info = written == "completed"
                ? (body["_replication_stats"] ?? .null)
                : ["error": body["_replication_state_reason"] ?? .null]
            state.settings = try? ReplicationDocument.settings(body)
            // An exclusive pair retires the earlier pairs whatever became of it, across restarts too.
            if let settings = state.settings { Self.notePairing(body, settings, in: &state) }
            if written == "completed", let interval = Self.interval(body) {
                scheduleRun(key, body: body, definition: definition, interval: interval, state: &state)
            }
            lock.withLock { documents[key] = state }
            if state.exclusive { retireOtherPairs(key, state) }
            return
        }
        run(key, body: body, definition: definition, state: state)
    }

    /// Couchette's `interval` (seconds): a one-shot replication that runs again that long
    /// after it completed, also across restarts (counted from `_replication_state_time`).
    /// At most ten years: a longer wait cannot be slept (nor meant).
    static let longestInterval: Double = 315_360_000

    static func interval(_ body: JSONObject) -> Double? {
        guard body["continuous"]?.boolValue != true, let seconds = body["interval"]?.doubleValue,
              seconds > 0, seconds <= longestInterval else { return nil }
        return seconds
    }

    private func scheduleRun(_ key: Key, body: JSONObject, definition: String, interval: Double,
                             state: inout DocumentState) {
        let completedAt = body["_replication_state_time"]?.stringValue.flatMap(ISO8601.date) ?? Date()
        let next = max(Date(), completedAt.addingTimeInterval(interval))
        if case .object(var info) = state.info {
            info["next_run"] = JSONValue(ISO8601.string(next))
            state.info = .object(info)
        } else {
            state.info = ["next_run": JSONValue(ISO8601.string(next))]
        }
        let delay = UInt64(max(0, next.timeIntervalSinceNow) * 1_000_000_000)
        ReplicationTasks.task { [weak self] in
            try? await Task.sleep(nanoseconds: delay)
            guard let self else { return }
            let due = self.lock.withLock { () -> Bool in
                guard !self.stopped, let current = self.documents[key] else { return false }
                return current.definition == definition && current.jobIDs.isEmpty && current.state == "completed"
            }
            if due {
                var state = DocumentState(jobID: nil, definition: definition, state: "initializing")
                state.sequence = self.lock.withLock { self.documents[key]?.sequence ?? 0 }
                state.source = body["source"].map(Self.displayName)
                state.target = body["target"].map(Self.displayName)
                self.run(key, body: body, definition: definition, state: state)
            }
        }
    }

    private func run(_ key: Key, body: JSONObject, definition: String, state: DocumentState) {
        var state = state
        let settings: ReplicationSettings
        do {
            settings = try ReplicationDocument.settings(body)
        } catch {
            state.state = "failed"
            state.info = ["error": JSONValue(error.reason)]
            lock.withLock { documents[key] = state }
            writeBack(key, state: "failed", reason: error.reason, stats: nil)
            return
        }
        state.source = settings.source.displayName
        state.target = settings.target.displayName
        state.settings = settings
        // Couchette's `suspended`: the job waits, its checkpoint kept, until the field is cleared.
        if body["suspended"]?.boolValue == true {
            state.state = "suspended"
            lock.withLock { documents[key] = state }
            return
        }
        // Couchette's sync pairs: `sync` adds the pull (target → source) to the push.
        var pair: ReplicationSettings?
        if body["sync"]?.boolValue == true {
            var reverse = settings
            (reverse.source, reverse.target) = (settings.target, settings.source)
            reverse.createTarget = false
            pair = reverse
            Self.notePairing(body, settings, in: &state)
        }
        if retiredByExclusivePair(key, state) {
            state.state = "retired"
            lock.withLock { documents[key] = state }
            return
        }
        lock.withLock { documents[key] = state }
        if state.exclusive { retireOtherPairs(key, state) }
        ReplicationTasks.task { [weak self] in
            guard let self else { return }
            do {
                let id = try await self.scheduler.manager.replicationID(for: settings)
                var pairJob: (ReplicationSettings, ReplicationID)?
                if let pair {
                    pairJob = (pair, try await self.scheduler.manager.replicationID(for: pair))
                    // The pull reads what the push may have to create: create it first.
                    if settings.createTarget {
                        let target = try self.scheduler.manager.endpoint(for: settings.target, settings: settings)
                        _ = try? await target.open(create: true, createParameters: settings.createTargetParameters)
                    }
                }
                self.startJob(key, definition: definition, settings: settings, id: id, pair: pairJob)
            } catch {
                // A filter that cannot be fetched yet: CouchDB's `error` state, retried later.
                self.lock.withLock {
                    if self.documents[key]?.definition == definition {
                        self.documents[key]?.state = "error"
                        self.documents[key]?.info = ["error": JSONValue((error as? CouchError)?.description ?? String(describing: error))]
                    }
                }
            }
        }
    }

    /// A sync pair of a local database: which database, with which remote, and whether exclusive.
    private static func notePairing(_ body: JSONObject, _ settings: ReplicationSettings, in state: inout DocumentState) {
        guard body["sync"]?.boolValue == true, case .local(let name) = settings.source else { return }
        state.syncSource = name
        state.syncTarget = settings.target.displayName
        state.exclusive = body["exclusive"]?.boolValue == true
    }

    /// A sync pair written before an exclusive pair of the same local database to another
    /// remote is retired (its jobs do not run), as `replicateWithURL:exclusively:` did.
    private func retiredByExclusivePair(_ key: Key, _ state: DocumentState) -> Bool {
        guard let source = state.syncSource else { return false }
        return lock.withLock {
            documents.contains { other in
                other.key != key && other.key.database == key.database && other.value.exclusive
                    && other.value.syncSource == source && other.value.syncTarget != state.syncTarget
                    && other.value.sequence > state.sequence && other.value.state != "retired"
            }
        }
    }

    private func retireOtherPairs(_ key: Key, _ state: DocumentState) {
        let jobIDs = lock.withLock { () -> [String] in
            var stopped: [String] = []
            for (other, document) in documents where other != key && other.database == key.database
                && document.syncSource == state.syncSource && document.syncTarget != state.syncTarget
                && document.sequence < state.sequence && document.state != "retired" {
                stopped += document.jobIDs
                documents[other]?.jobID = nil
                documents[other]?.pairJobID = nil
                documents[other]?.state = "retired"
                documents[other]?.lastUpdated = Date()
            }
            return stopped
        }
        jobIDs.forEach { scheduler.remove(jobID: $0) }
    }

    private func startJob(_ key: Key, definition: String, settings: ReplicationSettings, id: ReplicationID,
                          pair: (settings: ReplicationSettings, id: ReplicationID)? = nil) {
        lock.lock()
        guard documents[key]?.definition == definition, documents[key]?.state != "retired" else {
            lock.unlock()
            return
        }
        documents[key]?.jobID = id.jobID
        documents[key]?.pairJobID = pair?.id.jobID
        lock.unlock()
        let origin = ReplicationScheduler.Origin.document(database: key.database, id: key.id)
        scheduler.add(settings, id: id, origin: origin) { [weak self] outcome in
            self?.jobFinished(key, jobID: id.jobID, outcome: outcome)
        }
        if let pair {
            scheduler.add(pair.settings, id: pair.id, origin: origin) { [weak self] outcome in
                self?.jobFinished(key, jobID: pair.id.jobID, outcome: outcome)
            }
        }
    }

    private func jobFinished(_ key: Key, jobID: String, outcome: Replication.Outcome) {
        var others: [String] = []
        let stillOurs = lock.withLock { () -> Bool in
            guard let document = documents[key], document.jobIDs.contains(jobID) else { return false }
            if document.jobID == jobID { documents[key]?.jobID = nil } else { documents[key]?.pairJobID = nil }
            others = documents[key]?.jobIDs ?? []
            // One half of a sync pair completed: the document completes with the other.
            if case .completed = outcome, !others.isEmpty { return false }
            documents[key]?.jobID = nil
            documents[key]?.pairJobID = nil
            documents[key]?.lastUpdated = Date()
            switch outcome {
            case .completed(let log):
                documents[key]?.state = "completed"
                documents[key]?.info = Self.stats(log)
            case .failed(let error):
                documents[key]?.state = "failed"
                documents[key]?.info = ["error": JSONValue(error.description)]
            case .cancelled:
                break
            }
            return true
        }
        guard stillOurs else { return }
        others.forEach { scheduler.remove(jobID: $0) }
        switch outcome {
        case .completed(let log): writeBack(key, state: "completed", reason: nil, stats: Self.stats(log))
        case .failed(let error): writeBack(key, state: "failed", reason: error.description, stats: nil)
        case .cancelled: break
        }
    }

    /// The statistics of a finished one-shot job, from its last checkpoint's history entry.
    static func stats(_ log: JSONObject) -> JSONValue {
        let entry = log["history"]?.arrayValue?.first?.objectValue ?? [:]
        var stats = JSONObject()
        for name in ["revisions_checked", "missing_revisions_found", "docs_read", "docs_written",
                     "doc_write_failures", "bulk_get_attempts", "bulk_get_docs"] {
            let source = ["revisions_checked": "missing_checked", "missing_revisions_found": "missing_found"][name] ?? name
            stats[name] = entry[source] ?? 0
        }
        stats["checkpointed_source_seq"] = log["source_last_seq"] ?? 0
        stats["start_time"] = entry["start_time"] ?? .null
        return .object(stats)
    }

    /// Writes the outcome into the document (CouchDB's `update_rep_doc`): retried on a
    /// conflict with a concurrent edit; a deleted document is left alone.
    private func writeBack(_ key: Key, state: String, reason: String?, stats: JSONValue?) {
        guard let database = try? databases.database(key.database) else { return }
        for _ in 0..<5 {
            guard let snapshot = try? database.document(key.id),
                  var body = (try? JSONValue.parse(snapshot.revision.body))?.objectValue else { return }
            if body["_replication_state"]?.stringValue != state || Self.interval(body) != nil {
                body["_replication_state"] = JSONValue(state)
                body["_replication_state_time"] = JSONValue(ISO8601.string(Date()))
            }
            if let reason { body["_replication_state_reason"] = JSONValue(reason) } else { body["_replication_state_reason"] = nil }
            if let stats { body["_replication_stats"] = stats } else { body["_replication_stats"] = nil }
            let edit = DocumentEdit(id: key.id, revision: snapshot.record.winner, body: body)
            do {
                _ = try database.update(edit, keeping: snapshot.revision.attachments)
                return
            } catch let error as CouchError where error.kind == .conflict {
                continue
            } catch {
                logger.error("cannot write the state of \(key.database)/\(key.id.rawValue): \(error)")
                return
            }
        }
    }

    private static func displayName(_ value: JSONValue) -> String {
        if let peer = try? ReplicationPeer(json: value, role: "source") { return peer.displayName }
        return value.stringValue ?? ""
    }
}

import CouchCore
import CouchStore
import Foundation

/// What the scheduler knows of one job: its definition, where it came from, its history
/// of events, and its run (`Replication`) while it has one. Guarded by the scheduler's lock.
final class ScheduledJob: @unchecked Sendable {
    struct Event: Sendable {
        /// CouchDB's event types: `added`, `started`, `stopped`, `crashed`.
        let type: String
        let time: Date
        let reason: String?
    }

    /// The node running it (`ReplicationScheduler.nodeName`).
    let node: String
    let id: ReplicationID
    let settings: ReplicationSettings
    let origin: ReplicationScheduler.Origin
    let sourceName: String
    let targetName: String
    let addedOn = Date()
    var startedOn: Date?
    /// When it last started, or began waiting: the scheduler's order.
    var since = Date()
    var history: [Event] = []
    var run: Replication?
    /// Called once with the run's outcome, when it ends by itself (completed or failed).
    let onFinish: @Sendable (Replication.Outcome) -> Void

    static let maximumHistory = 20

    init(node: String, id: ReplicationID, settings: ReplicationSettings, origin: ReplicationScheduler.Origin,
         sourceName: String, targetName: String, onFinish: @escaping @Sendable (Replication.Outcome) -> Void) {
        self.node = node
        self.id = id
        self.settings = settings
        self.origin = origin
        self.sourceName = sourceName
        self.targetName = targetName
        self.onFinish = onFinish
        record("added")
    }

    func record(_ type: String, reason: String? = nil) {
        history.insert(Event(type: type, time: Date(), reason: reason), at: 0)
        if history.count > Self.maximumHistory { history.removeLast(history.count - Self.maximumHistory) }
    }

    /// CouchDB's state of a job: `pending` (waiting for a slot), `running`, `crashing`
    /// (failed; restarts after a back-off).
    var state: String {
        guard let run else { return "pending" }
        switch run.status.state {
        case .offline, .crashing: return "crashing"
        case .active, .idle, .stopped: return "running"
        }
    }

    /// `info`: the statistics while running or waiting, `{"error": ...}` while crashing.
    var info: JSONValue {
        guard let status = run?.status else { return .null }
        if state == "crashing", let error = status.lastError { return ["error": JSONValue(error.description)] }
        return Self.info(status)
    }

    static func info(_ status: ReplicationStatus) -> JSONValue {
        [
            "revisions_checked": JSONValue(status.statistics.missingChecked),
            "missing_revisions_found": JSONValue(status.statistics.missingFound),
            "docs_read": JSONValue(status.statistics.docsRead),
            "docs_written": JSONValue(status.statistics.docsWritten),
            "bulk_get_attempts": JSONValue(status.statistics.bulkGetAttempts),
            "bulk_get_docs": JSONValue(status.statistics.bulkGetDocs),
            "changes_pending": status.changesPending.map { JSONValue($0) } ?? .null,
            "doc_write_failures": JSONValue(status.statistics.docWriteFailures),
            "checkpointed_source_seq": status.checkpointedSourceSequence?.json ?? 0,
            "source_seq": status.sourceSequence?.json ?? 0,
            "through_seq": status.throughSequence?.json ?? 0,
        ]
    }

    /// The scheduler's `error_count`: sessions failed in a row, and at least one while the job
    /// shows `crashing` (its status turns so at a request's first failure, before the session
    /// fails): a job is never shown crashing with no error.
    var errorCount: Int {
        guard let run else { return 0 }
        return max(run.consecutiveFailures, state == "crashing" ? 1 : 0)
    }

    var documentDatabase: JSONValue {
        if case .document(let database, _) = origin { return JSONValue(database.rawValue) }
        return .null
    }

    var documentID: JSONValue {
        if case .document(_, let id) = origin { return JSONValue(id.rawValue) }
        return .null
    }

    /// An entry of `GET /_scheduler/jobs`.
    var json: JSONValue {
        let events = history.map { event -> JSONValue in
            var entry: JSONObject = ["timestamp": JSONValue(ISO8601.string(event.time)), "type": JSONValue(event.type)]
            if let reason = event.reason { entry["reason"] = JSONValue(reason) }
            return .object(entry)
        }
        return [
            "id": JSONValue(id.jobID),
            "pid": run == nil ? .null : JSONValue("<0.\(abs(ObjectIdentifier(run!).hashValue % 100_000)).0>"),
            "source": JSONValue(sourceName),
            "target": JSONValue(targetName),
            "database": documentDatabase,
            "user": .null,
            "doc_id": documentID,
            "info": info,
            "history": .array(events),
            "node": JSONValue(node),
            "start_time": JSONValue(ISO8601.string(startedOn ?? addedOn)),
        ]
    }
}

extension ScheduledJob {
    /// A live event (`_scheduler/jobs?feed=...`): the job as `_scheduler/jobs` shows it, its
    /// CouchDB `state`, and in the mobile libraries' words its `status` (`stopped`,
    /// `offline`, `idle`, `active`), `completed` and `total` changes and `last_error`.
    var event: JSONObject {
        var event = json.objectValue ?? [:]
        event["state"] = JSONValue(state)
        let status = run?.status
        event["status"] = JSONValue(status?.state.rawValue ?? "stopped")
        event["completed"] = JSONValue(status?.completed ?? 0)
        event["total"] = JSONValue(status?.total ?? 0)
        event["last_error"] = status?.lastError?.json ?? .null
        return event
    }
}

/// CouchDB's timestamps in `_scheduler` (`2017-04-29T05:01:37Z`).
enum ISO8601 {
    static func string(_ date: Date) -> String {
        Timestamp.iso8601(Int(date.timeIntervalSince1970))
    }

    static func date(_ text: String) -> Date? {
        Timestamp.seconds(iso8601: text).map { Date(timeIntervalSince1970: Double($0)) }
    }
}

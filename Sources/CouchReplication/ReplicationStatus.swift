import CouchCore
import Foundation

/// A replication as users monitor it: a snapshot of a running job.
public struct ReplicationStatus: Sendable {
    /// The job ID (`base+continuous...`).
    public let replicationID: String
    /// Redacted display names.
    public let source: String
    public let target: String
    public let continuous: Bool
    public let state: ReplicationStateMachine.State
    public let statistics: ReplicationStatistics
    public let changesPending: Int?
    public let checkpointedSourceSequence: SourceSequence?
    public let sourceSequence: SourceSequence?
    public let throughSequence: SourceSequence?
    public let checkpointIntervalMilliseconds: Int
    public let startedOn: Date
    public let updatedOn: Date
    public let lastError: ReplicationError?

    /// Changes processed, and processed plus pending: a progress bar's two numbers.
    public var completed: Int { statistics.changesProcessed }
    public var total: Int { completed + (changesPending ?? 0) }

    /// The entry of `GET /_active_tasks`: CouchDB's fields for a replication task, plus
    /// `status`, `completed`, `total` and `last_error`.
    public var activeTask: JSONValue {
        var task: JSONObject = [
            "type": "replication",
            "replication_id": JSONValue(replicationID),
            "database": .null,
            "doc_id": .null,
            "user": .null,
            "source": JSONValue(source),
            "target": JSONValue(target),
            "continuous": JSONValue(continuous),
            "status": JSONValue(state.rawValue),
            "source_seq": sourceSequence?.json ?? 0,
            "checkpoint_interval": JSONValue(checkpointIntervalMilliseconds),
            "revisions_checked": JSONValue(statistics.missingChecked),
            "missing_revisions_found": JSONValue(statistics.missingFound),
            "docs_read": JSONValue(statistics.docsRead),
            "docs_written": JSONValue(statistics.docsWritten),
            "doc_write_failures": JSONValue(statistics.docWriteFailures),
            "bulk_get_docs": JSONValue(statistics.bulkGetDocs),
            "bulk_get_attempts": JSONValue(statistics.bulkGetAttempts),
            "changes_pending": changesPending.map { JSONValue($0) } ?? .null,
            "checkpointed_source_seq": checkpointedSourceSequence?.json ?? 0,
            "through_seq": throughSequence?.json ?? 0,
            "completed": JSONValue(completed),
            "total": JSONValue(total),
            "started_on": JSONValue(Int(startedOn.timeIntervalSince1970)),
            "updated_on": JSONValue(Int(updatedOn.timeIntervalSince1970)),
        ]
        task["last_error"] = lastError?.json ?? .null
        return .object(task)
    }
}

import CouchCore

/// The counters CouchDB's replicator keeps, under their CouchDB names where they are
/// written (checkpoint history, `_active_tasks`).
public struct ReplicationStatistics: Sendable, Equatable {
    /// Revisions asked about with `_revs_diff` (`missing_checked`, `revisions_checked`).
    public var missingChecked = 0
    /// Revisions the target lacked (`missing_found`, `missing_revisions_found`).
    public var missingFound = 0
    /// Revisions read from the source.
    public var docsRead = 0
    /// Revisions written to the target.
    public var docsWritten = 0
    /// Revisions the target refused (or that could not be copied).
    public var docWriteFailures = 0
    /// Revisions asked for with `_bulk_get`, and how many came back.
    public var bulkGetAttempts = 0
    public var bulkGetDocs = 0
    /// Change feed rows fully processed (for a progress bar).
    public var changesProcessed = 0

    public init() {}

    public static func += (lhs: inout ReplicationStatistics, rhs: ReplicationStatistics) {
        lhs.missingChecked += rhs.missingChecked
        lhs.missingFound += rhs.missingFound
        lhs.docsRead += rhs.docsRead
        lhs.docsWritten += rhs.docsWritten
        lhs.docWriteFailures += rhs.docWriteFailures
        lhs.bulkGetAttempts += rhs.bulkGetAttempts
        lhs.bulkGetDocs += rhs.bulkGetDocs
        lhs.changesProcessed += rhs.changesProcessed
    }

    /// The counters a checkpoint history entry recorded (0 for those it lacks).
    init(history entry: JSONObject) {
        func count(_ name: String) -> Int { entry[name]?.intValue ?? 0 }
        missingChecked = count("missing_checked")
        missingFound = count("missing_found")
        docsRead = count("docs_read")
        docsWritten = count("docs_written")
        docWriteFailures = count("doc_write_failures")
        bulkGetAttempts = count("bulk_get_attempts")
        bulkGetDocs = count("bulk_get_docs")
    }

    /// Each counter raised to `other`'s where it is higher (CouchDB's `max_stats`: a run
    /// resumed from a checkpoint goes on counting from the history's last entry).
    mutating func raise(to other: ReplicationStatistics) {
        missingChecked = max(missingChecked, other.missingChecked)
        missingFound = max(missingFound, other.missingFound)
        docsRead = max(docsRead, other.docsRead)
        docsWritten = max(docsWritten, other.docsWritten)
        docWriteFailures = max(docWriteFailures, other.docWriteFailures)
        bulkGetAttempts = max(bulkGetAttempts, other.bulkGetAttempts)
        bulkGetDocs = max(bulkGetDocs, other.bulkGetDocs)
    }

    /// The members a checkpoint history entry carries.
    var historyMembers: [(String, JSONValue)] {
        [("missing_checked", JSONValue(missingChecked)), ("missing_found", JSONValue(missingFound)),
         ("docs_read", JSONValue(docsRead)), ("docs_written", JSONValue(docsWritten)),
         ("doc_write_failures", JSONValue(docWriteFailures)),
         ("bulk_get_docs", JSONValue(bulkGetDocs)), ("bulk_get_attempts", JSONValue(bulkGetAttempts))]
    }
}

import CouchCore
import Foundation

/// A checkpoint document (`_local/<replication id>`) in CouchDB's format:
///
///     {"_id": "_local/<id>", "_rev": "0-3", "session_id": "...", "source_last_seq": ...,
///      "replication_id_version": 4,
///      "history": [{"session_id", "start_time", "end_time", "start_last_seq", "end_last_seq",
///                   "recorded_seq", "missing_checked", "missing_found", "docs_read",
///                   "docs_written", "doc_write_failures", "bulk_get_docs", "bulk_get_attempts"}, ...]}
///
/// with the newest history entry first and at most 50 of them. The same document is
/// written to the source and to the target.
public struct ReplicationLog: Sendable {
    public static let maximumHistory = 50

    /// The document's members without `_id` and `_rev`.
    public var body: JSONObject
    /// The revision of the stored document, to replace it.
    public var revision: String?

    public init(body: JSONObject = JSONObject(), revision: String? = nil) {
        self.body = body
        self.revision = revision
    }

    /// From a stored document (nil: there was none).
    public init(document: JSONObject?) {
        var body = document ?? JSONObject()
        revision = body.removeValue(forKey: "_rev")?.stringValue
        body.removeValue(forKey: "_id")
        self.body = body
    }

    public var sessionID: String? { body["session_id"]?.stringValue }
    public var sourceLastSequence: SourceSequence? { body["source_last_seq"].map(SourceSequence.init) }
    public var history: [JSONObject] { body["history"]?.arrayValue?.compactMap(\.objectValue) ?? [] }

    /// Where a replication resumes, compared as CouchDB's `compare_replication_logs`: the
    /// same last session on both sides → its `source_last_seq`; otherwise the most recent
    /// session both histories share → its `recorded_seq`; no common session → 0. Also
    /// returns the history to keep.
    public static func startingPoint(source: ReplicationLog, target: ReplicationLog) -> (SourceSequence, [JSONObject]) {
        if let sourceSession = source.sessionID, sourceSession == target.sessionID {
            return (source.sourceLastSequence ?? .zero, source.history)
        }
        if source.sessionID == nil && target.sessionID == nil { return (.zero, []) }
        var sourceHistory = source.history[...]
        var targetHistory = target.history[...]
        while let sourceEntry = sourceHistory.first, let targetEntry = targetHistory.first {
            sourceHistory = sourceHistory.dropFirst()
            let sourceSession = sourceEntry["session_id"]?.stringValue
            if let sourceSession, targetHistory.contains(where: { $0["session_id"]?.stringValue == sourceSession }) {
                return (recordedSequence(sourceEntry), Array(sourceHistory))
            }
            let targetSession = targetEntry["session_id"]?.stringValue
            targetHistory = targetHistory.dropFirst()
            if let targetSession, sourceHistory.contains(where: { $0["session_id"]?.stringValue == targetSession }) {
                return (recordedSequence(targetEntry), Array(targetHistory))
            }
        }
        return (.zero, [])
    }

    private static func recordedSequence(_ entry: JSONObject) -> SourceSequence {
        entry["recorded_seq"].map(SourceSequence.init) ?? .zero
    }

    /// The body of the next checkpoint: this session's entry in front of the history.
    static func nextBody(sessionID: String, sequence: SourceSequence, startSequence: SourceSequence,
                         startTime: Date, statistics: ReplicationStatistics, history: [JSONObject],
                         hasDocumentIDs: Bool) -> JSONObject {
        let start = JSONValue(httpDate(startTime))
        let end = JSONValue(httpDate(Date()))
        var entry: JSONObject = [
            "session_id": JSONValue(sessionID), "start_time": start, "end_time": end,
            "start_last_seq": startSequence.json, "end_last_seq": sequence.json, "recorded_seq": sequence.json,
        ]
        for (key, value) in statistics.historyMembers { entry[key] = value }
        var body: JSONObject = [
            "session_id": JSONValue(sessionID), "source_last_seq": sequence.json,
            "replication_id_version": JSONValue(ReplicationID.version),
        ]
        if hasDocumentIDs {
            // CouchDB keeps these top-level members for replications by document IDs.
            body["start_time"] = start
            body["end_time"] = end
            body["docs_read"] = JSONValue(statistics.docsRead)
            body["docs_written"] = JSONValue(statistics.docsWritten)
            body["doc_write_failures"] = JSONValue(statistics.docWriteFailures)
        }
        body["history"] = .array(([entry] + history).prefix(maximumHistory).map(JSONValue.object))
        return body
    }

    /// RFC 1123, as CouchDB's `httpd_util:rfc1123_date`: `Thu, 21 Nov 2024 07:06:00 GMT`.
    static func httpDate(_ date: Date) -> String {
        Timestamp.rfc1123(Int(date.timeIntervalSince1970))
    }
}

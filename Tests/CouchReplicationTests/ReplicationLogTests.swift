import CouchCore
import CouchReplication
import Testing

/// Comparing checkpoint documents as CouchDB's `compare_replication_logs` does.
@Suite struct ReplicationLogTests {
    func log(_ session: String?, last: Int, history: [(String, Int)]) -> ReplicationLog {
        var body = JSONObject()
        if let session { body["session_id"] = JSONValue(session) }
        body["source_last_seq"] = JSONValue(last)
        body["history"] = .array(history.map { ["session_id": JSONValue($0.0), "recorded_seq": JSONValue($0.1)] })
        return ReplicationLog(body: body)
    }

    @Test func noLogsMeansAFullReplication() {
        let (start, history) = ReplicationLog.startingPoint(source: ReplicationLog(document: nil),
                                                            target: ReplicationLog(document: nil))
        #expect(start == .zero)
        #expect(history.isEmpty)
    }

    @Test func theSameLastSessionResumesAtItsSourceLastSeq() {
        let source = log("s3", last: 30, history: [("s3", 30), ("s2", 20)])
        let (start, history) = ReplicationLog.startingPoint(source: source, target: source)
        #expect(start == SourceSequence(30))
        #expect(history.count == 2)
    }

    @Test func differentLastSessionsResumeAtTheMostRecentCommonOne() {
        // The target missed the source's last checkpoint (its write failed).
        let source = log("s3", last: 30, history: [("s3", 30), ("s2", 20), ("s1", 10)])
        let target = log("s2", last: 20, history: [("s2", 20), ("s1", 10)])
        let (start, history) = ReplicationLog.startingPoint(source: source, target: target)
        #expect(start == SourceSequence(20))
        #expect(history.map { $0["session_id"] } == ["s1"])
        // And the other way round.
        let (other, _) = ReplicationLog.startingPoint(source: target, target: source)
        #expect(other == SourceSequence(20))
    }

    @Test func noCommonSessionStartsOver() {
        let source = log("s3", last: 30, history: [("s3", 30)])
        let target = log("t9", last: 90, history: [("t9", 90)])
        #expect(ReplicationLog.startingPoint(source: source, target: target).0 == .zero)
        #expect(ReplicationLog.startingPoint(source: source, target: ReplicationLog(document: nil)).0 == .zero)
    }

    @Test func aStoredDocumentLosesItsIDAndKeepsItsRevision() {
        let log = ReplicationLog(document: ["_id": "_local/x", "_rev": "0-4", "session_id": "s", "source_last_seq": "12-abc"])
        #expect(log.revision == "0-4")
        #expect(log.body["_id"] == nil)
        #expect(log.sourceLastSequence == SourceSequence("12-abc"))
    }
}

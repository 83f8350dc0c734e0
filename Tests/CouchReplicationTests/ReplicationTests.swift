import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// One-shot replications between two Couchette servers on loopback ports, started as
/// clients start them: `POST /_replicate`.
@Suite(.serialized) struct ReplicationTests {
    @Test func pushCopiesEveryDocumentAndAnswersCouchDBsResult() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.fill("source", count: 250)
        let (status, result) = try await a.replicate(["source": "source", "target": JSONValue(b.url + "/target")])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["ok"] == true)
        #expect(result["session_id"]?.stringValue != nil)
        #expect(sequenceNumber(result["source_last_seq"]) == 250)
        #expect(result["replication_id_version"] == 4)
        let entry = try #require(result["history"]?[0])
        #expect(entry["session_id"] == result["session_id"])
        #expect(entry["docs_written"] == 250)
        #expect(entry["docs_read"] == 250)
        #expect(entry["missing_checked"] == 250)
        #expect(entry["missing_found"] == 250)
        #expect(entry["doc_write_failures"] == 0)
        #expect(sequenceNumber(entry["recorded_seq"]) == 250)
        #expect(entry["start_last_seq"] == 0)
        #expect(sequenceNumber(entry["end_last_seq"]) == 250)
        #expect(entry["start_time"]?.stringValue?.hasSuffix(" GMT") == true)
        #expect(try await b.documentCount("target") == 250)
        #expect(try await a.revisionTrees("source") == b.revisionTrees("target"))
    }

    @Test func pullLocalToLocalAndRemoteToRemoteRunTheSameCode() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/remote")
        try await b.fill("remote", count: 120)
        // Pull: remote source, local target created on the way.
        var (status, result) = try await a.replicate(["source": JSONValue(b.url + "/remote"), "target": "pulled",
                                                      "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 120)
        // Local to local, through the store.
        (status, result) = try await a.replicate(["source": "pulled", "target": "copy", "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 120)
        // Remote to remote: both ends given as URLs, one of them this very server.
        try await b.call("PUT", "/mirror")
        (status, result) = try await a.replicate(["source": JSONValue(a.url + "/copy"), "target": JSONValue(b.url + "/mirror")])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 120)
        let original = try await b.revisionTrees("remote")
        #expect(try await a.revisionTrees("pulled") == original)
        #expect(try await a.revisionTrees("copy") == original)
        #expect(try await b.revisionTrees("mirror") == original)
    }

    @Test func editsAndDeletionsReplicateWithTheirHistories() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        try await a.fill("db", count: 20)
        // Edit some documents several times, delete others.
        for index in 0..<5 {
            let id = String(format: "doc%05d", index)
            var rev = try await a.call("GET", "/db/\(id)").json["_rev"]!.stringValue!
            for edit in 1...3 {
                rev = try await a.call("PUT", "/db/\(id)", body: ["_rev": JSONValue(rev), "edit": JSONValue(edit)]).json["rev"]!.stringValue!
            }
        }
        for index in 10..<15 {
            let id = String(format: "doc%05d", index)
            let rev = try await a.call("GET", "/db/\(id)").json["_rev"]!.stringValue!
            #expect(try await a.call("DELETE", "/db/\(id)?rev=\(rev)").status == 200)
        }
        let (status, result) = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db"), "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(try await b.documentCount("db") == 15)
        #expect(try await b.call("GET", "/db/doc00012").status == 404)
        #expect(try await b.call("GET", "/db/doc00002").json["edit"] == 3)
        #expect(try await a.revisionTrees("db") == b.revisionTrees("db"))
        // Deleting after a first replication reaches the target too.
        let rev = try await a.call("GET", "/db/doc00001").json["_rev"]!.stringValue!
        try await a.call("DELETE", "/db/doc00001?rev=\(rev)")
        _ = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db")])
        #expect(try await b.call("GET", "/db/doc00001").json["reason"] == "deleted")
    }

    @Test func conflictsMadeOnBothSidesEndInIdenticalRevisionTrees() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        try await b.call("PUT", "/db")
        try await a.fill("db", count: 10)
        _ = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db")])
        // The same documents edited differently on each side, one deleted on one side only.
        for (server, side) in [(a, "a"), (b, "b")] {
            for index in 0..<4 {
                let id = String(format: "doc%05d", index)
                let rev = try await server.call("GET", "/db/\(id)").json["_rev"]!.stringValue!
                if index == 3 && side == "b" {
                    try await server.call("DELETE", "/db/\(id)?rev=\(rev)")
                } else {
                    try await server.call("PUT", "/db/\(id)", body: ["_rev": JSONValue(rev), "side": JSONValue(side)])
                }
            }
            try await server.call("PUT", "/db/only-\(side)", body: ["side": JSONValue(side)])
        }
        // A document created independently on both sides.
        try await a.call("PUT", "/db/twin", body: ["made": "a"])
        try await b.call("PUT", "/db/twin", body: ["made": "b"])

        let push = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db")])
        #expect(push.json["ok"] == true, "\(push.json.serializedString())")
        let pull = try await a.replicate(["source": JSONValue(b.url + "/db"), "target": "db"])
        #expect(pull.json["ok"] == true, "\(pull.json.serializedString())")
        let treesA = try await a.revisionTrees("db")
        let treesB = try await b.revisionTrees("db")
        #expect(treesA == treesB)
        #expect(treesA["doc00000"]?.arrayValue?.count == 2, "both edits are leaves")
        #expect(treesA["twin"]?.arrayValue?.count == 2)
        // Both sides pick the same winner.
        for id in ["doc00000", "doc00003", "twin"] {
            let winnerA = try await a.call("GET", "/db/\(id)?conflicts=true").json
            let winnerB = try await b.call("GET", "/db/\(id)?conflicts=true").json
            #expect(winnerA == winnerB)
        }
    }

    @Test func checkpointsAreCouchDBsDocumentsOnBothSidesAndARerunCopiesNothing() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        try await b.call("PUT", "/db")
        try await a.fill("db", count: 30)
        let body: JSONValue = ["source": "db", "target": JSONValue(b.url + "/db")]
        let first = try await a.replicate(body).json
        let id = try #require(a.replications.knownReplicationID(for: try ReplicationSettings(json: body.objectValue!)))
        let onSource = try await a.call("GET", "/db/_local/\(id.baseID)")
        let onTarget = try await b.call("GET", "/db/_local/\(id.baseID)")
        #expect(onSource.status == 200)
        #expect(onTarget.status == 200)
        for log in [onSource.json, onTarget.json] {
            #expect(log["_id"] == JSONValue("_local/" + id.baseID))
            #expect(log["_rev"] == "0-1")
            #expect(log["session_id"] == first["session_id"])
            #expect(sequenceNumber(log["source_last_seq"]) == 30)
            #expect(log["replication_id_version"] == 4)
            #expect(log["history"]?.arrayValue?.count == 1)
            let keys = Set(log["history"]?[0]?.objectValue?.keys ?? [])
            #expect(keys.isSuperset(of: ["session_id", "start_time", "end_time", "start_last_seq", "end_last_seq",
                                         "recorded_seq", "missing_checked", "missing_found", "docs_read", "docs_written",
                                         "doc_write_failures"]))
        }
        // Nothing new: CouchDB answers `no_changes` with the log it found.
        let second = try await a.replicate(body).json
        #expect(second["ok"] == true)
        #expect(second["no_changes"] == true)
        #expect(second["session_id"] == first["session_id"])
        // New documents: a second history entry, resuming where the first ended and counting
        // on from its counters (CouchDB's are the replication's, not the run's).
        try await a.fill("db", count: 5, prefix: "more")
        let third = try await a.replicate(body).json
        #expect(third["history"]?.arrayValue?.count == 2)
        #expect(sequenceNumber(third["history"]?[0]?["start_last_seq"]) == 30)
        #expect(third["history"]?[0]?["missing_checked"] == 35)
        #expect(third["history"]?[0]?["docs_written"] == 35)
        #expect(third["history"]?[0]?["docs_read"] == 35)
        #expect(try await b.call("GET", "/db/_local/\(id.baseID)").json["_rev"] == "0-2")
        // `since_seq` starts elsewhere (and is another replication, with its own checkpoint).
        var since = body.objectValue!
        since["since_seq"] = 25
        let fromSince = try await a.replicate(.object(since)).json
        #expect(fromSince["history"]?[0]?["start_last_seq"] == 25, "since_seq is kept as given")
        #expect(fromSince["history"]?[0]?["missing_checked"] == 10)
        #expect(fromSince["history"]?[0]?["missing_found"] == 0)
        // Without checkpoints, CouchDB's answer says so.
        var unrecorded = body.objectValue!
        unrecorded["use_checkpoints"] = false
        #expect(try await a.replicate(.object(unrecorded)).json == ["ok": true, "use_checkpoints": false])
    }

    @Test func documentIDsAndSelectorsFilterWhatIsCopied() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        try await a.fill("db", count: 40)
        // A local source filters here; a remote source filters on its side. IDs are unquoted
        // first, as CouchDB's (`doc0000%37` names `doc00007`).
        for (replicator, source, suffix) in [(a, "db", "local"), (b, a.url + "/db", "remote")] {
            var result = try await replicator.replicate(["source": JSONValue(source), "target": JSONValue("ids-" + suffix),
                                                         "create_target": true, "doc_ids": ["doc00003", "doc0000%37", "nothere"]]).json
            #expect(result["ok"] == true, "\(result.serializedString())")
            #expect(try await replicator.documentCount("ids-" + suffix) == 2)
            result = try await replicator.replicate(["source": JSONValue(source), "target": JSONValue("sel-" + suffix),
                                                     "create_target": true, "selector": ["n": ["$gte": 35]]]).json
            #expect(result["ok"] == true, "\(result.serializedString())")
            #expect(try await replicator.documentCount("sel-" + suffix) == 5)
            #expect(sequenceNumber(result["source_last_seq"]) == 40)
            // Named documents that do not exist: nothing copied, nothing recorded.
            result = try await replicator.replicate(["source": JSONValue(source), "target": JSONValue("none-" + suffix),
                                                     "create_target": true, "doc_ids": ["nothere", "norhere"]]).json
            #expect(result["ok"] == true && result["no_changes"] == true, "\(result.serializedString())")
        }
    }

    @Test func winningRevisionsOnlyLeavesConflictsBehind() async throws {
        let a = try TestServer()
        defer { a.stop() }
        try await a.call("PUT", "/db")
        try await a.putDocuments("db", [
            ["_id": "c", "_rev": "2-b", "_revisions": ["start": 2, "ids": ["b", "a"]], "v": "b"],
            ["_id": "c", "_rev": "2-c", "_revisions": ["start": 2, "ids": ["c", "a"]], "v": "c"],
        ], newEdits: false)
        let result = try await a.replicate(["source": "db", "target": "winners", "create_target": true,
                                            "winning_revs_only": true]).json
        #expect(result["ok"] == true, "\(result.serializedString())")
        #expect(try await a.revisionTrees("winners")["c"]?.arrayValue?.count == 1)
        #expect(try await a.call("GET", "/winners/c").json["v"] == "c")
    }

    @Test func aSourceWithoutBulkGetIsReadWithOpenRevs() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let proxy = try FaultyProxy(upstreamPort: b.port, faults: .init(withoutBulkGet: true))
        defer { proxy.stop(); a.stop(); b.stop() }
        try await b.call("PUT", "/db")
        try await b.fill("db", count: 30)
        try await b.putDocuments("db", [
            ["_id": "doc00002", "_rev": "2-x", "_revisions": ["start": 2, "ids": ["x", "y"]], "branch": "x"],
        ], newEdits: false)
        let result = try await a.replicate(["source": JSONValue(proxy.url + "/db"), "target": "db", "create_target": true]).json
        #expect(result["ok"] == true, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 31)
        #expect(result["history"]?[0]?["bulk_get_docs"] == 0)
        #expect(proxy.requests.filter { $0.path.hasSuffix("/_bulk_get") }.count <= 4, "tried (once per worker), then open_revs")
        #expect(proxy.requests.contains { $0.rawQuery.contains("open_revs=") })
        #expect(try await a.revisionTrees("db") == b.revisionTrees("db"))
    }

    @Test func documentsTheTargetRefusesAreCountedAndSkipped() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        try await b.call("PUT", "/db")
        try await a.fill("db", count: 20)
        try await a.fill("db", count: 3, prefix: "secret")
        b.server.functions.registerValidation("no-secrets") { arguments in
            if arguments.newDocument["_id"]?.stringValue?.hasPrefix("secret") == true {
                throw CouchError(.forbidden, "no secrets here")
            }
        }
        let result = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db")]).json
        #expect(result["ok"] == true, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 20)
        #expect(result["history"]?[0]?["doc_write_failures"] == 3)
        #expect(sequenceNumber(result["source_last_seq"]) == 23, "a refused document does not hold the checkpoint back")
        #expect(try await b.documentCount("db") == 20)
    }

    @Test func aMissingSourceFailsWithAClearReason() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/target")
        var (status, result) = try await a.replicate(["source": "nosuch", "target": "target"])
        #expect(status == 404)
        #expect(result == ["error": "db_not_found", "reason": "could not open nosuch"])
        (status, result) = try await a.replicate(["source": "target", "target": "nosuch"])
        #expect(status == 404)
        #expect(result["error"] == "db_not_found")
        // A remote source: the answer, status included, comes when the replication has failed.
        (status, result) = try await a.replicate(["source": JSONValue("http://127.0.0.1:\(b.port)/nosuch"), "target": "target"])
        #expect(status == 404)
        #expect(result["error"] == "db_not_found")
        #expect(result["reason"] == JSONValue("could not open http://127.0.0.1:\(b.port)/nosuch/"))
        (status, result) = try await a.replicate(["source": "target", "target": JSONValue("http://127.0.0.1:\(b.port)/nosuch")])
        #expect(status == 404, "a remote target that is missing, without create_target")
        #expect(result["error"] == "db_not_found")
        // A peer that cannot be reached at all: 500 with the replicator's reason.
        (status, result) = try await a.replicate(["source": "target", "target": "http://127.0.0.1:9/db", "retries_per_request": 0])
        #expect(status == 500)
        #expect(result["error"]?.stringValue != nil && result["reason"]?.stringValue != nil, "\(result.serializedString())")
        #expect(try await a.call("GET", "/_active_tasks").json == [])
        // Bad bodies are CouchDB's 400s.
        (status, result) = try await a.replicate(["source": "target"])
        #expect(status == 400)
        #expect(result["error"] == "bad_request")
    }
}

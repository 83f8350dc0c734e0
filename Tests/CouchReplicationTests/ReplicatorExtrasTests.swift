import CouchCore
import CouchReplication
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Couchette's extra fields of `_replicator` documents (`suspended`, `interval`) and the
/// live event stream of `_scheduler/jobs`.
@Suite(.serialized) struct ReplicatorExtrasTests {
    func state(_ server: TestServer, _ id: String) async throws -> JSONValue {
        try await server.call("GET", "/_scheduler/docs/_replicator/\(id)").json
    }

    @Test func aSuspendedJobWaitsAndResumesFromItsCheckpoint() async throws {
        let a = try TestServer()
        defer { a.stop() }
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 10)
        var body: JSONObject = ["source": "source", "target": "copy", "create_target": true, "continuous": true,
                                "checkpoint_interval": 100]
        try await a.call("PUT", "/_replicator/job", body: .object(body))
        #expect(try await eventually { try await a.documentCount("copy") == 10 })
        let jobID = try #require(try await state(a, "job")["id"]?.stringValue)
        let base = ReplicationID.baseID(ofJobID: jobID)
        #expect(try await eventually { sequenceNumber(try await a.call("GET", "/source/_local/\(base)").json["source_last_seq"]) == 10 })

        var rev = try #require(try await a.call("GET", "/_replicator/job").json["_rev"])
        body["_rev"] = rev
        body["suspended"] = true
        #expect(try await a.call("PUT", "/_replicator/job", body: .object(body)).status == 201)
        #expect(try await eventually { try await state(a, "job")["state"] == "suspended" })
        #expect(try await a.call("GET", "/_scheduler/jobs").json["total_rows"] == 0)
        try await a.fill("source", count: 5, prefix: "more")
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(try await a.documentCount("copy") == 10, "a suspended job copies nothing")

        rev = try #require(try await a.call("GET", "/_replicator/job").json["_rev"])
        body["_rev"] = rev
        body["suspended"] = false
        #expect(try await a.call("PUT", "/_replicator/job", body: .object(body)).status == 201)
        #expect(try await eventually { try await a.documentCount("copy") == 15 })
        // It resumed at the checkpoint: only the 5 new changes were looked at.
        #expect(try await eventually {
            let log = try await a.call("GET", "/source/_local/\(base)").json
            return sequenceNumber(log["history"]?[0]?["start_last_seq"]) == 10 && addedByLastRun(log, "missing_checked") == 5
        })
    }

    @Test func theLargestHeartbeatOfTheEventFeedCannotTrap() async throws {
        let a = try TestServer()
        defer { a.stop() }
        let feed = try HTTPTestConnection(port: a.port)
        defer { feed.close() }
        #expect(try feed.startStreaming("GET", "/_scheduler/jobs?feed=continuous&heartbeat=9223372036854775807").status == 200)
        #expect(try await a.call("GET", "/_up").status == 200)
    }

    @Test func anIntervalThatCannotBeWaitedIsRefused() async throws {
        let a = try TestServer()
        defer { a.stop() }
        for interval: JSONValue in [1e300, -5, 0, "soon"] {
            let (status, json) = try await a.call("PUT", "/_replicator/never", body: [
                "source": "source", "target": "copy", "interval": interval,
            ])
            #expect(status == 403, "\(interval.serializedString())")
            #expect(json["error"] == "forbidden")
        }
        #expect(try await a.call("GET", "/_up").status == 200)
    }

    @Test func anIntervalJobRunsAgainAndKeepsItsScheduleAcrossRestarts() async throws {
        let a = try TestServer()
        try await a.call("PUT", "/source")
        try await a.call("PUT", "/source/first", body: ["n": 1])
        try await a.call("PUT", "/_replicator/every", body: [
            "source": "source", "target": "copy", "create_target": true, "interval": 1,
        ])
        #expect(try await eventually { try await a.call("GET", "/_replicator/every").json["_replication_state"] == "completed" })
        #expect(try await a.documentCount("copy") == 1)
        // Between runs its state says when it runs next (under load it may be running again
        // already when first asked, so ask until it waits).
        #expect(try await eventually { try await state(a, "every")["info"]?["next_run"]?.stringValue != nil },
                "its state says when it runs next")
        try await a.call("PUT", "/source/second", body: ["n": 2])
        #expect(try await eventually(5) { try await a.documentCount("copy") == 2 }, "run again after its interval")
        try await a.call("PUT", "/source/third", body: ["n": 3])
        #expect(try await eventually(5) { try await a.documentCount("copy") == 3 }, "and again")

        a.stop(keepData: true)
        let restarted = try TestServer(directory: a.directory)
        defer { restarted.stop() }
        try await restarted.call("PUT", "/source/fourth", body: ["n": 4])
        #expect(try await eventually(10) { try await restarted.documentCount("copy") == 4 }, "and after a restart")
    }

    @Test func aClientFollowsJobsFromCreationToCompletion() async throws {
        let a = try TestServer()
        defer { a.stop() }
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 20)
        let client = try HTTPTestConnection(port: a.port)
        defer { client.close() }
        let head = try await offPool { try client.startStreaming("GET", "/_scheduler/jobs?feed=eventsource") }
        #expect(head.status == 200)
        #expect(head.header("Content-Type") == "text/event-stream")
        try await a.call("PUT", "/_replicator/watched", body: ["source": "source", "target": "copy", "create_target": true])
        var states: [String] = []
        var last: JSONValue = .null
        while !states.contains("completed") {
            let line = try await offPool { try client.readLine(timeout: 10) }
            guard let line else { break }
            guard line.hasPrefix("data: ") else { continue }
            let event = try JSONValue.parse(String(line.dropFirst(6)))
            #expect(event["doc_id"] == "watched")
            states.append(event["state"]?.stringValue ?? "")
            last = event
        }
        #expect(states.first == "pending" || states.first == "running", "\(states)")
        #expect(states.contains("running"))
        #expect(states.last == "completed")
        #expect(last["status"] == "stopped")
        #expect(last["completed"] == 20 && last["total"] == 20, "\(last.serializedString())")
    }
}

/// Pending documents of a push job, from its checkpoint and the local changes feed.
@Suite(.serialized) struct PendingDocumentsTests {
    @Test func aPushJobListsTheDocumentsItHasNotCopiedYet() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.call("PUT", "/source/d1", body: ["n": 1])
        try await a.call("PUT", "/source/d2", body: ["n": 2])
        var body: JSONObject = ["source": "source", "target": JSONValue(b.url + "/target"), "suspended": true]
        try await a.call("PUT", "/_replicator/push", body: .object(body))
        let path = "/_scheduler/docs/_replicator/push/_pending"
        #expect(try await eventually { try await a.call("GET", path).json["pending"] == ["d1", "d2"] })

        body["_rev"] = try await a.call("GET", "/_replicator/push").json["_rev"]
        body["suspended"] = false
        try await a.call("PUT", "/_replicator/push", body: .object(body))
        #expect(try await eventually { try await a.call("GET", "/_replicator/push").json["_replication_state"] == "completed" })
        #expect(try await a.call("GET", path).json["pending"] == [])
        #expect(try await b.documentCount("target") == 2)

        try await a.call("PUT", "/source/d3", body: ["n": 3])
        #expect(try await a.call("GET", path).json["pending"] == ["d3"])
        #expect(try await a.call("GET", path + "?doc_id=d3").json == ["doc_id": "d3", "pending": true])
        #expect(try await a.call("GET", path + "?doc_id=d1").json["pending"] == false)
        #expect(try await b.documentCount("target") == 2, "answered without contacting the target")

        try await a.call("PUT", "/_replicator/pull", body: ["source": JSONValue(b.url + "/target"), "target": "copy",
                                                            "create_target": true, "suspended": true])
        #expect(try await eventually { try await a.call("GET", "/_scheduler/docs/_replicator/pull/_pending").status == 400 })
        #expect(try await a.call("GET", "/_scheduler/docs/_replicator/nothing/_pending").status == 404)
    }
}

/// Pending documents are those that have not reached the target, whatever the checkpoint says.
@Suite struct PendingAfterWriteTests {
    @Test func aDocumentOnTheTargetIsNotPendingBeforeTheNextCheckpoint() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.call("PUT", "/_replicator/push", body: [
            "source": "source", "target": JSONValue(b.url + "/target"), "continuous": true,
            "checkpoint_interval": 600_000,
        ])
        let path = "/_scheduler/docs/_replicator/push/_pending"
        #expect(try await eventually { try await a.call("GET", path).status == 200 })
        try await a.call("PUT", "/source/d1", body: ["n": 1])
        #expect(try await eventually { try await b.call("GET", "/target/d1").status == 200 })
        #expect(try await eventually(2) { try await a.call("GET", path).json["pending"] == [] },
                "written, though not checkpointed for ten minutes")
        #expect(try await a.call("GET", path + "?doc_id=d1").json["pending"] == false)
    }

    @Test func aContinuousPullThatCaughtUpAsksItsSourceNothingWhileItWaits() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/source")
        try await a.call("PUT", "/_replicator/pull", body: [
            "source": JSONValue(b.url + "/source"), "target": "copy", "create_target": true, "continuous": true,
            "checkpoint_interval": 600_000,
        ])
        try await b.call("PUT", "/source/d1", body: ["n": 1])
        #expect(try await eventually { try await a.call("GET", "/copy/d1").status == 200 })
        #expect(try await eventually { try await a.call("GET", "/_scheduler/docs/_replicator/pull").json["info"]?["changes_pending"] == 0 })
        func sourceGETs() async throws -> Int {
            try await b.call("GET", "/_node/_local/_stats/couchdb/httpd_request_methods").json["GET"]?["value"]?.intValue ?? -1
        }
        let before = try await sourceGETs()
        try await Task.sleep(nanoseconds: 3_500_000_000)
        #expect(try await sourceGETs() - before == 1, "only this test's own request: the job's feed waits, it polls nothing")
        try await b.call("PUT", "/source/d2", body: ["n": 2])
        #expect(try await eventually { try await a.call("GET", "/copy/d2").status == 200 })
    }
}

/// Sync pairs: one document, a push and a pull; `exclusive` retires older pairs.
@Suite(.serialized) struct SyncPairTests {
    @Test func aSyncDocumentPushesAndPullsAndAnExclusiveOneRetiresTheOthers() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/notes")
        try await b.call("PUT", "/notes")
        try await a.call("PUT", "/_replicator/pair", body: [
            "source": "notes", "target": JSONValue(b.url + "/notes"), "sync": true, "continuous": true,
        ])
        try await a.call("PUT", "/notes/from-a", body: ["n": 1])
        try await b.call("PUT", "/notes/from-b", body: ["n": 2])
        #expect(try await eventually { try await b.call("GET", "/notes/from-a").status == 200 })
        #expect(try await eventually { try await a.call("GET", "/notes/from-b").status == 200 })
        let entry = try await a.call("GET", "/_scheduler/docs/_replicator/pair").json
        #expect(entry["state"] == "running")
        #expect(entry["id"]?.stringValue != nil && entry["pair_id"]?.stringValue != nil && entry["id"] != entry["pair_id"])
        #expect(try await a.call("GET", "/_scheduler/jobs").json["total_rows"] == 2, "reported together, as two jobs of one document")

        try await a.call("PUT", "/_replicator/only", body: [
            "source": "notes", "target": JSONValue(b.url + "/other"), "create_target": true, "sync": true,
            "exclusive": true, "continuous": true,
        ])
        #expect(try await eventually { try await a.call("GET", "/_scheduler/docs/_replicator/pair").json["state"] == "retired" })
        #expect(try await eventually { try await a.call("GET", "/_scheduler/jobs").json["total_rows"] == 2 })
        try await a.call("PUT", "/notes/later", body: ["n": 3])
        #expect(try await eventually { try await b.call("GET", "/other/later").status == 200 })
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(try await b.call("GET", "/notes/later").status == 404, "the retired pair no longer runs")
    }
}

/// `exclusive` and sync pairs across restarts, and `sync` where it cannot be kept.
@Suite struct SyncPairRestartTests {
    @Test func aPairRetiredByAnExclusiveOneThatFailedStaysRetiredAfterARestart() async throws {
        let b = try TestServer(configuration: .testing(admins: ["admin": "secret"]))
        let a = try TestServer()
        defer { b.stop() }
        let good = b.url.replacingOccurrences(of: "://", with: "://admin:secret@")
        let bad = b.url.replacingOccurrences(of: "://", with: "://admin:wrong@")
        try await a.call("PUT", "/notes")
        try await b.call("PUT", "/notes", headers: [basicAuthorization("admin", "secret")])
        try await a.call("PUT", "/_replicator/pair", body: [
            "source": "notes", "target": JSONValue(good + "/notes"), "sync": true, "continuous": true,
        ])
        #expect(try await eventually { try await a.call("GET", "/_scheduler/docs/_replicator/pair").json["state"] == "running" })
        try await a.call("PUT", "/_replicator/only", body: [
            "source": "notes", "target": JSONValue(bad + "/other"), "sync": true, "exclusive": true, "continuous": true,
        ])
        #expect(try await eventually { try await a.call("GET", "/_scheduler/docs/_replicator/only").json["state"] == "failed" })
        #expect(try await a.call("GET", "/_scheduler/docs/_replicator/pair").json["state"] == "retired")

        a.stop(keepData: true)
        let restarted = try TestServer(directory: a.directory)
        defer { restarted.stop() }
        #expect(try await eventually { try await restarted.call("GET", "/_scheduler/docs/_replicator/only").json["state"] == "failed" })
        #expect(try await restarted.call("GET", "/_scheduler/docs/_replicator/pair").json["state"] == "retired")
        try await restarted.call("PUT", "/notes/after-restart", body: ["n": 1])
        try await Task.sleep(nanoseconds: 500_000_000)
        #expect(try await b.call("GET", "/notes/after-restart", headers: [basicAuthorization("admin", "secret")]).status == 404,
                "the retired pair does not run again")
    }

    @Test func replicateWithSyncIsRefusedRatherThanRunOneWay() async throws {
        let a = try TestServer()
        defer { a.stop() }
        try await a.call("PUT", "/notes")
        let answer = try await a.call("POST", "/_replicate", body: ["source": "notes", "target": "copy", "sync": true,
                                                                    "create_target": true])
        #expect(answer.status == 400)
        #expect(answer.json["error"] == "bad_request")
        #expect(try await a.call("GET", "/copy").status == 404)
    }
}

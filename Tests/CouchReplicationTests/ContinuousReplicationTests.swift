import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// Continuous replications: live changes, `_active_tasks`, cancelling.
@Suite(.serialized) struct ContinuousReplicationTests {
    @Test func aChangeMadeAfterTheStartArrivesWithinASecond() async throws {
        // Timed on the replicator's own threads, so that other suites blocking the shared
        // task threads do not delay the measuring itself.
        try await withTaskExecutorPreference(ReplicationExecutor.shared) {
            let (a, b) = (try TestServer(), try TestServer())
            defer { a.replications.stopAll(); a.stop(); b.stop() }
            try await a.call("PUT", "/source")
            try await b.call("PUT", "/target")
            try await a.fill("source", count: 50)
            let (status, answer) = try await a.replicate(["source": "source", "target": JSONValue(b.url + "/target"),
                                                          "continuous": true])
            #expect(status == 202)
            #expect(answer["ok"] == true)
            #expect(answer["_local_id"]?.stringValue?.hasSuffix("+continuous") == true)
            #expect(try await eventually { try await b.documentCount("target") == 50 })
            for round in 0..<3 {
                let written = Date()
                try await a.call("PUT", "/source/live\(round)", body: ["round": JSONValue(round)])
                #expect(try await eventually(1) { try await b.call("GET", "/target/live\(round)").status == 200 })
                #expect(Date().timeIntervalSince(written) < 1)
            }
            // And the other way: a pull from a remote continuous feed.
            let (pullStatus, _) = try await a.replicate(["source": JSONValue(b.url + "/target"), "target": "back",
                                                         "create_target": true, "continuous": true])
            #expect(pullStatus == 202)
            #expect(try await eventually { try await a.documentCount("back") == 53 })
            let written = Date()
            try await b.call("PUT", "/target/from-b", body: [:])
            #expect(try await eventually(1) { try await a.call("GET", "/back/from-b").status == 200 })
            #expect(Date().timeIntervalSince(written) < 1)
        }
    }

    @Test func activeTasksShowsARunningReplicationWithCouchDBsFieldsAndNoPassword() async throws {
        let a = try TestServer()
        let b = try TestServer(configuration: .testing(admins: ["admin": "s3cret"]))
        defer { a.replications.stopAll(); a.stop(); b.stop() }
        let admin = basicAuthorization("admin", "s3cret")
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target", headers: [admin])
        try await a.fill("source", count: 30)
        let target = "http://admin:s3cret@127.0.0.1:\(b.port)/target"
        let (status, answer) = try await a.replicate(["source": "source", "target": JSONValue(target), "continuous": true,
                                                      "checkpoint_interval": 200])
        #expect(status == 202)
        let jobID = try #require(answer["_local_id"]?.stringValue)
        #expect(try await eventually {
            try await a.call("GET", "/_active_tasks").json[0]?["status"] == "idle"
        })
        let (tasksStatus, tasks) = try await a.call("GET", "/_active_tasks")
        #expect(tasksStatus == 200)
        let task = try #require(tasks[0])
        #expect(task["type"] == "replication")
        #expect(task["replication_id"] == JSONValue(jobID))
        #expect(task["source"] == "source")
        #expect(task["target"] == JSONValue("http://admin:*****@127.0.0.1:\(b.port)/target/"))
        #expect(task["continuous"] == true)
        #expect(task["docs_read"] == 30)
        #expect(task["docs_written"] == 30)
        #expect(task["doc_write_failures"] == 0)
        #expect(task["revisions_checked"] == 30)
        #expect(task["missing_revisions_found"] == 30)
        #expect(task["changes_pending"] == 0)
        #expect(sequenceNumber(task["source_seq"]) == 30)
        #expect(task["completed"] == 30)
        #expect(task["total"] == 30)
        #expect(task["started_on"]?.intValue != nil)
        #expect(task["updated_on"]?.intValue != nil)
        #expect(task["last_error"] == .null)
        #expect(!tasks.serializedString().contains("s3cret"))
        #expect(try await eventually { sequenceNumber(try await a.call("GET", "/_active_tasks").json[0]?["checkpointed_source_seq"]) == 30 })
        // Checkpoints on both sides while it runs.
        let base = ReplicationID.baseID(ofJobID: jobID)
        #expect(sequenceNumber(try await a.call("GET", "/source/_local/\(base)").json["source_last_seq"]) == 30)
        #expect(sequenceNumber(try await b.call("GET", "/target/_local/\(base)", headers: [admin]).json["source_last_seq"]) == 30)
        // Active again with a change, idle after it.
        try await a.fill("source", count: 1, prefix: "new")
        #expect(try await eventually { try await a.call("GET", "/_active_tasks").json[0]?["docs_written"] == 31 })
        #expect(try await eventually { try await a.call("GET", "/_active_tasks").json[0]?["status"] == "idle" })
    }

    @Test func cancellingStopsTheReplicationAndForgetsIt() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.replications.stopAll(); a.stop(); b.stop() }
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        let body: JSONValue = ["source": "source", "target": JSONValue(b.url + "/target"), "continuous": true]
        let jobID = try #require(try await a.replicate(body).json["_local_id"]?.stringValue)
        // The same replication again joins the running job.
        #expect(try await a.replicate(body).json["_local_id"] == JSONValue(jobID))
        #expect(try await a.call("GET", "/_active_tasks").json.arrayValue?.count == 1)
        // Cancel by ID.
        var (status, answer) = try await a.replicate(["replication_id": JSONValue(jobID), "cancel": true])
        #expect(status == 200)
        #expect(answer == ["ok": true, "_local_id": JSONValue(jobID)])
        #expect(try await a.call("GET", "/_active_tasks").json == [])
        try await a.call("PUT", "/source/after", body: [:])
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(try await b.call("GET", "/target/after").status == 404)
        // Cancelling what is not running is CouchDB's 404.
        (status, answer) = try await a.replicate(["replication_id": JSONValue(jobID), "cancel": true])
        #expect(status == 404)
        #expect(answer == ["error": "not_found", "reason": "missing"])
        // Cancel with the same body as the start.
        _ = try await a.replicate(body)
        var cancelBody = body.objectValue!
        cancelBody["cancel"] = true
        (status, answer) = try await a.replicate(.object(cancelBody))
        #expect(status == 200)
        #expect(answer["_local_id"] == JSONValue(jobID))
        #expect(try await a.call("GET", "/_active_tasks").json == [])
    }

    @Test func anUnreachableTargetMakesTheReplicationOfflineUntilItComesBack() async throws {
        let a = try TestServer()
        let b = try TestServer()
        let (directory, port) = (b.directory, b.port)
        defer { a.replications.stopAll(); a.stop(); b.stop() }
        a.replications.jobBackoff = Backoff(initialMilliseconds: 100, maximumMilliseconds: 400)
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.fill("source", count: 20)
        _ = try await a.replicate(["source": "source", "target": JSONValue(b.url + "/target"), "continuous": true,
                                   "retries_per_request": 1])
        #expect(try await eventually { try await b.documentCount("target") == 20 })
        b.stop(keepData: true)
        try await a.fill("source", count: 20, prefix: "while-down")
        #expect(try await eventually {
            let task = try await a.call("GET", "/_active_tasks").json[0]
            return task?["status"] == "offline" && task?["last_error"]?["error"] == "peer_unreachable"
        })
        let restarted = try TestServer(directory: directory) { $0.port = port }
        defer { restarted.stop() }
        #expect(try await eventually { try await restarted.documentCount("target") == 40 })
        #expect(try await eventually { try await a.call("GET", "/_active_tasks").json[0]?["status"] == "idle" })
        #expect(try await a.revisionTrees("source") == restarted.revisionTrees("target"))
    }
}

import CouchCore
import CouchReplication
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// The scheduler over real HTTP: jobs survive restarts of their server, crash and come
/// back by themselves, and share `max_jobs` slots.
@Suite(.serialized) struct SchedulerTests {
    static let total = 1500

    func state(_ server: TestServer, _ id: String) async throws -> String? {
        try await server.call("GET", "/_scheduler/docs/_replicator/\(id)").json["state"]?.stringValue
    }

    @Test func continuousAndOneShotJobsResumeAfterARestartOfTheirServer() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { b.stop() }
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/continuous")
        try await b.call("PUT", "/once")
        try await a.fill("source", count: Self.total)
        // Slow enough that a loaded machine still stops the jobs half-way.
        let proxy = try FaultyProxy(upstreamPort: b.port, faults: .init(delay: 0.02))
        defer { proxy.stop() }
        let slow: JSONObject = ["source": "source", "worker_batch_size": 25, "worker_processes": 1, "checkpoint_interval": 100]
        var continuous = slow
        continuous["target"] = JSONValue(proxy.url + "/continuous")
        continuous["continuous"] = true
        var once = slow
        once["target"] = JSONValue(proxy.url + "/once")
        try await a.call("PUT", "/_replicator/continuous", body: .object(continuous))
        try await a.call("PUT", "/_replicator/once", body: .object(once))
        #expect(try await eventually(30) {
            let counts = (try await b.documentCount("continuous"), try await b.documentCount("once"))
            return counts.0 >= Self.total / 3 && counts.1 >= Self.total / 3
        })

        let onceID = try #require(try await a.call("GET", "/_scheduler/docs/_replicator/once").json["id"]?.stringValue)
        // Stopping the server stops its jobs after a last checkpoint, as CouchDB does.
        a.stop(keepData: true)
        try await Task.sleep(nanoseconds: 500_000_000)
        let before = (try await b.documentCount("continuous"), try await b.documentCount("once"))
        #expect(before.0 < Self.total && before.1 < Self.total, "caught half-way: \(before)")

        let restarted = try TestServer(directory: a.directory)
        defer { restarted.stop() }
        let completed = try await poll(60) { () async throws -> JSONValue? in
            let doc = try await restarted.call("GET", "/_replicator/once").json
            return doc["_replication_state"] == "completed" ? doc : JSONValue?.none
        }
        let stats = try #require(completed?["_replication_stats"])
        // The job's counters go on from its checkpoint's (CouchDB's max_stats).
        let onceLog = try await restarted.call("GET", "/source/_local/\(ReplicationID.baseID(ofJobID: onceID))").json
        #expect(addedByLastRun(onceLog, "docs_written") == Self.total - before.1, "nothing a checkpoint covers is copied again")
        #expect(stats["docs_written"] == onceLog["history"]?[0]?["docs_written"])
        #expect(try await b.documentCount("once") == Self.total)
        #expect(try await eventually(30) { try await b.documentCount("continuous") == Self.total })
        #expect(try await state(restarted, "continuous") == "running")
        // The continuous job's session after the restart began at its checkpoint.
        let jobID = try #require(try await restarted.call("GET", "/_scheduler/docs/_replicator/continuous").json["id"]?.stringValue)
        let base = ReplicationID.baseID(ofJobID: jobID)
        #expect(try await eventually(10) {
            let log = try await restarted.call("GET", "/source/_local/\(base)").json
            let entry = log["history"]?[0]
            return addedByLastRun(log, "docs_written") == Self.total - before.0 && (sequenceNumber(entry?["start_last_seq"]) ?? 0) > 0
        })
        #expect(try await restarted.revisionTrees("source") == b.revisionTrees("once"))
        #expect(try await restarted.revisionTrees("source") == b.revisionTrees("continuous"))
    }

    @Test func aJobWhosePeerGoesAwayCrashesAndComesBackByItself() async throws {
        let a = try TestServer()
        let b = try TestServer()
        let (directory, port) = (b.directory, b.port)
        defer { a.stop(); b.stop() }
        a.replications.jobBackoff = Backoff(initialMilliseconds: 100, maximumMilliseconds: 400)
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.call("PUT", "/_replicator/job", body: [
            "source": "source", "target": JSONValue(b.url + "/target"), "continuous": true, "retries_per_request": 0,
        ])
        try await a.call("PUT", "/source/one", body: ["n": 1])
        #expect(try await eventually { try await b.documentCount("target") == 1 })
        #expect(try await state(a, "job") == "running")

        b.stop(keepData: true)
        try await a.call("PUT", "/source/two", body: ["n": 2])
        // The entry that shows it crashing shows its error (read once: the state may move on).
        let entry = try await poll(30) { () async throws -> JSONValue? in
            let entry = try await a.call("GET", "/_scheduler/docs/_replicator/job").json
            // (`.none`, not `nil`: JSONValue reads `nil` as its own `null`.)
            return entry["state"] == "crashing" ? entry : Optional<JSONValue>.none
        } ?? .null
        #expect((entry["error_count"]?.intValue ?? 0) > 0, "\(entry.serializedString())")
        #expect(entry["info"]?["error"]?.stringValue != nil, "\(entry.serializedString())")
        let history = try await a.call("GET", "/_scheduler/jobs").json["jobs"]?[0]?["history"]?.arrayValue ?? []
        #expect(history.contains { $0["type"] == "crashed" && $0["reason"]?.stringValue != nil })

        let back = try TestServer(directory: directory) { $0.port = port }
        defer { back.stop() }
        #expect(try await eventually { try await back.documentCount("target") == 2 })
        #expect(try await eventually { try await state(a, "job") == "running" })
    }

    @Test func aOneShotDocumentWhosePeerIsDownAtTheStartWaitsForIt() async throws {
        let a = try TestServer()
        let b = try TestServer()
        let (directory, port, url) = (b.directory, b.port, b.url)
        defer { a.stop() }
        try await b.call("PUT", "/target")
        b.stop(keepData: true)
        a.replications.jobBackoff = Backoff(initialMilliseconds: 100, maximumMilliseconds: 400)
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 5)
        try await a.call("PUT", "/_replicator/later", body: [
            "source": "source", "target": JSONValue(url + "/target"), "retries_per_request": 0,
        ])
        #expect(try await eventually { try await state(a, "later") == "crashing" })
        #expect(try await a.call("GET", "/_replicator/later").json["_replication_state"] == nil, "not failed")
        let back = try TestServer(directory: directory) { $0.port = port }
        defer { back.stop() }
        #expect(try await eventually { try await a.call("GET", "/_replicator/later").json["_replication_state"] == "completed" })
        #expect(try await back.documentCount("target") == 5)
    }

    @Test func jobsBeyondMaxJobsWaitAndTakeTurns() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.replicator.maxJobs = 1
        configuration.replicator.maxChurn = 1
        configuration.replicator.intervalMilliseconds = 300
        let a = try TestServer(configuration: configuration)
        defer { a.stop() }
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 10)
        for name in ["first", "second"] {
            try await a.call("PUT", "/_replicator/\(name)", body: [
                "source": "source", "target": JSONValue(name), "create_target": true, "continuous": true,
            ])
        }
        #expect(try await eventually {
            let states = [try await state(a, "first"), try await state(a, "second")]
            return states.contains("running") && states.contains("pending")
        })
        #expect(try await a.call("GET", "/_scheduler/jobs").json["total_rows"] == 2)
        // Each interval rotates one job out for the other: both get their turn.
        #expect(try await eventually(10) {
            let counts = (try await a.documentCount("first"), try await a.documentCount("second"))
            return counts == (10, 10)
        })
        try await a.call("PUT", "/source/late", body: ["n": 1])
        #expect(try await eventually(10) {
            let counts = (try await a.documentCount("first"), try await a.documentCount("second"))
            return counts == (11, 11)
        })
    }

    @Test func maxJobsSetThroughConfigTakesEffectWithoutARestart() async throws {
        let a = try TestServer()
        defer { a.stop() }
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 3)
        for name in ["first", "second"] {
            try await a.call("PUT", "/_replicator/\(name)", body: [
                "source": "source", "target": JSONValue(name), "create_target": true, "continuous": true,
            ])
        }
        #expect(try await eventually { [try await state(a, "first"), try await state(a, "second")] == ["running", "running"] })

        let old = try await a.call("PUT", "/_node/_local/_config/replicator/max_jobs", body: "1")
        #expect(old.status == 200)
        #expect(try await eventually {
            let states = [try await state(a, "first"), try await state(a, "second")]
            return states.compactMap { $0 }.sorted() == ["pending", "running"]
        })

        try await a.call("DELETE", "/_node/_local/_config/replicator/max_jobs")
        #expect(try await eventually { [try await state(a, "first"), try await state(a, "second")] == ["running", "running"] })
    }
}

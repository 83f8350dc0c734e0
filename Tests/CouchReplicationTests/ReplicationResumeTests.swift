import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// Stopping a replication half-way and starting it again: it resumes at its checkpoint,
/// copies nothing twice that the checkpoint covers, and loses nothing.
@Suite(.serialized) struct ReplicationResumeTests {
    static let total = 1500

    /// A replication slowed down by a proxy in front of the target, so it can be caught half-way.
    func slowBody(_ b: TestServer, proxy: FaultyProxy) -> JSONValue {
        ["source": "source", "target": JSONValue(proxy.url + "/target"), "worker_batch_size": 25,
         "worker_processes": 1, "checkpoint_interval": 100]
    }

    func prepare() async throws -> (TestServer, TestServer, FaultyProxy) {
        let (a, b) = (try TestServer(), try TestServer())
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.fill("source", count: Self.total)
        // Slow enough that a loaded machine still catches the replication half-way.
        let proxy = try FaultyProxy(upstreamPort: b.port, faults: .init(delay: 0.01))
        return (a, b, proxy)
    }

    /// Waits until the running replication has written at least `count` documents.
    func waitForProgress(_ server: TestServer, atLeast count: Int) async throws -> JSONValue {
        let task = try await poll(30) { () async throws -> JSONValue? in
            let task = try await server.call("GET", "/_active_tasks").json[0]
            return (task?["docs_written"]?.intValue ?? 0) >= count ? task : nil
        }
        #expect(task != nil)
        return task ?? .null
    }

    @Test func aCancelledReplicationResumesAtItsCheckpoint() async throws {
        let (a, b, proxy) = try await prepare()
        defer { a.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        let body = slowBody(b, proxy: proxy)
        let first = Task { try await a.replicate(body) }
        let task = try await waitForProgress(a, atLeast: Self.total / 3)
        let jobID = try #require(task["replication_id"]?.stringValue)
        #expect(try await a.replicate(["replication_id": JSONValue(jobID), "cancel": true]).status == 200)
        let interrupted = try await first.value.json
        #expect(interrupted["error"] == "stopped")
        try await Task.sleep(nanoseconds: 300_000_000)  // a write the proxy was forwarding lands

        // The stop wrote a last checkpoint on both sides.
        let base = ReplicationID.baseID(ofJobID: jobID)
        let checkpoint = try #require(sequenceNumber(try await a.call("GET", "/source/_local/\(base)").json["source_last_seq"]))
        #expect(sequenceNumber(try await b.call("GET", "/target/_local/\(base)").json["source_last_seq"]) == checkpoint)
        #expect(checkpoint > 0 && checkpoint < Self.total)
        let writtenBefore = try await b.documentCount("target")

        let result = try await a.replicate(body).json
        let entry = try #require(result["history"]?[0])
        #expect(sequenceNumber(entry["start_last_seq"]) == checkpoint)
        // The counters go on from the interrupted session's (CouchDB's are the replication's).
        let previous = try #require(result["history"]?[1])
        func added(_ name: String) -> Int? { entry[name]?.intValue.flatMap { now in previous[name]?.intValue.map { now - $0 } } }
        #expect(added("missing_checked") == Self.total - checkpoint, "only what follows the checkpoint is looked at")
        #expect(added("missing_found") == Self.total - writtenBefore, "nothing already written is copied again")
        #expect(added("docs_written") == added("missing_found"))
        #expect(result["history"]?.arrayValue?.count == 2)
        #expect(try await b.documentCount("target") == Self.total)
        #expect(try await a.revisionTrees("source") == b.revisionTrees("target"))
    }

    @Test func aReplicationWhoseTargetRestartsCompletes() async throws {
        let (a, b, proxy) = try await prepare()
        let (directory, port) = (b.directory, b.port)
        defer { a.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        a.replications.jobBackoff = Backoff(initialMilliseconds: 100, maximumMilliseconds: 400)
        var body = slowBody(b, proxy: proxy).objectValue!
        body["retries_per_request"] = 1
        let request = JSONValue.object(body)    // a `var` captured by the task would not be Sendable
        let replication = Task { try await a.replicate(request) }
        _ = try await waitForProgress(a, atLeast: Self.total / 3)
        b.stop(keepData: true)
        #expect(try await eventually {
            let status = try await a.call("GET", "/_active_tasks").json[0]?["status"]
            return status == "crashing" || status == "offline"
        })
        // The status shows the first failed request; wait for the session itself to fail.
        #expect(try await eventually { a.replications.replications.first?.consecutiveFailures ?? 0 > 0 })
        let restarted = try TestServer(directory: directory) { $0.port = port }
        defer { restarted.stop() }
        let result = try await replication.value.json
        #expect(result["ok"] == true, "\(result.serializedString())")
        #expect(try await restarted.documentCount("target") == Self.total)
        #expect(try await a.revisionTrees("source") == restarted.revisionTrees("target"))
        // The session after the restart began at a checkpoint, not at zero.
        let history = try #require(result["history"]?.arrayValue)
        #expect(history.count >= 2)
        #expect((sequenceNumber(history[0]["start_last_seq"]) ?? 0) > 0)
        // A new run finds nothing to do.
        #expect(try await a.replicate(.object(body)).json["no_changes"] == true)
    }

    @Test func aReplicatingServerThatRestartsResumesFromItsCheckpoint() async throws {
        let (a, b, proxy) = try await prepare()
        defer { a.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        let body = slowBody(b, proxy: proxy)
        let first = Task { try await a.replicate(body) }
        _ = try await waitForProgress(a, atLeast: Self.total / 3)
        // Shutting down stops the jobs after a last checkpoint, as CouchDB does.
        a.replications.stopAll()
        _ = try await first.value
        try await Task.sleep(nanoseconds: 300_000_000)
        a.stop(keepData: true)
        let restarted = try TestServer(directory: a.directory)
        defer { restarted.stop() }
        let writtenBefore = try await b.documentCount("target")
        let result = try await restarted.replicate(body).json
        let entry = try #require(result["history"]?[0])
        let start = try #require(sequenceNumber(entry["start_last_seq"]))
        #expect(start > 0)
        let previous = try #require(result["history"]?[1])
        func added(_ name: String) -> Int? { entry[name]?.intValue.flatMap { now in previous[name]?.intValue.map { now - $0 } } }
        #expect(added("missing_checked") == Self.total - start, "\(result.serializedString())")
        #expect(added("docs_written") == Self.total - writtenBefore)
        #expect(try await b.documentCount("target") == Self.total)
    }
}

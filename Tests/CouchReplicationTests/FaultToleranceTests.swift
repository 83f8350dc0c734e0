import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// Replication through proxies that drop connections (before or after forwarding) and
/// answer 500 at random: every failed request is retried, and the databases end identical.
@Suite(.serialized) struct FaultToleranceTests {
    @Test func aReplicationThroughAFaultyNetworkCompletesWithIdenticalDatabases() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let faults = FaultyProxy.Faults(dropBefore: 0.08, dropAfter: 0.08, serverError: 0.08)
        let toSource = try FaultyProxy(upstreamPort: a.port, faults: faults, seed: 1)
        let toTarget = try FaultyProxy(upstreamPort: b.port, faults: faults, seed: 2)
        defer { a.replications.stopAll(); toSource.stop(); toTarget.stop(); a.stop(); b.stop() }
        a.replications.jobBackoff = Backoff(initialMilliseconds: 50, maximumMilliseconds: 200)
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.fill("source", count: 600)
        // Some history and conflicts, so that trees (not only winners) must match.
        try await a.putDocuments("source", [
            ["_id": "doc00001", "_rev": "2-x", "_revisions": ["start": 2, "ids": ["x", "y"]], "branch": "x"],
        ], newEdits: false)
        for index in stride(from: 0, to: 600, by: 50) {
            let id = String(format: "doc%05d", index)
            let rev = try await a.call("GET", "/source/\(id)").json["_rev"]!.stringValue!
            try await a.call("DELETE", "/source/\(id)?rev=\(rev)")
        }
        let (status, result) = try await a.replicate([
            "source": JSONValue(toSource.url + "/source"), "target": JSONValue(toTarget.url + "/target"),
            "worker_batch_size": 50, "checkpoint_interval": 200,
        ])
        #expect(status == 200)
        #expect(result["ok"] == true, "\(result.serializedString())")
        #expect(toSource.faultsInjected + toTarget.faultsInjected > 10, "the network really was faulty")
        #expect(try await a.revisionTrees("source") == b.revisionTrees("target"))
        #expect(try await b.documentCount("target") == a.documentCount("source"))
    }
}

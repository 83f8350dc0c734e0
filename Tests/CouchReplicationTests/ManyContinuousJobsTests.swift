import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A continuous replication per user database towards one peer, as devices and services
/// deploy them: every job runs and delivers, however many feed from the same host.
@Suite struct ManyContinuousJobsTests {
    @Test func aHundredContinuousJobsToOneHostAllRunAndDeliver() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        let count = 100
        for index in 0..<count {
            try await b.call("PUT", "/source\(index)")
            try await a.call("PUT", "/target\(index)")
            // Each job's continuous feed comes from b over HTTP.
            #expect(try await a.call("PUT", "/_replicator/job\(index)", body: [
                "source": JSONValue(b.url + "/source\(index)"), "target": JSONValue("target\(index)"), "continuous": true,
            ]).status == 201)
        }
        #expect(try await eventually(60) {
            let docs = try await a.call("GET", "/_scheduler/docs?limit=1000").json["docs"]?.arrayValue ?? []
            return docs.count == count && docs.allSatisfy { $0["state"] == "running" }
        })
        // A new document in every source reaches its target.
        for index in 0..<count { try await b.call("PUT", "/source\(index)/new", body: ["n": JSONValue(index)]) }
        for index in 0..<count {
            #expect(try await eventually(60) { try await a.call("GET", "/target\(index)/new").status == 200 }, "job\(index)")
        }
        let docs = try await a.call("GET", "/_scheduler/docs?limit=1000").json["docs"]?.arrayValue ?? []
        #expect(docs.filter { $0["state"] == "running" }.count == count)
    }
}

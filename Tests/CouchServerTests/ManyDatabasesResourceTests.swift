import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Many databases through the real binary: memory comes back after they are deleted, and
/// descriptors stay bounded by `max_dbs_open` while thousands are opened in turn.
/// (`scripts/resource-check` runs the full-size forms: 600 databases per cycle, 5,000 opened.)
@Suite struct ManyDatabasesResourceTests {
    private func descriptorCount(_ server: ServerProcess) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.process.processIdentifier)/fd"))?.count ?? 0
    }

    /// Creates, fills, reads and deletes `count` databases.
    private func cycle(_ connection: HTTPTestConnection, count: Int) throws {
        let documents = (0..<20).map { #"{"_id":"d\#($0)","v":"\#(String(repeating: "x", count: 200))"}"# }
        let bulk = #"{"docs":[\#(documents.joined(separator: ","))]}"#
        for index in 0..<count {
            #expect(try connection.request("PUT", "/cycle\(index)").status == 201)
            #expect(try connection.request("POST", "/cycle\(index)/_bulk_docs", json: bulk).status == 201)
            #expect(try connection.request("GET", "/cycle\(index)/_all_docs?include_docs=true").status == 200)
        }
        for index in 0..<count {
            #expect(try connection.request("DELETE", "/cycle\(index)").status == 200)
        }
    }

    @Test func memoryComesBackAfterDatabasesAreCreatedUsedAndDeleted() throws {
        let server = try ServerProcess(arguments: ["--log-level", "warning"])
        defer { server.stop() }
        let connection = try HTTPTestConnection(port: server.port, timeout: 60)
        defer { connection.close() }
        // A first small cycle brings up what every server keeps (statement caches, pools).
        try cycle(connection, count: 10)
        Thread.sleep(forTimeInterval: 1)
        let start = try #require(server.status("VmRSS"))
        try cycle(connection, count: 150)
        // Freed memory is given back a moment after the deletions, off the request threads.
        var after = try #require(server.status("VmRSS"))
        for _ in 0..<20 where Double(after) > Double(start) * 1.2 {
            Thread.sleep(forTimeInterval: 0.25)
            after = try #require(server.status("VmRSS"))
        }
        guard Sanitizer.memoryFiguresAreMeaningful else { return }
        #expect(Double(after) <= Double(start) * 1.2, "RSS \(start) kB before, \(after) kB after 150 databases")
    }

    @Test func descriptorsStayBoundedWhileManyDatabasesAreOpenedInTurn() throws {
        let server = try ServerProcess(arguments: ["--log-level", "warning"],
                                       environment: ["COUCHETTE_COUCHDB__MAX_DBS_OPEN": "20"])
        defer { server.stop() }
        let connection = try HTTPTestConnection(port: server.port, timeout: 60)
        defer { connection.close() }
        let before = descriptorCount(server)
        var peak = before
        for index in 0..<200 {
            #expect(try connection.request("PUT", "/open\(index)").status == 201)
            #expect(try connection.request("PUT", "/open\(index)/doc", json: "{}").status == 201)
            peak = max(peak, descriptorCount(server))
        }
        // Each open database holds a handful of descriptors; 200 would hold a thousand.
        #expect(peak - before < 20 * 8, "descriptors grew from \(before) to \(peak)")
        #expect(try connection.request("GET", "/open0/doc").status == 200)
    }
}

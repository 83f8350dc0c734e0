import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `[couchdb] max_dbs_open`: idle databases are closed beyond it, busy ones never.
@Suite struct OpenDatabaseLimitTests {
    /// Descriptors of this process open on files of `directory` (other tests run beside this one).
    private func openDescriptors(in directory: String) -> Int {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.filter { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + descriptor))?
                .hasPrefix(directory) ?? false
        }.count
    }

    @Test func idleDatabasesAreClosedAndFeedsKeepTheirs() throws {
        var configuration = ServerConfiguration.testing()
        configuration.maximumOpenDatabases = 8
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        try server.createDatabase("watched")
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        _ = try connection.startStreaming("GET", "/watched/_changes?feed=continuous&since=now&heartbeat=1000")

        let directory = URL(fileURLWithPath: server.directory).resolvingSymlinksInPath().path
        for index in 0..<60 {
            try server.createDatabase("db\(index)")
            try server.put("db\(index)", "doc", "{}")
        }
        #expect(server.databases.openCount <= 8)
        #expect(server.databases.closedIdleCount >= 50)
        // Each open database holds several descriptors (file, WAL, readers); 60 would hold hundreds.
        let held = openDescriptors(in: directory)
        #expect(held > 0)
        #expect(held < 8 * 8 + 4, "\(held) descriptors on the data directory")

        // The database with a running feed stayed open: a write reaches the feed.
        try server.put("watched", "late", "{}")
        var line = try connection.readLine(timeout: 5)
        while line == "" { line = try connection.readLine(timeout: 5) }
        #expect(try JSONValue.parse(try #require(line))["id"] == "late")

        // Closed databases reopen on use, with their documents.
        #expect(try server.json("GET", "/db0/doc").status == 200)
        #expect(try server.json("GET", "/db0").json["doc_count"] == 1)
        // The limit is live configuration.
        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/max_dbs_open", body: #""3""#).json == "8")
        for index in 0..<10 { #expect(try server.request("GET", "/db\(index)").status == 200) }
        #expect(server.databases.openCount <= 4)
    }
}

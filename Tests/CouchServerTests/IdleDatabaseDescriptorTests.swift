import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Many databases open, few descriptors: a database unused for a while closes its SQLite
/// connections (and holds no directory open), so a server with hundreds of open databases
/// keeps its descriptors for clients.
@Suite struct IdleDatabaseDescriptorTests {
    @Test func idleOpenDatabasesHoldAtMostTwoDescriptorsEach() throws {
        let server = try ServerProcess()
        defer { _ = server.stop() }
        let port = server.port
        let descriptors = { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.process.processIdentifier)/fd").count) ?? 0 }
        let before = descriptors()
        let count = 100
        for index in 0..<count {
            #expect(try httpRequest(port: port, "PUT", "/db\(index)").status == 201)
            #expect(try httpRequest(port: port, "PUT", "/db\(index)/doc", body: Array(#"{"n":1}"#.utf8)).status == 201)
            #expect(try httpRequest(port: port, "GET", "/db\(index)/doc").status == 200)
        }
        let busy = descriptors()
        #expect(busy - before >= count, "each database in use holds descriptors (\(busy - before))")
        // Unused for the idle time (10 s), they let them go.
        let deadline = Date().addingTimeInterval(30)
        while descriptors() - before > 2 * count, Date() < deadline { Thread.sleep(forTimeInterval: 0.5) }
        #expect(descriptors() - before <= 2 * count, "\(descriptors() - before) descriptors for \(count) idle databases")
        // And they still answer, reads and writes alike.
        for index in stride(from: 0, to: count, by: 10) {
            #expect(try httpRequest(port: port, "GET", "/db\(index)/doc").status == 200)
            #expect(try httpRequest(port: port, "PUT", "/db\(index)/more", body: Array("{}".utf8)).status == 201)
            #expect(try JSONValue.parse(httpRequest(port: port, "GET", "/db\(index)").body)["doc_count"] == 2)
        }
    }
}

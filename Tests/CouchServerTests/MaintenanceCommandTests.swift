import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `couchette version` and `couchette compact`, run as a user runs them.
@Suite struct MaintenanceCommandTests {
    private func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = ServerProcess.executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func versionAndCompact() throws {
        let version = try run(["version"])
        #expect(version.status == 0)
        #expect(version.output.hasPrefix("Couchette ") && version.output.contains("SQLite 3."))

        let server = try ServerProcess()
        let port = server.port
        #expect(try httpRequest(port: port, "PUT", "/db").status == 201)
        var rev = ""
        for index in 0..<20 {
            let body = rev.isEmpty ? #"{"n":0}"# : #"{"_rev":"\#(rev)","n":\#(index)}"#
            let response = try httpRequest(port: port, "PUT", "/db/doc", headers: [("Content-Type", "application/json")],
                                           body: Array(body.utf8))
            rev = try JSONValue.parse(response.body)["rev"]?.stringValue ?? ""
        }
        _ = server.stop(keepData: true)
        let compacted = try run(["compact", "--data-dir", server.directory, "db"])
        #expect(compacted.status == 0, "\(compacted.output)")
        #expect(compacted.output.hasPrefix("db: "))
        #expect(try run(["compact", "--data-dir", server.directory, "Not A Name"]).status != 0)

        let restarted = try ServerProcess(directory: server.directory)
        defer { _ = restarted.stop() }
        let document = try JSONValue.parse(try httpRequest(port: restarted.port, "GET", "/db/doc").body)
        #expect(document["n"] == 19)
    }
}

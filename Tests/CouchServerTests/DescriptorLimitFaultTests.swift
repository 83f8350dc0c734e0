import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// No file descriptor left: the server process's RLIMIT_NOFILE lowered from outside (prlimit)
/// to nothing (the descriptors it has stay open), so opening a database, a blob's staging file or the data
/// directory fails. Every answer is a success or CouchDB's error JSON (never a wrong answer,
/// nor a crash), a refused write leaves nothing, and all works again once the limit is raised.
@Suite struct DescriptorLimitFaultTests {
    /// CPU time the process has used (user and system), from /proc.
    private func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let afterName = stat.range(of: ") ") else { return 0 }
        let fields = stat[afterName.upperBound...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A success, or an error in CouchDB's JSON with a server's status (the client did no wrong).
    private func expectSuccessOrServerError(_ response: HTTPTestResponse, _ what: String) {
        if (200..<300).contains(response.status) { return }
        #expect(response.status >= 500, "\(what): \(response.status) \(response.text)")
        let json = try? JSONValue.parse(response.body)
        #expect(json?["error"]?.stringValue?.isEmpty == false && json?["reason"]?.stringValue != nil,
                "\(what): \(response.status) \(response.text)")
    }

    @Test func withNoDescriptorLeftTheServerAnswersErrorsAndRecovers() throws {
        let server = try ServerProcess(arguments: ["--log-level", "critical"])
        defer { server.stop() }
        let pid = server.process.processIdentifier
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        #expect(try connection.request("PUT", "/a").status == 201)
        var revisions: [String: String] = [:]
        for index in 0..<5 {
            let response = try connection.request("PUT", "/a/d\(index)", json: #"{"n":\#(index)}"#)
            #expect(response.status == 201)
            revisions["d\(index)"] = try JSONValue.parse(response.body)["rev"]?.stringValue
        }
        let body = [UInt8](repeating: 42, count: 100_000)
        let attached = try connection.request("PUT", "/a/attached/f.bin", headers: [("Content-Type", "application/octet-stream")], body: body)
        #expect(attached.status == 201)
        #expect(try connection.request("GET", "/a/d0").status == 200)
        let databases = try JSONValue.parse(try connection.request("GET", "/_all_dbs").body).arrayValue ?? []
        #expect(databases.contains("a"))

        // A limit of 0: no new descriptor of any number, however many are closed meanwhile.
        #expect(setResourceLimit(pid, RLIMIT_NOFILE, to: 0))
        expectSuccessOrServerError(try connection.request("PUT", "/b"), "PUT /b")
        let upload = try connection.request("PUT", "/a/refused/f.bin", headers: [("Content-Type", "application/octet-stream")], body: body)
        expectSuccessOrServerError(upload, "attachment upload")
        let listing = try connection.request("GET", "/_all_dbs")
        expectSuccessOrServerError(listing, "_all_dbs")
        if listing.status == 200 {
            #expect(try JSONValue.parse(listing.body) == .array(databases),
                    "a listing is right or not at all: \(listing.text), not \(JSONValue.array(databases).serializedString())")
        }
        for (id, rev) in revisions {
            let read = try connection.request("GET", "/a/\(id)")
            expectSuccessOrServerError(read, "GET \(id)")
            if read.status == 200 { #expect(try JSONValue.parse(read.body)["_rev"]?.stringValue == rev) }
        }
        expectSuccessOrServerError(try connection.request("GET", "/a/attached/f.bin"), "attachment read")
        // A new connection finds the server full (503 with CouchDB's JSON) or closed.
        if let newcomer = try? HTTPTestConnection(port: server.port, timeout: 2),
           let answer = try? newcomer.request("GET", "/") {
            expectSuccessOrServerError(answer, "a new connection")
            newcomer.close()
        }
        #expect(server.process.isRunning, "the server survived")
        // The connection it could not accept waits in the listening socket's queue, which stays
        // readable: the server waits for descriptors rather than spinning on it.
        let cpuBefore = cpuSeconds(pid)
        Thread.sleep(forTimeInterval: 1)
        let cpuUsed = cpuSeconds(pid) - cpuBefore
        #expect(cpuUsed < 0.5, "\(cpuUsed) s of CPU in a second of waiting")

        // Descriptors again: everything works, and the refused writes left nothing.
        #expect(setResourceLimit(pid, RLIMIT_NOFILE, to: nil))
        let fresh = try HTTPTestConnection(port: server.port)
        defer { fresh.close() }
        if upload.status != 201 { #expect(try fresh.request("GET", "/a/refused").status == 404) }
        let created = try fresh.request("PUT", "/b")
        #expect(created.status == 201 || created.status == 412, "\(created.text)")
        let names = try JSONValue.parse(try fresh.request("GET", "/_all_dbs").body).arrayValue ?? []
        #expect(Set(names.compactMap(\.stringValue)) == Set(databases.compactMap(\.stringValue) + ["b"]))
        let retried = try fresh.request("PUT", "/a/after/f.bin", headers: [("Content-Type", "application/octet-stream")], body: body)
        #expect(retried.status == 201, "\(retried.text)")
        #expect(try fresh.request("GET", "/a/after/f.bin").body == body)
        #expect(try fresh.request("PUT", "/b/doc", json: "{}").status == 201)
        for (id, rev) in revisions {
            #expect(try JSONValue.parse(try fresh.request("GET", "/a/\(id)").body)["_rev"]?.stringValue == rev)
        }
        #expect(DatabaseFiles.blobs(of: "a", in: server.directory).staging.isEmpty)
        fresh.close()
        connection.close()
        server.stop(keepData: true)
        for file in DatabaseFiles.sqliteFiles(in: server.directory) {
            #expect(DatabaseFiles.integrityCheck(file) == "ok", "\(file)")
        }
        try? FileManager.default.removeItem(atPath: server.directory)
    }
}

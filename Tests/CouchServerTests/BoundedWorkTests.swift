import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Work a request asks for is bounded and stops with its client: `_bulk_get` answers many
/// documents in order (JSON and multipart) and stops when its client hangs up; a
/// `multipart/related` upload holds no descriptor per attachment and takes a bounded number
/// of them; patterns that make backtracking matchers take minutes answer at once.
@Suite struct BoundedWorkTests {
    /// `couchdb.httpd.aborted_requests` of `_stats`: requests whose work stopped because
    /// their client hung up.
    static func abortedRequests(_ server: TestServer) throws -> Int {
        try server.json("GET", "/_node/_local/_stats/couchdb/httpd/aborted_requests").json["value"]?.intValue ?? -1
    }

    @Test(arguments: ["application/json", "multipart/mixed"])
    func bulkGetStopsWhenItsClientHangsUp(accept: String) throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "a", #"{"v":1}"#)
        #expect(try Self.abortedRequests(server) == 0)
        // Seconds of work (one read per id), sent whole, then the client goes.
        let ids = Array(repeating: #"{"id":"a"}"#, count: 300_000).joined(separator: ",")
        let body = Array(#"{"docs":[\#(ids)]}"#.utf8)
        let connection = try HTTPTestConnection(port: server.port)
        try connection.writeRaw(Array("POST /db/_bulk_get HTTP/1.1\r\nHost: x\r\nAccept: \(accept)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
        Thread.sleep(forTimeInterval: 0.5)
        connection.close()
        // The work stops (it is counted as aborted only when it gave up before its end).
        let deadline = Date().addingTimeInterval(30)
        while try Self.abortedRequests(server) == 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(try Self.abortedRequests(server) == 1)
        #expect(try server.json("POST", "/db/_bulk_get", body: #"{"docs":[{"id":"a"}]}"#).json["results"]?[0]?["docs"]?[0]?["ok"]?["v"] == 1)
    }

    @Test func bulkGetAnswersEveryDocumentInOrderAsJSONAndMultipart() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let count = 5_000
        for start in stride(from: 0, to: count, by: 1_000) {
            let docs = (start..<start + 1_000).map { #"{"_id":"d\#($0)","n":\#($0)}"# }.joined(separator: ",")
            #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(docs)]}"#).status == 201)
        }
        let attached = try server.put("db", "with-file", "{}")
        #expect(try server.request("PUT", "/db/with-file/f.txt?rev=\(attached)", headers: [("Content-Type", "application/octet-stream")],
                                   body: "file body").status == 201)
        var asked = (0..<count).map { #"{"id":"d\#($0)"}"# }
        asked.insert(#"{"id":"with-file"}"#, at: 2_500)
        asked.append(#"{"id":"missing"}"#)
        let body = #"{"docs":[\#(asked.joined(separator: ","))]}"#

        let json = try server.json("POST", "/db/_bulk_get", body: body).json
        let results = try #require(json["results"]?.arrayValue)
        #expect(results.count == count + 2)
        #expect(results[0]["docs"]?[0]?["ok"]?["n"] == 0)
        #expect(results[count + 1]["docs"]?[0]?["error"]?["error"] == "not_found")
        #expect(results.filter { $0["docs"]?[0]?["ok"] != nil }.count == count + 1)

        let multipart = try server.request("POST", "/db/_bulk_get?attachments=true", headers: [("Accept", "multipart/mixed")],
                                           body: body)
        #expect(multipart.status == 200)
        let parts = try MultipartParts(multipart)
        #expect(parts.bodies.count == count + 2)
        for (index, position) in [0, 1_000, 2_499, 2_501, count].enumerated() {
            let document = try JSONValue.parse(Array(parts.bodies[position].utf8))
            #expect(document["n"] == JSONValue(index == 4 ? count - 1 : position - (position > 2_500 ? 1 : 0)),
                    "part \(position): \(parts.bodies[position].prefix(200))")
        }
        #expect(parts.headers[2_500].contains("multipart/related"), "the document with its file is a related part")
        #expect(parts.bodies[2_500].contains("file body"))
        #expect(parts.headers[count + 1].contains("error=\"true\""))
    }

    @Test func multipartUploadsHoldNoDescriptorPerAttachmentAndAreBounded() throws {
        let server = try ServerProcess(arguments: ["--log-level", "critical"])
        defer { server.stop() }
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        #expect(try connection.request("PUT", "/db").status == 201)
        func upload(_ id: String, attachments: Int) throws -> HTTPTestResponse {
            let boundary = "bound\(attachments)"
            let names = (0..<attachments).map { "a\($0).txt" }
            let stubs = names.map { #""\#($0)":{"follows":true,"content_type":"text/plain","length":\#($0.utf8.count)}"# }
            var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n{\"_attachments\":{\(stubs.joined(separator: ","))}}".utf8)
            for name in names {
                body += Array("\r\n--\(boundary)\r\nContent-Disposition: attachment; filename=\"\(name)\"\r\n\r\n\(name)".utf8)
            }
            body += Array("\r\n--\(boundary)--".utf8)
            return try connection.request("PUT", "/db/\(id)", headers: [("Content-Type", "multipart/related; boundary=\"\(boundary)\"")],
                                          body: body)
        }
        // Room for 200 more descriptors than the server has open: an upload that held one per
        // attachment until the end could not take 600.
        let pid = server.process.processIdentifier
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        #expect(setResourceLimit(pid, RLIMIT_NOFILE, to: UInt64(open + 200)))
        let accepted = try upload("many", attachments: 600)
        #expect(accepted.status == 201, "\(accepted.status) \(accepted.text)")
        let stored = try JSONValue.parse(try connection.request("GET", "/db/many").body)
        #expect(stored["_attachments"]?.objectValue?.count == 600)
        #expect(try connection.request("GET", "/db/many/a599.txt").text == "a599.txt")
        #expect(setResourceLimit(pid, RLIMIT_NOFILE, to: nil))

        // One part more than a request may carry: 413, and nothing written.
        let refused = try upload("too-many", attachments: 1_001)
        #expect(refused.status == 413, "\(refused.status) \(refused.text)")
        #expect(try JSONValue.parse(refused.body)["error"] == "too_large")
        #expect(try connection.request("GET", "/db/too-many").status == 404)
        let staging = (try? FileManager.default.contentsOfDirectory(atPath: server.directory)) ?? []
        for directory in staging where directory.hasSuffix(".attachments") {
            let path = server.directory + "/" + directory + "/staging"
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).isEmpty, "staging files left in \(path)")
        }
    }

    /// The patterns of CVE-style regular-expression denial of service answer at once with the
    /// right rows, in `_find` and in a `_changes` selector (which runs on a listener thread).
    @Test func catastrophicRegexPatternsAnswerInFindAndChanges() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "exact", #"{"s":"\#(String(repeating: "a", count: 38))"}"#)
        try server.put("db", "bang", #"{"s":"\#(String(repeating: "a", count: 38))!"}"#)
        try server.put("db", "long", #"{"s":"\#(String(repeating: "a", count: 5_000))"}"#)
        func found(_ pattern: String) throws -> [String] {
            let (status, json) = try server.json("POST", "/db/_find", body: #"{"selector":{"s":{"$regex":"\#(pattern)"}}}"#)
            #expect(status == 200, "\(pattern): \(json.serializedString())")
            return (json["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }.sorted()
        }
        func changed(_ pattern: String) throws -> [String] {
            let (status, json) = try server.json("POST", "/db/_changes?filter=_selector",
                                                 body: #"{"selector":{"s":{"$regex":"\#(pattern)"}}}"#)
            #expect(status == 200, "\(pattern): \(json.serializedString())")
            return (json["results"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }.sorted()
        }
        for answer in [found, changed] {
            #expect(try answer("^(a|aa)+$") == ["exact", "long"])
            #expect(try answer("(a|a)*b") == [])
            #expect(try answer("^(a+)+$") == ["exact", "long"])
            #expect(try answer("a!$") == ["bang"])
        }
        // What RE2 does not offer is refused as an invalid pattern.
        let backreference = try server.json("POST", "/db/_find", body: #"{"selector":{"s":{"$regex":"(a)\\1"}}}"#)
        #expect(backreference.status == 400, "\(backreference.json.serializedString())")
    }
}
